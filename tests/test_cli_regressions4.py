"""``bidlab`` on small and awkward inputs: the demo's word bounds, ``--holdout`` that
rounds to no row or every row, what ``bidlab warmup`` says stalls a first fit, binary
files in a text folder, warnings as one line, ratings headers and UTF-16, the messages
for tables and vocabulary folders, and files that fit two formats."""

from __future__ import annotations

import codecs
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from compile_events import compile_recorder

from bidlab.cli import main


def _bidlab(*args: str, timeout: float = 240, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bidlab.cli", *args], capture_output=True,
                          text=True, timeout=timeout, **kw)


def _ratings_lines(n_users: int = 30, n_items: int = 20, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [f"{u}\t{100 + i}\t{rng.integers(1, 6)}" for u in range(n_users)
            for i in rng.choice(n_items, 5, replace=False)]


def test_demo_on_three_short_files_can_follow_the_advice(tmp_path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"d{i}.txt").write_text(f"the cat sat on the mat number {i} today\n")
    common = ("demo", "--data", str(docs), "--n_components", "2", "--n_passes", "1",
              "--progress", "none", "--out", str(tmp_path / "c.html"))
    r = _bidlab(*common)
    assert r.returncode == 2 and "lower min_df" in r.stderr, r.stderr
    r = _bidlab(*common, "--min_df", "1", "--max_df", "1.0")
    assert r.returncode == 0, r.stderr
    assert "2 training + 1 held-out documents" in r.stdout and "cat" in r.stdout


@pytest.mark.parametrize("frac, says", [("0.999", "rounds to all 200 rows"),
                                        ("0.001", "rounds to no row")])
def test_a_holdout_of_no_row_or_every_row_is_refused(tmp_path, capsys, frac, says) -> None:
    data = tmp_path / "dense.npz"
    np.savez(data, X=np.random.default_rng(0).random((200, 4)))
    code = main(["train", "kmeans", "--data", str(data), "--holdout", frac, "--progress",
                 "none", "--n_clusters", "2", "--max_iter", "2"])
    err = capsys.readouterr().err
    assert code == 2 and f"--holdout {frac} of 200 rows {says}" in err, err


def test_the_default_holdout_rounding_to_no_row_is_stated(tmp_path, capsys) -> None:
    data = tmp_path / "tiny.npz"
    np.savez(data, X=np.random.default_rng(0).random((4, 2)))
    assert main(["train", "kmeans", "--data", str(data), "--progress", "none",
                 "--n_clusters", "2", "--max_iter", "2"]) == 0
    assert "the default --holdout 0.1 of 4 rows rounds to no row" in capsys.readouterr().out


# A first SFA (ALS) and BayesNet fit on an empty numba cache, with every stand-in forced
# (as before the background compiles land): the bidlab kernels numba compiled meanwhile.
_FIRST_FITS = compile_recorder() + r"""
from bidlab.kern import standin
from bidlab.models import SFA, BayesNet
from bidlab.models.bayesnet import Network

rng = np.random.default_rng(0)
X = sp.random(120, 80, density=0.1, format="csr", random_state=rng)
X.data = np.ceil(X.data * 5)
net = Network(["rain", "wet"], [["no", "yes"], ["no", "yes"]], [[], [0]],
              [np.array([[0.8, 0.2]]), np.array([[0.9, 0.1], [0.2, 0.8]])])
with standin.forced():
    for feedback in ("explicit", "implicit"):
        SFA(4, feedback=feedback, max_iter=2, random_state=0).fit(X)
    bn = BayesNet(net, n_chains=50, burn_in=5, n_samples=10, random_state=0)
    bn.infer({"wet": "yes"})
    BayesNet(net, n_passes=2, random_state=0).fit(bn.sample(200, random_state=1))
print(json.dumps(compiled))
"""


def test_warmup_says_what_stalls_a_first_fit(tmp_path) -> None:
    from bidlab.cli import warmup

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "BIDLAB_BACKGROUND_COMPILE": "1"}
    r = subprocess.run([sys.executable, "-c", _FIRST_FITS], capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == []  # ALS, BN: stand-ins ran
    doc = " ".join(warmup.__doc__.split())
    assert "ALS (``SFA``) and the Bayesian-network sampler have numpy forms" in doc
    assert "(the Gibbs sampler, ALS, Bayesian networks) still compile" not in doc


def test_binary_files_in_a_text_folder_are_skipped_with_a_warning(tmp_path) -> None:
    folder = tmp_path / "docs"
    for label, words in (("a", "apple banana cherry date"), ("b", "fig grape apple date")):
        (folder / label).mkdir(parents=True)
        for i in range(5):
            (folder / label / f"d{i}.txt").write_text(f"{words} {words}\n")
    np.savez(folder / "a" / "x.npz", X=np.ones((3, 3)))
    (folder / "b" / "img.bin").write_bytes(b"\xff" * 64 + b"\x00" * 64 + b"\xff" * 64)
    r = _bidlab("train", "lda", "--data", str(folder), "--progress", "none",
                "--n_components", "2", "--n_passes", "1")
    assert r.returncode == 0, r.stderr
    assert "warning: " in r.stderr and "skipped 2 binary files (a/x.npz, b/img.bin)" in r.stderr
    assert "text-folder, 10 x" in r.stderr and "\xff" not in r.stdout


def test_warnings_are_one_clean_line(tmp_path) -> None:
    data = tmp_path / "xy.npz"
    rng = np.random.default_rng(0)
    np.savez(data, X=rng.random((50, 3)), y=rng.random(50))
    r = _bidlab("train", "lsq", "--data", str(data), "--progress", "none")
    assert r.returncode == 0, r.stderr
    assert "warning: batch_size 1000 is larger than the 50 samples" in r.stderr
    assert "MemorySource(" not in r.stderr and "UserWarning" not in r.stderr, r.stderr


def test_a_header_with_a_numeric_rating_name_is_a_header(tmp_path) -> None:
    from bidlab.datasets.movielens import read_ratings_csv

    path = tmp_path / "r.csv"
    path.write_text("user,item,5\n1,2,3\n1,3,4\n2,2,1\n")
    r = read_ratings_csv(path)
    assert r.user_ids.tolist() == [1, 2] and r.item_ids.tolist() == [2, 3]
    text_ids = tmp_path / "t.csv"
    text_ids.write_text("ann,x,5\nbob,y,3\n")
    assert read_ratings_csv(text_ids).user_ids.tolist() == ["ann", "bob"]


def test_an_unknown_table_is_told_what_is_read(tmp_path, capsys) -> None:
    path = tmp_path / "t.csv"
    path.write_text("a,b,c,d,e\n1,2,3,4,5\n6,7,8,9,10\n")
    assert main(["train", "kmeans", "--data", str(path)]) == 2
    err = capsys.readouterr().err
    assert "reads no CSV" not in err and "does not load" not in err, err
    assert "only as ratings (user, item, rating and optionally time" in err


def test_a_vocabulary_folder_is_said_to_be_a_folder(tmp_path) -> None:
    from bidlab.datasets import load_uci_bow

    (tmp_path / "docword.t.txt").write_text("2\n3\n3\n1 1 2\n1 2 1\n2 3 4\n")
    (tmp_path / "vocab.t.txt").write_text("a\nb\nc\n")
    with pytest.raises(IsADirectoryError, match="is a folder, not a file"):
        load_uci_bow(tmp_path, vocab=tmp_path.parent)


def test_utf16_ratings_are_read(tmp_path, capsys) -> None:
    text = "userId,movieId,rating\n" + "".join(
        line.replace("\t", ",") + "\n" for line in _ratings_lines())
    path = tmp_path / "r16.csv"
    path.write_bytes(codecs.BOM_UTF16_LE + text.encode("utf-16-le"))
    assert main(["train", "sfa", "--data", str(path), "--progress", "none",
                 "--n_components", "2", "--max_iter", "2"]) == 0
    assert "ratings, 30 x 20" in capsys.readouterr().err
    other = tmp_path / "s16.txt"
    other.write_bytes("1 1:2\n0 2:1\n".encode("utf-16"))
    assert main(["train", "glm", "--data", str(other)]) == 2
    assert "UTF-16" in capsys.readouterr().err


@pytest.mark.parametrize("model, read_as, shape", [("sfa", "ratings", "30 x 20"),
                                                   ("pagerank", "edge-list", "")])
def test_a_file_that_fits_ratings_and_a_graph_is_read_as_the_model_wants(
        tmp_path, capsys, model, read_as, shape) -> None:
    path = tmp_path / "r.tsv"
    path.write_text("\n".join(_ratings_lines()) + "\n")
    extra = ["--n_components", "2", "--max_iter", "2"] if model == "sfa" else []
    assert main(["train", model, "--data", str(path), "--progress", "none", *extra]) == 0
    err = capsys.readouterr().err
    assert f"r.tsv: {read_as}, {shape}" in err, err
    assert f"is read as {read_as} for {model}" in err
