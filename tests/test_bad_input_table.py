"""Bad input, one row per case: each gives a clear error naming the problem (never a crash,
a bare numpy/scipy error or a silently wrong result)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import bidlab as bl
from bidlab.learn import Grad, Learner, OptionError
from bidlab.models import GLM, LDA, KMeans, LDAGibbs
from bidlab.models.lsq import LeastSquares

RNG = np.random.default_rng(0)
COUNTS = sp.random(40, 30, density=0.3, format="csr", random_state=1, dtype=np.float64)
COUNTS.data = np.ceil(COUNTS.data * 5)
X = RNG.standard_normal((40, 5))
Y2 = np.arange(40) % 2


def _lda(**kw):
    return lambda: LDA(**{"n_passes": 1, **kw}).fit(COUNTS)


def _gibbs(**kw):
    return lambda: LDAGibbs(**{"n_passes": 1, **kw}).fit(COUNTS)


def _glm(**kw):
    return lambda: GLM(**{"n_passes": 1, **kw}).fit(X, Y2)


def _km(**kw):
    return lambda: KMeans(**kw).fit(X)


def _with(matrix_change):
    m = COUNTS.copy()
    matrix_change(m)
    return m


def _learner_set(**kw):
    lr = Learner(LeastSquares(), (X.astype(np.float32), X[:, :1].astype(np.float32)), Grad(),
                 batch_size=10)
    return lambda: lr.set(**kw)


def _quiet(call):
    with np.errstate(all="ignore"):  # the overflow is the point of the case
        return call()


def _write(tmp: Path, name: str, data: bytes) -> Path:
    p = tmp / name
    p.write_bytes(data)
    return p


CASES = [
    # --- estimator parameters: one message shape
    ("LDA n_components=0", _lda(n_components=0), ValueError,
     "The 'n_components' parameter of LDA must be"),
    ("LDA alpha<0", _lda(alpha=-1.0), ValueError, "The 'alpha' parameter of LDA"),
    ("LDA beta=0", _lda(beta=0.0), ValueError, "The 'beta' parameter of LDA"),
    ("LDA method", _lda(method="em"), ValueError, "'method' parameter of LDA"),
    ("LDA n_passes", _lda(n_passes=0), ValueError, "'n_passes' parameter of LDA"),
    ("LDA batch_size", _lda(batch_size=0), ValueError, "'batch_size' parameter of LDA"),
    ("LDA dtype", _lda(dtype=np.int32), ValueError, "'dtype' parameter of LDA"),
    ("LDA init", _lda(init="magic"), ValueError, "'init' parameter of LDA"),
    ("LDA kappa", _lda(kappa=2.0), ValueError, "'kappa' parameter of LDA"),
    ("Gibbs nsamps", _gibbs(nsamps=0), ValueError, "'nsamps' parameter of LDAGibbs"),
    ("Gibbs anneal", _gibbs(anneal="hot"), ValueError, "'anneal' parameter of LDAGibbs"),
    ("Gibbs n_components", _gibbs(n_components=-3), ValueError,
     "'n_components' parameter of LDAGibbs"),
    ("GLM link", _glm(link="probit"), ValueError, "'link' parameter of GLM"),
    ("GLM lrate", _glm(lrate=-1), ValueError, "'lrate' parameter of GLM must be"),
    ("GLM lrate nan", _glm(lrate=float("nan")), ValueError, "'lrate' parameter of GLM"),
    ("GLM l2<0", _glm(l2=-0.1), ValueError, "'l2' parameter of GLM"),
    ("GLM l1 str", _glm(l1="big"), ValueError, "'l1' parameter of GLM"),
    ("GLM updater", _glm(updater="adam"), ValueError, "'updater' parameter of GLM"),
    ("GLM batch_size", _glm(batch_size=0), ValueError, "'batch_size' parameter of GLM"),
    ("GLM n_passes", _glm(n_passes=1.5), ValueError, "'n_passes' parameter of GLM"),
    ("GLM n_passes huge", _glm(n_passes=10**18), ValueError, "'n_passes' parameter of GLM"),
    ("GLM device", _glm(device="tpu"), ValueError, "'device' parameter of GLM"),
    ("KMeans n_clusters", _km(n_clusters=0), ValueError, "'n_clusters' parameter of KMeans"),
    ("KMeans tol", _km(tol=-1.0), ValueError, "'tol' parameter of KMeans"),
    ("KMeans algorithm", _km(algorithm="elkan2"), ValueError, "'algorithm' parameter of KMeans"),
    ("KMeans max_iter", _km(max_iter=0), ValueError, "'max_iter' parameter of KMeans"),
    ("KMeans n_init", _km(n_init=0), ValueError, "'n_init' parameter of KMeans"),
    ("KMeans init", _km(init="corners"), ValueError, "'init' parameter of KMeans"),
    ("KMeans k > rows", lambda: KMeans(n_clusters=50).fit(X), ValueError, "50"),
    # --- estimator data
    ("LDA negative counts", lambda: LDA(n_passes=1).fit(_with(lambda m: m.data.__setitem__(0, -2))),
     ValueError, "negative"),
    ("LDA NaN counts", lambda: LDA(n_passes=1).fit(_with(lambda m: m.data.__setitem__(0, np.nan))),
     ValueError, "NaN"),
    ("LDA all empty", lambda: LDA(n_passes=1).fit(sp.csr_matrix((10, 5))), ValueError, "empty"),
    ("LDA complex", lambda: LDA(n_passes=1).fit(COUNTS.astype(np.complex64)), ValueError,
     "Complex data not supported"),
    ("LDA 1-D", lambda: LDA(n_passes=1).fit(np.ones(5)), ValueError, "must be 2-D"),
    ("LDA strings", lambda: LDA(n_passes=1).fit([["a", "b"]]), ValueError, "could not convert"),
    ("Gibbs fractional", lambda: LDAGibbs(n_passes=1).fit(COUNTS * 0.5), ValueError,
     "whole"),
    ("LDA transform width", lambda: LDA(n_passes=1).fit(COUNTS).transform(COUNTS[:, :10]),
     ValueError, "features"),
    ("LDA not fitted", lambda: LDA().transform(COUNTS), Exception, "not fitted"),
    ("GLM y length", lambda: GLM(n_passes=1).fit(X, Y2[:10]), ValueError, "samples"),
    ("GLM NaN X", lambda: GLM(n_passes=1).fit(np.where(X > 2, np.nan, X), Y2), ValueError,
     "NaN"),
    ("GLM complex", lambda: GLM(n_passes=1).fit(X.astype(np.complex128), Y2), ValueError,
     "Complex data not supported"),
    ("GLM one class", lambda: GLM(n_passes=1).fit(X, np.zeros(40)), ValueError, "class"),
    ("GLM predict width", lambda: GLM(n_passes=1).fit(X, Y2).predict(X[:, :3]), ValueError,
     "features"),
    ("GLM not fitted", lambda: GLM().predict(X), Exception, "not fitted"),
    ("GLM partial_fit classes", lambda: GLM().partial_fit(X, Y2), ValueError, "classes"),
    ("KMeans NaN", lambda: KMeans(n_clusters=2).fit(np.where(X > 2, np.nan, X)), ValueError, "NaN"),
    ("KMeans complex", lambda: KMeans(n_clusters=2).fit(X.astype(np.complex64)), ValueError,
     "Complex data not supported"),
    ("KMeans overflow",
     lambda: KMeans(n_clusters=2, dtype=np.float32).fit(X.astype(np.float32) * 3e18),
     ValueError, "overflow"),
    ("KMeans predict width", lambda: KMeans(n_clusters=2).fit(X).predict(X[:, :2]), ValueError,
     "features"),
    ("KMeans bad CSR",
     lambda: KMeans(n_clusters=2).fit(_with(lambda m: m.indices.__setitem__(0, 99))),
     ValueError, "column index 99"),
    ("GLM bad CSR", lambda: GLM(n_passes=1).fit(
        _with(lambda m: m.indptr.__setitem__(3, 10**6)), Y2), ValueError, "row"),
    ("GLM diverges", lambda: _quiet(lambda: GLM(
        "linear", lrate=1e30, n_passes=3, batch_size=10, updater="grad").fit(
            X.astype(np.float32), X[:, 0])), ArithmeticError, "lrate=1e+30"),
    ("save onto a folder", lambda: KMeans(n_clusters=2).fit(X).save(Path(__file__).parent),
     ValueError, "is a directory, not a regular file"),
    # --- the matrix core
    ("Mat 3-D", lambda: bl.Mat(np.ones((2, 2, 2))), ValueError, "a Mat is 2-D"),
    ("Mat strings", lambda: bl.Mat(np.array([["a"]])), TypeError, "holds numbers"),
    ("Mat complex", lambda: bl.Mat(np.ones((2, 2), np.complex64)), TypeError, "complex"),
    ("SMat of dense", lambda: bl.SMat(np.ones((2, 2))), TypeError, "SMat wraps"),
    ("SMat bad column", lambda: bl.SMat(_with(lambda m: m.indices.__setitem__(0, -1))),
     ValueError, "outside"),
    ("shape mismatch add", lambda: bl.Mat(np.ones((2, 3))) + bl.Mat(np.ones((3, 2))),
     ValueError, "shapes (2, 3) and (3, 2) do not match"),
    ("matmul inner", lambda: bl.Mat(np.ones((2, 3))) @ bl.Mat(np.ones((2, 3))), ValueError,
     "3"),
    ("sparse_dense inner", lambda: bl.sparse_dense(bl.SMat(COUNTS), bl.Mat(np.ones((4, 2)))),
     ValueError, "sparse_dense"),
    ("cache limit", lambda: bl.cache_limit(-5), ValueError, "cache_limit"),
    # --- learner options
    ("learner lrate", _learner_set(lrate=-1), OptionError, "'lrate' parameter of Grad"),
    ("learner unknown", _learner_set(lrat=0.1), OptionError, "Did you mean 'lrate'"),
    ("learner n_passes", _learner_set(n_passes=0), OptionError, "'n_passes' parameter"),
    ("learner checkpoint", _learner_set(checkpoint=3), OptionError, "'checkpoint' parameter"),
]

FILE_CASES = [
    ("svmlight garbage", "a.svm", b"hello world\n", "svmlight", ValueError, "line 1"),
    ("checkpoint not zip", "c.npz", b"not a zip at all", "checkpoint", Exception,
     "cannot be read safely"),
    ("checkpoint empty", "e.npz", b"", "checkpoint", Exception, "cannot be read safely"),
    ("sniff unknown", "blob.bin", bytes(range(256)) * 4, "sniff", ValueError, "svmlight"),
    ("model file not a model", "m.npz", b"PK\x03\x04junk", "model", Exception, "m.npz"),
]


def test_cli_refuses_a_crafted_npz(tmp_path):
    import subprocess
    import sys

    m = COUNTS.astype(np.float32)
    m.indices[5] = 10**6
    path = tmp_path / "crafted.npz"
    np.savez(path, X__data=m.data, X__indices=m.indices, X__indptr=m.indptr,
             X__shape=np.array(m.shape))
    res = subprocess.run([sys.executable, "-m", "bidlab.cli", "train", "kmeans", "--data",
                          str(path), "--n_clusters", "2"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2, res.stderr
    assert "column index 1000000, outside [0, 30)" in res.stderr


def test_the_table_is_large():
    assert len(CASES) + len(FILE_CASES) >= 60


@pytest.mark.parametrize("name, call, exc, fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gets_a_clear_error(name, call, exc, fragment):
    with pytest.raises(exc) as err:
        call()
    assert fragment.lower() in str(err.value).lower(), f"{name}: {err.value}"


@pytest.mark.parametrize("name, fname, data, reader, exc, fragment", FILE_CASES,
                         ids=[c[0] for c in FILE_CASES])
def test_bad_files_get_a_clear_error(tmp_path, name, fname, data, reader, exc, fragment):
    path = _write(tmp_path, fname, data)
    if reader == "svmlight":
        from bidlab.datasets.svmlight import load_svmlight as read
    elif reader == "checkpoint":
        from bidlab.learn import load_checkpoint as read
    elif reader == "sniff":
        from bidlab.datasets.sniff import sniff as read
    else:
        from bidlab.models import load as read
    with pytest.raises(exc) as err:
        read(path)
    assert fragment.lower() in str(err.value).lower(), f"{name}: {err.value}"
