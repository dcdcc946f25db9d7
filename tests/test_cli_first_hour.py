"""A newcomer's first commands: `bidlab demo` on real documents, `bidlab train lda` keeping
its words, one spelling per flag, and clear errors for a bad port or data that is not a
corpus. Each test runs the real command in a subprocess."""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.datasets.docstrings import load_stdlib_docstrings

REPO = Path(__file__).resolve().parent.parent


def _bidlab(*args: str, cwd: Path, env: dict | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "bidlab.cli", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, env=full)


@pytest.fixture(scope="module")
def docstrings():
    return load_stdlib_docstrings()


def _write_docword(folder: Path, X: sp.csr_matrix, vocab: list[str], name: str) -> Path:
    C = sp.coo_matrix(X)
    lines = [str(C.shape[0]), str(C.shape[1]), str(C.nnz)]
    lines += [f"{i + 1} {j + 1} {int(v)}" for i, j, v in zip(C.row, C.col, C.data, strict=True)]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"docword.{name}.txt.gz"
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    (folder / f"vocab.{name}.txt").write_text("\n".join(vocab) + "\n")
    return path


def test_demo_without_shared_data_shows_docstring_topics_coherence_and_perplexity(tmp_path):
    r = _bidlab("demo", "--n_components", "8", "--n_passes", "3", "--progress", "none",
                "--out", str(tmp_path / "chart.html"), cwd=tmp_path,
                env={"BIDLAB_SHARED_DATA": str(tmp_path / "absent")})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "standard library" in out and "python-stdlib-docstrings" in out
    rows = re.findall(r"^  topic +(\d+) +(-?\d+\.\d\d) +(.+)$", out, re.M)
    assert len(rows) == 8
    assert all(len(words.split()) == 8 for _, _, words in rows)
    perplexity = float(re.search(r"held-out perplexity ([\d.]+)", out).group(1))
    vocab = int(re.search(r"vocabulary (\d+)", out).group(1))
    assert 1 < perplexity < vocab  # better than a uniform model of the words
    assert (tmp_path / "chart.html").stat().st_size > 10_000
    assert "\r" not in out + r.stderr


def test_docstring_topics_are_more_coherent_than_random_words(docstrings):
    from bidlab.models import LDA
    from bidlab.models.lda.coherence import coherence

    lda = LDA(n_components=10, n_passes=5, random_state=0).fit(docstrings.X)
    learned = coherence(lda.components_, docstrings.X, "u_mass", top_n=8, per_topic=True)
    rng = np.random.default_rng(0)
    shuffled = rng.permuted(lda.components_, axis=1)  # same weights, unrelated words
    baseline = coherence(shuffled, docstrings.X, "u_mass", top_n=8, per_topic=True)
    assert learned.mean() > baseline.mean() + 0.3  # log-ratio per word pair
    words = {w for topic in lda.top_words(8, docstrings.vocab) for w in topic}
    assert words <= set(docstrings.vocab) and not any(w.isdigit() for w in words)


def test_demo_old_flag_spellings_work_with_a_warning(tmp_path, docstrings):
    folder = tmp_path / "uci"
    X = docstrings.X[:300]
    _write_docword(folder, X, docstrings.vocab, "doc")
    r = _bidlab("demo", "--data", str(folder), "--n_components", "4", "--passes", "1",
                "--seed", "3", "--progress", "none", "--out", str(tmp_path / "c.html"),
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "--passes is deprecated" in r.stderr and "use --n_passes" in r.stderr
    assert "--seed is deprecated" in r.stderr and "use --random_state" in r.stderr
    assert "uci: 270 training + 30 held-out documents" in r.stdout


@pytest.mark.parametrize("what, message", [
    ("ratings.csv", "holds ratings CSV"),
    ("tables", "holds CSV / TSV tables (links.csv, movies.csv, ratings.csv"),
    ("points.svm", "holds svmlight / LIBSVM file"),
    ("missing.csv", "missing.csv: no such file or folder"),
])
def test_demo_data_that_is_not_a_corpus_gets_a_message_naming_it(tmp_path, what, message):
    table = "userId,movieId,rating\n1,31,2.5\n1,1029,3.0\n2,10,4.0\n"
    (tmp_path / "ratings.csv").write_text(table)
    (tmp_path / "tables").mkdir()
    for name in ("links", "movies", "ratings", "tags"):
        (tmp_path / "tables" / f"{name}.csv").write_text(table)
    (tmp_path / "tables" / "README.txt").write_text("MovieLens ratings, see the csv files.\n")
    (tmp_path / "points.svm").write_text("1 1:0.5 3:1\n-1 2:1\n1 1:2 2:0.1\n")
    r = _bidlab("demo", "--data", what, "--progress", "none", cwd=tmp_path)
    assert r.returncode == 2
    assert message in r.stderr, r.stderr
    assert not (tmp_path / "lda_topics.html").exists()


def test_train_lda_keeps_its_words_prints_topics_and_scores_held_out_rows(tmp_path,
                                                                          docstrings):
    from bidlab.models import load

    doc = _write_docword(tmp_path / "uci", docstrings.X, docstrings.vocab, "stdlib")
    r = _bidlab("train", "lda", "--data", str(doc), "--n_components", "6", "--n_passes", "2",
                "--save", str(tmp_path / "m"), "--progress", "none", "--seed", "1",
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "--seed is deprecated" in r.stderr
    n = docstrings.X.shape[0]
    held = round(0.1 * n)
    m = re.search(r"score (\S+) \(LDA\.score on (\d+) held-out rows; perplexity (\S+), "
                  r"document completion\)", r.stdout)
    assert m, r.stdout
    assert int(m.group(2)) == held
    assert float(m.group(3)) == pytest.approx(np.exp(-float(m.group(1))), rel=1e-4)
    assert f"{2 * (n - held)} samples" in r.stdout.splitlines()[0]  # 2 passes without them
    printed = re.findall(r"^topic +\d+: (.+)$", r.stdout, re.M)
    assert len(printed) == 6
    est = load(tmp_path / "m")
    assert est.top_words(10) == [line.split() for line in printed]
    assert set(est.top_words(10)[0]) <= set(docstrings.vocab)


def test_train_data_given_as_a_shared_data_sets_name_is_pointed_at_its_files(tmp_path):
    shared = tmp_path / "shared"
    (shared / "libsvm-a9a").mkdir(parents=True)
    (shared / "libsvm-a9a" / "a9a").write_text("+1 1:1\n-1 2:1\n")
    (shared / "libsvm-a9a" / "README.md").write_text("about a9a\n")
    (shared / "uci-kos").mkdir()
    (shared / "uci-kos" / "vocab.kos.txt").write_text("w\n")
    r = _bidlab("train", "glm", "--data", "a9a", cwd=tmp_path,
                env={"BIDLAB_SHARED_DATA": str(shared)})
    assert r.returncode == 2
    assert (f"a9a: no such file or folder. The shared data folder has: "
            f"{shared / 'libsvm-a9a' / 'a9a'}\n") in r.stderr  # not its README
    r = _bidlab("train", "lda", "--data", "kos", cwd=tmp_path,
                env={"BIDLAB_SHARED_DATA": str(shared)})
    assert "kos: no such file or folder\n" in r.stderr  # a vocabulary is no data to train on


def test_train_holdout_is_checked(tmp_path):
    r = _bidlab("train", "lda", "--data", "x", "--holdout", "1.5", cwd=tmp_path)
    assert r.returncode == 2 and "--holdout: must be a number in [0, 1)" in r.stderr


@pytest.mark.parametrize("port, message", [
    ("99999999", "port 99999999 is not a TCP port: give a number from 1 to 65535"),
    ("0", "port 0 is not a TCP port"),
    ("http", "'http' is not a number"),
])
def test_lab_refuses_a_port_that_is_not_one(tmp_path, port, message):
    r = _bidlab("lab", "--port", port, "--no-browser", cwd=tmp_path, timeout=60)
    assert r.returncode == 2
    assert message in r.stderr and "http://" not in r.stderr + r.stdout


def test_launch_checks_the_port_before_starting_anything():
    from bidlab.lab.launcher import launch

    with pytest.raises(ValueError, match=r"port 70000 is not a TCP port.*1 to 65535"):
        launch(port=70000, open_browser=False)
