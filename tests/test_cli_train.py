"""``bidlab train`` for every registered model, and data formats told by content.

Sniffing reads real files written here (no extension where a real data set has none,
gzip under names that do not say so). The end-to-end runs start the real ``bidlab``
command in a subprocess, train on small files and on the shared data sets (KOS, a9a), save
the estimator and check what was learned by loading it back.
"""

from __future__ import annotations

import gzip
import io
import math
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

from bidlab.cli import main
from bidlab.datasets import blobs, synthetic_lda_corpus
from bidlab.datasets.paths import shared_data_dir
from bidlab.datasets.sniff import DataFormatError, load, sniff
from bidlab.learn import write_shards

MODELS = ("lsq", "glm", "kmeans", "lda", "ldagibbs")


def _bidlab(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bidlab.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def _ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    assert r.stdout.startswith("done: "), r.stdout
    return r.stdout


def _score(stdout: str) -> float:
    m = re.search(r"score (\S+) \(", stdout)
    assert m, stdout
    return float(m.group(1))


@pytest.fixture
def shared() -> Path:
    """The shared data folder, or skip saying why it is absent."""
    try:
        return shared_data_dir()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


# ============================================================================ test data
def _svmlight(path: Path, X, y, gz: bool = False) -> Path:
    buf = io.BytesIO()
    dump_svmlight_file(X, y, buf, zero_based=False)
    path.write_bytes(gzip.compress(buf.getvalue()) if gz else buf.getvalue())
    return path


def _docword(folder: Path, corpus, name: str = "tiny", gz: bool = True) -> Path:
    X = sp.coo_matrix(corpus.X)
    lines = [f"{X.shape[0]}", f"{X.shape[1]}", f"{X.nnz}"]
    lines += [f"{i + 1} {j + 1} {int(v)}" for i, j, v in zip(X.row, X.col, X.data, strict=True)]
    raw = ("\n".join(lines) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (f"docword.{name}.txt" + (".gz" if gz else ""))
    path.write_bytes(gzip.compress(raw) if gz else raw)
    (folder / f"vocab.{name}.txt").write_text("\n".join(corpus.vocab) + "\n")
    return path


def _text_folder(folder: Path, corpus, labels: int = 2) -> Path:
    for d in range(corpus.X.shape[0]):
        row = corpus.X[d]
        words = [corpus.vocab[j] for j, c in zip(row.indices, row.data, strict=True)
                 for _ in range(int(c))]
        sub = folder / f"group{d % labels}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"doc{d:04d}").write_text(" ".join(words))
    return folder


@pytest.fixture(scope="module")
def corpus():
    return synthetic_lda_corpus(n_docs=240, n_words=150, k=4, doc_len=(40, 80), seed=3)


@pytest.fixture(scope="module")
def logistic():
    """A separable-ish binary problem with +1/-1 labels (as a9a has)."""
    rng = np.random.default_rng(0)
    X = (rng.random((3000, 40)) < 0.2).astype(np.float32)
    w = rng.standard_normal(40)
    y = np.where(X @ w - np.median(X @ w) > 0, 1.0, -1.0)
    return sp.csr_matrix(X), y


# ============================================================================= sniffing
def test_sniffs_svmlight_without_extension_plain_and_gzip(tmp_path, logistic):
    X, y = logistic
    plain = _svmlight(tmp_path / "train", X, y)
    packed = _svmlight(tmp_path / "train-packed", X, y, gz=True)
    assert sniff(plain).format == "svmlight" and not sniff(plain).gzip
    s = sniff(packed)
    assert (s.format, s.gzip) == ("svmlight", True)
    got = load(packed)
    assert got.X.shape == X.shape and np.array_equal(got.y, y)
    np.testing.assert_array_equal(got.X.toarray(), X.toarray())


def test_sniffs_uci_docword_with_its_vocabulary(tmp_path, corpus):
    path = _docword(tmp_path / "uci", corpus)
    for where in (path, tmp_path / "uci"):  # the file or its folder
        s = sniff(where)
        assert (s.format, s.gzip, s.path) == ("uci-bow", True, path)
    got = load(path)
    assert got.vocab == list(corpus.vocab) and got.y is None
    np.testing.assert_array_equal(got.X.toarray(), corpus.X.toarray())
    other = tmp_path / "counts"  # any name: the content says docword, words are w1..wW
    other.write_bytes(gzip.decompress(path.read_bytes()))
    assert (sniff(other).format, sniff(other).gzip) == ("uci-bow", False)
    assert load(other).vocab[:2] == ["w1", "w2"]


def test_sniffs_npz_kinds_and_shard_folders(tmp_path, logistic):
    X, y = logistic
    with open(tmp_path / "dense.bin", "wb") as f:  # no .npz suffix
        np.savez(f, X=X.toarray(), y=y)
    np.savez(tmp_path / "parts.npz", X__data=X.data, X__indices=X.indices, X__indptr=X.indptr,
             X__shape=np.array(X.shape), y=y)
    sp.save_npz(tmp_path / "scipy.npz", X)
    write_shards(tmp_path / "shards", X, y, rows_per_shard=1000)
    assert sniff(tmp_path / "dense.bin").format == "npz"
    assert sniff(tmp_path / "parts.npz").format == "npz"
    assert sniff(tmp_path / "scipy.npz").format == "scipy-npz"
    assert sniff(tmp_path / "shards").format == "shards"
    assert sniff(tmp_path / "shards" / "manifest.json").format == "shards"
    for name in ("dense.bin", "parts.npz", "scipy.npz"):
        got = load(tmp_path / name)
        np.testing.assert_array_equal(sp.csr_matrix(got.X).toarray(), X.toarray())
        assert name == "scipy.npz" or np.array_equal(got.y, y)
    with pytest.raises(DataFormatError, match="shard folder"):
        load(tmp_path / "shards")


def test_sniffs_text_folders_and_archives(tmp_path, corpus):
    folder = _text_folder(tmp_path / "docs", corpus)
    s = sniff(folder)
    assert s.format == "text-folder"
    got = load(s)
    assert got.X.shape[0] == corpus.X.shape[0] and got.label_names == ["group0", "group1"]
    half = corpus.X.shape[0] // 2  # documents come in path order: group0/..., group1/...
    assert np.array_equal(got.y, np.repeat([0, 1], half))
    archive = tmp_path / "docs-archive"  # a .tar.gz by content only
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="docs")
    assert (sniff(archive).format, sniff(archive).gzip) == ("text-archive", True)
    assert load(archive).X.shape == got.X.shape


def test_unknown_content_names_the_formats_tried_and_what_it_saw(tmp_path, logistic):
    csv = tmp_path / "table.csv"
    csv.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(DataFormatError) as e:
        sniff(csv)
    text = str(e.value)
    assert f"cannot tell the format of {csv}" in text
    assert "first line is 'a,b,c'" in text
    for fmt in ("svmlight / LIBSVM", "UCI docword", "numpy .npz", "scipy.sparse.save_npz",
                "shard folder", "tar archive"):
        assert fmt in text
    png = tmp_path / "picture"
    png.write_bytes(gzip.compress(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
    with pytest.raises(DataFormatError, match="gzip-compressed binary data starting with "
                       "bytes 89 50 4e 47"):
        sniff(png)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataFormatError, match="empty folder"):
        sniff(tmp_path / "empty")
    data = tmp_path / "libsvm"
    data.mkdir()
    _svmlight(data / "a9a", *logistic)
    (data / "README.md").write_text("# about\n")
    with pytest.raises(DataFormatError, match=r"holds data files \(a9a \(svmlight\)\)"):
        sniff(data)
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        sniff(tmp_path / "missing")
    assert main(["train", "lsq", "--data", str(csv)]) == 2


# ================================================================================= help
def test_train_help_lists_every_model_with_its_description(capsys):
    # in-process (the command's own process is covered by the training runs below)
    assert main(["train", "--help"]) == 0
    out = capsys.readouterr().out
    models = {}
    for line in out.split("models:\n", 1)[1].split("\n\n", 1)[0].splitlines():
        name, _, doc = line.strip().partition(" ")
        models[name] = doc.strip()
    assert set(MODELS) <= set(models), out
    assert all(doc and doc != "(no description)" for doc in models.values()), models
    assert "svmlight" in out and "uci-bow" in out
    assert main(["train"]) == 2
    assert "name a model" in capsys.readouterr().err


def test_model_help_lists_params_and_learner_options(capsys):
    assert main(["train", "glm", "--help"]) == 0
    out = capsys.readouterr().out
    assert "parameters of GLM:" in out and "learner options" in out
    m = re.search(r"^  --lrate +(.+)\n +default (.+?); (.+)$", out, re.M)
    assert m, out
    assert "float" in m.group(3)
    for option in ("n_passes", "max_steps", "val_every", "checkpoint_every"):
        assert f"--{option} " in out


@pytest.mark.parametrize("name", ["kmeans", "lda", "ldagibbs"])
def test_each_estimator_help_comes_from_its_params(name, capsys):
    from bidlab.learn.model import MODELS as REGISTRY

    assert main(["train", name, "--help"]) == 0
    out = capsys.readouterr().out
    cls = REGISTRY[name]
    assert cls.PARAMS, f"{cls.__name__} declares no PARAMS"
    for spec in cls.PARAMS:
        if spec.name in cls.FIT_ONLY:  # refused: bidlab train trains the learner
            assert f"  --{spec.name} " not in out
            continue
        assert f"  --{spec.name} " in out
        assert spec.allowed() in out


# =========================================================================== bad input
def test_estimator_errors_use_the_one_message_shape(tmp_path, corpus, logistic, capsys):
    doc = _docword(tmp_path, corpus)
    svm = _svmlight(tmp_path / "svm", *logistic)
    cases = [
        (["train", "kmeans", "--data", str(svm), "--n_cluster", "3"],
         "unknown option 'n_cluster'. Did you mean 'n_clusters'"),
        (["train", "glm", "--data", str(svm), "--lrate", "-1"],
         "The 'lrate' parameter of GLM must be 'auto' or a float > 0"),
        (["train", "glm", "--data", str(svm), "--n_passes", "0"],
         "The 'n_passes' parameter of"),
        (["train", "glm", "--data", str(doc)], "glm needs targets y"),
        (["train", "lda", "--data", str(tmp_path / "nothing")], "no such file or folder"),
        (["train", "lsq", "--data", str(svm), "--save", str(tmp_path / "m")],
         "--save needs an estimator model"),
    ]
    for args, message in cases:
        assert main(args) == 2, args
        assert message in capsys.readouterr().err, args


# ====================================================================== end to end: tmp
def test_glm_on_gzipped_svmlight_without_extension(tmp_path, logistic):
    from bidlab.models.base import load as load_model

    X, y = logistic
    data = _svmlight(tmp_path / "train", X, y, gz=True)
    out = _ok(_bidlab("train", "glm", "--data", str(data), "--n_passes", "4", "--save",
                      str(tmp_path / "glm.model"), "--progress", "text"))
    assert "saved" in out
    est = load_model(tmp_path / "glm.model")
    assert type(est).__name__ == "GLM"
    assert np.mean(np.ravel(est.predict(X)) == y) > 0.85


def test_kmeans_on_npz_finds_the_blobs(tmp_path):
    from sklearn.metrics import adjusted_rand_score

    from bidlab.models.base import load as load_model

    b = blobs(n=3000, d=5, k=3, seed=1)
    with open(tmp_path / "points", "wb") as f:
        np.savez(f, X=b.X)
    out = _ok(_bidlab("train", "kmeans", "--data", str(tmp_path / "points"), "--n_clusters", "3",
                      "--random_state", "0", "--n_passes", "3", "--save",
                      str(tmp_path / "km"), "--progress", "none"))
    assert math.isfinite(_score(out))
    est = load_model(tmp_path / "km")
    assert est.cluster_centers_.shape == (3, 5)
    assert adjusted_rand_score(b.labels, est.predict(b.X)) > 0.95


def test_lda_on_a_uci_docword_file(tmp_path, corpus):
    from bidlab.models.base import load as load_model

    doc = _docword(tmp_path / "uci", corpus)
    out = _ok(_bidlab("train", "lda", "--data", str(doc), "--n_components", "4", "--n_passes", "3",
                      "--batch_size", "60", "--save", str(tmp_path / "lda"),
                      "--progress", "none"))
    W = corpus.X.shape[1]
    assert _score(out) > -math.log(W)  # better than a uniform model of the words
    est = load_model(tmp_path / "lda")
    np.testing.assert_allclose(est.components_.sum(axis=1), 1.0, rtol=1e-5)
    assert est.components_.shape == (4, W)


def test_ldagibbs_on_a_text_folder_checkpoints_and_resumes(tmp_path, corpus):
    from bidlab.learn import load_checkpoint

    docs = _text_folder(tmp_path / "docs", corpus)
    ck = tmp_path / "gibbs.ck"
    args = ["train", "ldagibbs", "--data", str(docs), "--n_components", "4", "--batch_size", "40",
            "--checkpoint", str(ck), "--progress", "none"]
    out = _ok(_bidlab(*args, "--n_passes", "1"))
    assert _score(out) > -math.log(corpus.X.shape[1])
    first = load_checkpoint(ck).meta["progress"]["step"]
    assert first > 0
    r = _bidlab(*args, "--n_passes", "2")
    _ok(r)
    assert "resuming from" in r.stderr and f"step {first}" in r.stderr
    assert load_checkpoint(ck).meta["progress"]["step"] == 2 * first


def test_estimator_on_a_shard_folder(tmp_path, logistic, capsys):
    X, y = logistic
    write_shards(tmp_path / "shards", X, y, rows_per_shard=700)
    assert main(["train", "glm", "--data", str(tmp_path / "shards"), "--n_passes", "2",
                 "--batch_size", "300", "--val_every", "0", "--progress", "none",
                 "--holdout", "0"]) == 0
    out = capsys.readouterr()
    assert "shards, 3000 samples" in out.err
    assert out.out.startswith("done: 20 minibatches, 6000 samples"), out.out  # every row


# =============================================================== end to end: shared data
def test_glm_on_a9a(shared, tmp_path):
    from bidlab.datasets import load_a9a
    from bidlab.models.base import load as load_model

    out = _ok(_bidlab("train", "glm", "--data", str(shared / "libsvm-a9a" / "a9a"),
                      "--n_passes", "1", "--save", str(tmp_path / "a9a.glm"),
                      "--progress", "none"))
    assert 0.75 < _score(out) <= 1.0
    _, _, Xte, yte = load_a9a(shared)
    est = load_model(tmp_path / "a9a.glm")
    assert np.mean(np.ravel(est.predict(Xte)) == yte) > 0.8  # held-out accuracy


@pytest.mark.parametrize("name", ["lda", "ldagibbs"])
def test_lda_models_on_kos(shared, tmp_path, name):
    kos = shared / "uci-kos" / "docword.kos.txt.gz"
    r = _bidlab("train", name, "--data", str(kos), "--n_components", "10", "--max_steps", "4",
                "--progress", "none")
    out = _ok(r)
    assert "uci-bow, 3430 x 6906" in r.stderr
    assert out.startswith("done: 4 minibatches")
    assert -math.log(6906) < _score(out) < 0


def test_a_redirected_log_gets_plain_pass_lines_on_stderr_only(tmp_path, logistic):
    """stdout and stderr are pipes here (as with `bidlab train ... > log 2>&1`): the pass
    summaries come as plain lines on stderr, no bar frames with \\r, nothing on stdout but
    the result line."""
    svm = _svmlight(tmp_path / "svm", *logistic)
    r = _bidlab("train", "glm", "--data", str(svm), "--n_passes", "3", "--batch_size", "100")
    out = _ok(r)
    assert "\r" not in r.stdout and "\r" not in r.stderr
    assert "pass " not in out and len(out.strip().splitlines()) == 1
    assert "glm: pass   1/3" in r.stderr and "glm: pass   3/3" in r.stderr


def test_help_lists_the_scikit_learn_names(capsys):
    for model, names in (("lda", ("--n_components", "--warm_start", "--n_jobs", "--verbose")),
                         ("kmeans", ("--n_clusters",)), ("glm", ("--class_weight",))):
        assert main(["train", model, "--help"]) == 0
        text = capsys.readouterr().out
        for name in names:
            assert name.lstrip("-") in text, (model, name)
        assert not re.search(r"^\s*k\s", text, re.M), text


@pytest.mark.parametrize("model, flag", [("glm", "--tol"), ("glm", "--validation_fraction"),
                                         ("kmeans", "--n_init")])
def test_parameters_only_fit_uses_are_refused_not_ignored(tmp_path, capsys, model, flag):
    """bidlab train trains the live learner: a parameter only fit reads (held-out stopping,
    restarts) would do nothing, so it is refused and left out of --help."""
    from sklearn.datasets import dump_svmlight_file

    from bidlab.cli import main

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    path = tmp_path / "d.svm"
    dump_svmlight_file(X, (X[:, 0] > 0).astype(int), str(path))
    assert main(["train", model, "--data", str(path), flag, "0.5" if flag != "--n_init"
                 else "3"]) == 2
    assert f"{flag}: only" in capsys.readouterr().err
    assert main(["train", model, "--help"]) == 0
    assert flag not in capsys.readouterr().out
