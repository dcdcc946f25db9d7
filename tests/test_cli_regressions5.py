"""``bidlab`` on small and awkward inputs: the word bounds of ``bidlab train`` for text
folders, a closed stdout (``bidlab ... | head``), folders of gzipped text files, and a
file that fits two formats trained on several MPI ranks."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys

import numpy as np
import pytest

from bidlab.cli import main


def _bidlab(*args: str, timeout: float = 240, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bidlab.cli", *args], capture_output=True,
                          text=True, timeout=timeout, **kw)


def _three_docs(tmp_path) -> str:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, words in enumerate(("the cat sat on the mat", "dogs chase cats in parks",
                               "birds fly over green hills")):
        (docs / f"d{i}.txt").write_text(words + "\n")
    return str(docs)


def _ratings_lines(n_users: int = 30, n_items: int = 20, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [f"{u}\t{100 + i}\t{rng.integers(1, 6)}" for u in range(n_users)
            for i in rng.choice(n_items, 5, replace=False)]


# ------------------------------------------------------------ bidlab train --min_df/--max_df
def test_train_can_follow_the_advice_to_lower_min_df(tmp_path, capsys) -> None:
    docs = _three_docs(tmp_path)
    common = ["train", "lda", "--data", docs, "--progress", "none", "--n_components", "2",
              "--n_passes", "1", "--holdout", "0"]
    assert main(common) == 2
    assert "lower min_df" in capsys.readouterr().err
    assert main([*common, "--min_df", "1", "--max_df", "1.0"]) == 0
    err = capsys.readouterr().err
    assert "text-folder, 3 x " in err, err


def test_train_help_lists_the_word_bounds(capsys) -> None:
    assert main(["train", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--min_df N|FRACTION" in out and "--max_df N|FRACTION" in out


def test_the_word_bounds_are_refused_for_data_that_is_not_text(tmp_path, capsys) -> None:
    data = tmp_path / "dense.npz"
    np.savez(data, X=np.random.default_rng(0).random((20, 3)))
    code = main(["train", "kmeans", "--data", str(data), "--min_df", "1", "--progress",
                 "none", "--n_clusters", "2"])
    err = capsys.readouterr().err
    assert code == 2 and "--min_df" in err and "text folders" in err, err
    with pytest.raises(SystemExit):  # a bad bound is refused as the demo refuses it
        main(["train", "lda", "--data", str(data), "--max_df", "1.5"])


# ---------------------------------------------------------------------- a closed stdout
def _with_closed_stdout(*args: str) -> subprocess.CompletedProcess:
    """Run ``bidlab ARGS`` writing to a pipe whose reader is gone (``bidlab ... | head``
    after head exits)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "bidlab.cli", *args], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=240)
    finally:
        os.close(write)


def test_a_closed_stdout_ends_quietly(tmp_path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(12):
        (docs / f"d{i}.txt").write_text(f"alpha{i % 3} beta{i % 4} gamma{i % 2} "
                                        f"delta{i % 6}\n")
    runs = [("train", "--help"),
            ("demo", "--data", str(docs), "--n_components", "2", "--n_passes", "1",
             "--progress", "none", "--out", str(tmp_path / "c.html")),
            ("train", "lda", "--data", str(docs), "--n_components", "2", "--n_passes", "1",
             "--progress", "none")]
    for args in runs:
        r = _with_closed_stdout(*args)
        assert r.returncode == 141, (args, r.returncode, r.stderr)
        for text in ("Traceback", "BrokenPipeError", "Broken pipe", "could not start"):
            assert text not in r.stderr, (args, r.stderr)


# ------------------------------------------------------------- folders of .txt.gz files
def test_a_folder_of_gzipped_text_files_is_read_as_text(tmp_path) -> None:
    from bidlab.datasets.sniff import load, sniff

    folder = tmp_path / "gz"
    folder.mkdir()
    for i in range(4):
        with gzip.open(folder / f"d{i}.txt.gz", "wt") as f:
            f.write(("cats and dogs play in the park" if i % 2 else "birds fly over hills")
                    + f", day {i}\n")
    found = sniff(folder)
    assert found.format == "text-folder"
    data = load(found)
    assert data.X.shape[0] == 4 and {"cats", "birds"} <= set(data.vocab)


# --------------------------------------------------------- two formats on several ranks
def test_read_rank_data_prefers_the_models_format(tmp_path) -> None:
    from bidlab.distributed.sharding import read_rank_data
    from bidlab.learn.comm import SingleProcess

    path = tmp_path / "r.tsv"
    path.write_text("\n".join(_ratings_lines()) + "\n")
    for model, read_as in (("sfa", "ratings"), ("nmf", "ratings"), ("pagerank", "edge-list")):
        data, n = read_rank_data(SingleProcess(), str(path), model)
        assert data.sniffed.format == read_as, model
    assert n == data.X.shape[0]


def test_sfa_on_two_ranks_reads_a_headerless_ratings_file_as_ratings(tmp_path) -> None:
    pytest.importorskip("mpi4py", reason="mpi4py is not installed: pip install 'bidlab[mpi]'")
    from bidlab.distributed.launch import mpiexec_path

    try:
        mpiexec_path()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    path = tmp_path / "r.tsv"
    path.write_text("\n".join(_ratings_lines()) + "\n")
    r = _bidlab("train", "sfa", "--ranks", "2", "--data", str(path), "--progress", "none",
                "--n_components", "2", "--max_iter", "1")
    assert r.returncode == 0, r.stderr
    assert "30 rows on 2 ranks (rank 0: ratings, 15 x 20" in r.stderr, r.stderr


@pytest.mark.parametrize("flag", [["--holdout", "0.2"], ["--coherence", "c_v"]])
def test_options_ranks_cannot_honour_are_refused_not_dropped(tmp_path, capsys, flag) -> None:
    """``--ranks`` forwarded neither flag to the ranks, which trained without it."""
    np.savez(tmp_path / "x.npz", X=np.random.default_rng(0).random((40, 3)))
    code = main(["train", "kmeans", "--ranks", "2", "--data", str(tmp_path / "x.npz"), *flag])
    assert code == 2
    assert f"{flag[0]} is not available with --ranks" in capsys.readouterr().err
