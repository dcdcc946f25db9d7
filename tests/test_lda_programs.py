"""The LDA programs run end to end: ``bidlab demo`` and ``python -m bidlab.bench lda``."""

from __future__ import annotations

import argparse
import json
import re

import numpy as np
import pytest

from bidlab import demo
from bidlab.bench import lda as bench
from bidlab.datasets import synthetic_lda_corpus


def _args(**kw):
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    argv = []
    for key, value in kw.items():
        argv += [f"--{key}", str(value)]
    return parser.parse_args(argv)


@pytest.mark.parametrize("method", ["online", "gibbs"])
def test_demo_prints_topics_and_score_and_writes_a_bubble_chart(tmp_path, capsys, method):
    out = tmp_path / "topics.html"
    code = demo.run(_args(method=method, out=out, progress="none", passes=2, top=5))
    assert code == 0
    text = capsys.readouterr().out
    assert re.search(r"^  topic +11 +-?\d+\.\d\d ", text, re.M)
    perplexity = float(re.search(r"held-out perplexity ([\d.]+)", text).group(1))
    uniform = float(re.search(r"a uniform model: (\d+)", text).group(1))
    assert perplexity < uniform / 2  # far better than a uniform model of the words
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "Bokeh" in page
    assert "cdn.bokeh.org" not in page, "standalone: resources inlined"


def test_demo_reads_a_uci_folder_and_reports_a_missing_path(tmp_path, capsys):
    corpus = synthetic_lda_corpus(n_docs=300, n_words=200, k=4, seed=1)
    rows, cols = corpus.X.nonzero()
    lines = [f"{corpus.X.shape[0]}", f"{corpus.X.shape[1]}", f"{corpus.X.nnz}"]
    lines += [f"{r + 1} {c + 1} {int(corpus.X[r, c])}" for r, c in zip(rows, cols, strict=True)]
    (tmp_path / "docword.toy.txt").write_text("\n".join(lines) + "\n")
    (tmp_path / "vocab.toy.txt").write_text("\n".join(corpus.vocab) + "\n")
    code = demo.run(_args(data=tmp_path, n_components=4, out=tmp_path / "c.html", progress="none"))
    assert code == 0 and re.search(r"^  topic +3 ", capsys.readouterr().out, re.M)
    assert demo.run(_args(data=tmp_path / "nope", progress="none")) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_demo_refuses_an_out_path_it_cannot_write_before_training(tmp_path, capsys):
    folder = tmp_path / "charts"
    folder.mkdir()
    assert demo.run(_args(out=folder, progress="none")) == 2
    captured = capsys.readouterr()
    assert "--out" in captured.err and "is a directory" in captured.err
    assert "held-out" not in captured.out  # refused before any training


def test_bench_runs_every_method_and_reports_the_targets(capsys):
    corpus = synthetic_lda_corpus(n_docs=240, n_words=300, k=8, seed=2)
    result = bench.bench_corpus("tiny", corpus, quick=True, peers={"sklearn", "gensim",
                                                                    "tomotopy"})
    rows = {r["system"]: r for r in result["rows"]}
    assert {"bidlab online VB", "bidlab batch VB", "bidlab SAME Gibbs"} <= set(rows)
    for row in rows.values():
        if "skipped" in row:
            continue
        assert row["wall_s"] > 0 and np.isfinite(row["heldout_loglik"])
        assert row["heldout_loglik"] > result["uniform_loglik"]
        times = [t for t, _ in row["checkpoints"]]
        assert times == sorted(times)
    names = {t["name"] for t in result["targets"]}
    assert "zero allocations per minibatch after warm-up" in names
    json.dumps(result)  # the --json output is plain JSON
