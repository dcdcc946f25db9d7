"""What the LDA models share: count checks, the one evaluator, topic inference.

* :func:`as_counts` -- documents x vocabulary counts (scipy.sparse, numpy, CuPy or a
  ``Corpus``) to a canonical CSR on the data's own backend, refusing negative, NaN and
  infinite counts (and, for Gibbs, non-integer ones) with the position of the first bad one.
* :func:`estep_gamma` / :func:`estep` -- the variational E-step, written once: training
  (online and batch VB), the held-out evaluation of a minibatch and :func:`infer_theta`
  all take it.
* :func:`infer_theta` -- the E-step with the topics held fixed until each document
  converges; ``transform`` of every model and the evaluator use it.
* :func:`heldout_loglik` -- document completion (Wallach et al. 2009): fit each test
  document's topic proportions on half of its tokens with the topics fixed, then score the
  other half. It needs only a normalised k x vocabulary matrix, so the benchmark scores
  bidlab and every peer library with this one function.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

import bidlab as bl
from bidlab import backend

# ----------------------------------------------------------------------------- input data


def _first_position(X: Any, mask: Any) -> tuple[int, int]:
    """(document, word) of the first stored entry of CSR ``X`` flagged by ``mask``."""
    p = int(np.flatnonzero(backend.to_host(mask))[0])
    indptr = np.asarray(backend.to_host(X.indptr))
    d = int(np.searchsorted(indptr, p, side="right") - 1)
    return d, int(backend.to_host(X.indices[p : p + 1])[0])


def as_counts(X: Any, *, owner: str, dtype: Any, integer: bool = False) -> Any:
    """A canonical CSR copy of the documents x vocabulary counts ``X`` on its own backend.

    Accepts scipy.sparse, numpy, CuPy / cupyx sparse, a ``bidlab.SMat`` or anything with
    ``.X`` (a :class:`bidlab.datasets.Corpus`). Duplicates are summed (before the checks,
    which read the summed values) and stored zeros dropped. Raises ValueError naming the
    first (document, word) that is NaN, infinite, negative, or -- when ``integer`` -- not a
    whole number.
    """
    if hasattr(X, "X") and hasattr(X, "vocab"):
        X = X.X
    if isinstance(X, bl.SMat):
        X = X.csr
    if isinstance(X, bl.Mat):
        X = X.data
    on_gpu = backend.is_cupy_array(X)
    if backend.is_sparse(X):
        if not on_gpu:
            X = sp.csr_matrix(X, dtype=dtype, copy=True)
        else:
            csp = backend.sparse_module(backend.cupy())
            X = csp.csr_matrix(X, dtype=dtype, copy=True)
    else:
        xp = backend.namespace(X) if on_gpu else np
        arr = xp.asarray(X)
        if arr.ndim != 2:
            raise ValueError(
                f"{owner}: X must be 2-D (documents x vocabulary); got shape {tuple(arr.shape)}"
            )
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"{owner}: X must hold numbers; got dtype {arr.dtype}")
        X = backend.sparse_module(xp).csr_matrix(arr.astype(dtype, copy=False))
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"{owner}: X is {X.shape[0]} x {X.shape[1]}; need at least 1 x 1")
    X.sum_duplicates()  # the checks read the matrix's values: a duplicate's parts add up
    xp = backend.namespace(X.data)
    data = X.data
    bad = ~xp.isfinite(data)
    if bool(bad.any()):
        d, w = _first_position(X, bad)
        raise ValueError(
            f"{owner}: X holds NaN or infinite counts (first at document {d}, word {w}); "
            "counts must be finite: clean the data first"
        )
    bad = data < 0
    if bool(bad.any()):
        d, w = _first_position(X, bad)
        raise ValueError(
            f"Negative values in data passed to {owner}: X holds negative counts (first at "
            f"document {d}, word {w}); word counts must be >= 0"
        )
    if integer:
        bad = data != xp.floor(data)
        if bool(bad.any()):
            d, w = _first_position(X, bad)
            value = float(backend.to_host(data[bad][:1])[0])
            raise ValueError(
                f"{owner}: X holds a non-integer count {value:g} at document {d}, word {w}; "
                "the Gibbs sampler draws whole tokens, so it refuses fractional counts: round "
                "them (X.data = np.rint(X.data)) or use bidlab.models.LDA, whose variational "
                "update accepts fractional counts"
            )
    X.eliminate_zeros()
    if not X.has_sorted_indices:
        X.sort_indices()
    return X


def mu_floor(dtype: Any) -> float:
    """Added to the SDDMM's predictions before dividing by them.

    A word that every topic has (nearly) forgotten gets exp E[log phi] below float32's
    range; without a floor X / mu overflows to inf and inf * 0 makes NaNs. With it such a
    word simply stops pulling on the document (BIDMach's ``weps``). The floor leaves
    ~1e8 of headroom below the dtype's largest value for the products that follow.
    """
    return 1e-30 if np.dtype(dtype) == np.float32 else 1e-200


def eb_floor(dtype: Any) -> float:
    """The least value of exp E[log phi] that the variational E-step reads.

    A word at the prior beta in every topic (absent from the documents so far, or held
    by deleted topics only) has exp(digamma(beta)) ~ exp(-1 / beta): 0 in float32 at
    beta = 0.01, in float64 below beta ~ 1e-3. Its predictions then fell under
    :func:`mu_floor` and it took no statistics ever again, whatever later documents said.
    At this floor such a word's tokens follow their documents' topics (its predictions
    stay well above :func:`mu_floor`); a word that some topic holds even a fraction of a
    token of (exp E[log phi] ~ 1e-10 or more) moves by a relative 1e-10 or less.
    """
    return 1e-20 if np.dtype(dtype) == np.float32 else 1e-150


def nonempty_rows(X: Any) -> Any:
    """Boolean mask (host numpy) of documents with at least one token."""
    indptr = np.asarray(backend.to_host(X.indptr))
    return np.diff(indptr) > 0


# ----------------------------------------------------------------------------- inference


def estep_gamma(X: bl.SMat, topicsT: bl.Mat, et: bl.Mat, alpha: Any, tiny: float) -> bl.Mat:
    """One variational E-step of the documents ``X`` (documents x vocabulary counts).

    Returns ``gamma = et o ((X / (mu + tiny)) @ topicsT) + alpha`` with
    ``mu = sddmm(et, topics, X)``, the model's prediction at each nonzero: ``et`` is the
    documents' exp E[log theta] (documents x k), ``topicsT`` vocabulary x k (normalised
    topics, or exp E[log phi]), ``alpha`` a number or a 1 x 1 Mat, ``tiny``
    :func:`mu_floor`. Cached matrix operations: with caching on, the same operands give the
    same result containers, so a training step allocates nothing.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp, bidlab as bl
    >>> X = bl.SMat(sp.csr_matrix(np.array([[2.0, 0.0, 1.0]])))
    >>> topicsT = bl.Mat(np.full((3, 2), 1 / 3))
    >>> gamma = estep_gamma(X, topicsT, bl.Mat(np.ones((1, 2))), 0.1, 1e-30)
    >>> np.round(gamma.data, 3).tolist()
    [[1.6, 1.6]]
    """
    mu = bl.sddmm(et.T, topicsT.T, X)
    return et * ((X / (mu + tiny)) @ topicsT) + alpha


def estep(X: bl.SMat, topicsT: bl.Mat, et: bl.Mat, gamma: bl.Mat, alpha: Any,
          iters: int) -> None:
    """``iters`` variational E-steps in place: ``gamma`` <- :func:`estep_gamma`, then
    ``et`` <- exp(digamma(gamma)). ``et`` holds the start (documents x k) and ends with
    the documents' exp E[log theta]; ``gamma`` their Dirichlet parameters."""
    tiny = mu_floor(topicsT.dtype)
    for _ in range(int(iters)):
        gamma <<= estep_gamma(X, topicsT, et, alpha, tiny)
        bl.expdigamma(gamma, out=et)


def infer_theta(
    phiT: bl.Mat,
    X: bl.SMat,
    alpha: float,
    *,
    max_iter: int = 100,
    tol: float = 1e-4,
    check_every: int = 5,
) -> bl.Mat:
    """Variational E-step with the topics fixed: the documents' Dirichlet parameters gamma.

    ``phiT`` is vocabulary x k (columns sum to 1), ``X`` documents x vocabulary counts.
    Iterates ``gamma = alpha + exp(E[log theta]) o ((X / mu) @ phiT)`` with
    ``mu = sddmm(exp(E[log theta]), phi, X)``. Every ``check_every`` steps, documents
    whose mean absolute change per entry is below ``tol`` are done and leave the
    iteration (the rest go on, up to ``max_iter`` steps), so each document's result
    depends on that document only: the same in any batch and any order. Empty documents
    keep gamma = alpha (the prior mean: uniform). Returns documents x k.
    """
    xp = phiT.xp
    ndocs = X.shape[0]
    k = phiT.shape[1]
    dtype = phiT.dtype
    out = bl.Mat(backend.empty((ndocs, k), dtype, xp))
    out.data.fill(alpha)
    rows = np.flatnonzero(nonempty_rows(X.csr))
    if rows.size == 0:
        return out
    tiny = mu_floor(dtype)

    def take(csr: Any, idx: np.ndarray) -> bl.SMat:
        sub = csr[idx if xp is np else xp.asarray(idx)]
        return bl.SMat(sub)

    with bl.caching(False):
        Xa = take(X.csr, rows) if rows.size < ndocs else X
        gamma = bl.Mat(backend.empty((rows.size, k), dtype, xp))
        gamma.data.fill(alpha)
        et = bl.Mat(backend.empty((rows.size, k), dtype, xp))
        et.data.fill(1.0)  # uniform start: exp E[log theta] is constant per document
        for it in range(1, max_iter + 1):
            gnew = estep_gamma(Xa, phiT, et, alpha, tiny)
            if it % check_every == 0 or it == max_iter:
                change = xp.abs(gnew.data - gamma.data).mean(axis=1)
                done = np.asarray(backend.to_host(change < tol)) | (it == max_iter)
                gamma = gnew
                if done.any():
                    sel = np.flatnonzero(done)
                    pick = sel if xp is np else xp.asarray(sel)
                    target = rows[sel] if xp is np else xp.asarray(rows[sel])
                    out.data[target] = gamma.data[pick]
                    if done.all():
                        break
                    keep = np.flatnonzero(~done)
                    rows = rows[keep]
                    Xa = take(Xa.csr, keep)
                    gamma = bl.Mat(xp.ascontiguousarray(gamma.data[keep if xp is np else
                                                                   xp.asarray(keep)]))
            else:
                gamma = gnew
            et = bl.expdigamma(gamma)
    return out


def split_halves(X: Any, seed: int = 0) -> tuple[Any, Any]:
    """Split each document's tokens at random into an observed and a held-out half.

    Each count c goes Binomial(c, 1/2) to the observed half (fractional parts go to one
    half or the other with probability 1/2; a count above 2**62, floor(c / 2)).
    Deterministic for a seed; host scipy CSRs.
    """
    Xh = sp.csr_matrix(backend.to_host(X))
    rng = np.random.default_rng(seed)
    whole = np.floor(Xh.data)
    frac = Xh.data - whole
    # a count past 2**62 (no int64 for the sampler; its draw would be c/2 to 1e-9) halves
    big = whole > 2.0**62
    obs = rng.binomial(np.where(big, 0.0, whole).astype(np.int64), 0.5).astype(Xh.dtype)
    if big.any():
        obs[big] = np.floor(whole[big] / 2)
    obs += frac * (rng.random(frac.shape[0]) < 0.5)
    held = Xh.data - obs
    A = sp.csr_matrix((obs, Xh.indices, Xh.indptr), shape=Xh.shape)
    B = sp.csr_matrix((held, Xh.indices.copy(), Xh.indptr.copy()), shape=Xh.shape)
    A.eliminate_zeros()
    B.eliminate_zeros()
    return A, B


def normalise_topics(components: Any, *, owner: str = "heldout_loglik") -> np.ndarray:
    """k x V host float64 topics with rows summing to 1; refuses negative or empty rows."""
    c = np.asarray(backend.to_host(components), dtype=np.float64)
    if c.ndim != 2:
        raise ValueError(f"{owner}: topics must be k x vocabulary; got shape {c.shape}")
    if not np.isfinite(c).all() or (c < 0).any():
        raise ValueError(f"{owner}: topics must be finite and >= 0")
    sums = c.sum(axis=1, keepdims=True)
    if (sums <= 0).any():
        raise ValueError(f"{owner}: topic {int(np.argmin(sums))} has no mass")
    return c / sums


def heldout_loglik(
    components: Any,
    X_test: Any,
    alpha: float,
    *,
    seed: int = 0,
    max_iter: int = 100,
    tol: float = 1e-4,
    details: bool = False,
    device: str = "cpu",
) -> float | dict[str, float]:
    """Held-out per-word log-likelihood by document completion (the one evaluator).

    ``components`` is any k x vocabulary non-negative matrix (rows are normalised here);
    ``X_test`` documents x vocabulary counts. Each document's tokens are split in halves
    (:func:`split_halves`); theta is fitted on the first with the topics fixed
    (:func:`infer_theta`, prior ``alpha``) and the second half scores
    ``sum log(theta_d . phi_w) / #held-out tokens``. Word probabilities are floored at
    1e-300 so a topic matrix with exact zeros scores very badly rather than -inf.
    Computed in float64. Higher is better; a uniform model scores -log(vocabulary).

    With ``details=True`` returns a dict: loglik, tokens (held-out), docs (scored).
    """
    phi = normalise_topics(components)
    X = as_counts(X_test, owner="heldout_loglik", dtype=np.float64)
    X = sp.csr_matrix(backend.to_host(X))
    if X.shape[1] != phi.shape[1]:
        raise ValueError(
            f"heldout_loglik: X_test has {X.shape[1]} words (columns) but the topics have "
            f"{phi.shape[1]}: use the vocabulary the model was trained with"
        )
    obs, held = split_halves(X, seed)
    tokens = float(held.sum())
    if tokens <= 0:
        raise ValueError(
            f"heldout_loglik: no token fell in the held-out halves of the test documents "
            f"({float(X.sum()):g} tokens in all): document completion scores about half of "
            "each document's tokens given the other half, so it needs documents of several "
            "tokens (or another random_state)")
    phiT = np.ascontiguousarray(phi.T)
    if device == "gpu":
        phiT_m = bl.Mat(backend.to_device(phiT))
        obs_m, held_m = bl.SMat(backend.to_device(obs)), bl.SMat(backend.to_device(held))
    else:
        phiT_m, obs_m, held_m = bl.Mat(phiT), bl.SMat(obs), bl.SMat(held)
    gamma = infer_theta(phiT_m, obs_m, alpha, max_iter=max_iter, tol=tol)
    theta = gamma / gamma.sum(axis=1)
    prob = bl.sddmm(theta.T, phiT_m.T, held_m)
    xp = phiT_m.xp
    total = float(xp.sum(held_m.data * xp.log(xp.maximum(prob.data, 1e-300))))
    ll = total / tokens
    if details:
        docs = int(np.count_nonzero(np.diff(held.indptr) > 0))
        return {"loglik": ll, "tokens": tokens, "docs": docs}
    return ll


def holds_text(X: Any) -> bool:
    """Whether X is a string or a sequence of strings (raw documents)."""
    if isinstance(X, str | bytes):
        return True
    if isinstance(X, list | tuple):
        return bool(X) and isinstance(X[0], str | bytes)
    if hasattr(X, "iloc") and getattr(X, "ndim", 0) == 1:  # a pandas Series: df["text"]
        return len(X) > 0 and isinstance(X.iloc[0], str | bytes)
    return isinstance(X, np.ndarray) and X.dtype.kind in "USO" and X.size > 0 and \
        isinstance(X.flat[0], str | bytes)
