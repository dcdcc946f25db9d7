"""Views of a topic model as data: the intertopic map, pyLDAvis's prepared data, a
standalone HTML map, and distances between two models' topics.

* :func:`intertopic_map` places the topics in 2-D: Jensen-Shannon distances between their
  word distributions, then classical multidimensional scaling (PCoA, pyLDAvis's default).
  Given the previous frame's coordinates it rotates / reflects the new ones onto them
  (orthogonal Procrustes), so a live map does not flip or spin between frames.
* :func:`prepared_data` builds the JSON document pyLDAvis's page reads (``mdsDat``,
  ``tinfo``, ``token.table``, ``R``, ``lambda.step``, ``plot.opts``, ``topic.order``),
  with no pyLDAvis install: ``json.dump`` it, or hand it to ``pyLDAvis.prepared_data_to_html``
  through ``pyLDAvis.PreparedData``.
* :func:`map_html` writes the map as one self-contained HTML page (inline SVG, each topic's
  top words in its tooltip), which needs no server.
* :func:`topic_diff` is gensim's ``LdaModel.diff`` (unscaled): a difference for every pair
  of topics.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import rel_entr, xlogy

from bidlab import backend
from bidlab.models.lda.map_page import map_html
from bidlab.models.validation import whole_at_least_one

__all__ = ["js_distances", "js_divergences", "intertopic_map", "stress_steps", "MIN_LAMBDA_STEP",
           "prepared_data", "map_html", "topic_diff", "relevance", "saliency"]


def _rows(topics: Any) -> np.ndarray:
    P = np.asarray(backend.to_host(topics), np.float64)
    if P.ndim != 2 or (P < 0).any() or not np.isfinite(P).all():
        raise ValueError("topics must be a k x vocabulary matrix of finite weights >= 0")
    s = P.sum(axis=1, keepdims=True)
    if (s <= 0).any():
        raise ValueError(f"topic {int(np.argmin(s))} has no mass")
    return P / s


#: the finest lambda_step of :func:`prepared_data`: it sorts each topic's words 1 / step times
MIN_LAMBDA_STEP = 1e-3
_BLOCK = 1 << 17  # topic x word entries per buffer of the pairwise sums (1 MiB)
_COLUMNS = 1 << 14  # words per slice of those sums, so that the buffers stay in cache
_REFINE = 1e-4  # divergences below this are recomputed term by term (no cancellation)


def _varying_columns(P: np.ndarray) -> np.ndarray:
    """``P`` without the words whose probability is the same in every row: such a word adds
    exactly nothing to any pair's Jensen-Shannon divergence, so dropping it is exact."""
    keep = (P != P[:1]).any(axis=0)
    return P if keep.all() else P[:, keep]


def _js_pairs_exact(p: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon divergences of ``p`` and each row of ``Q`` as sums of relative
    entropies, which stay accurate for nearly equal distributions (scipy's form)."""
    m = 0.5 * (p[None, :] + Q)
    return 0.5 * (rel_entr(p[None, :], m).sum(axis=1) + rel_entr(Q, m).sum(axis=1))


def js_divergences(topics: Any, other: Any = None) -> np.ndarray:
    """Jensen-Shannon divergences (natural log) between the rows of ``topics`` and of
    ``other`` (default: ``topics`` itself), each row normalised to sum to 1; k x k'.

    Computed on the full word distributions, as
    ``H(M) - (H(P) + H(Q)) / 2`` with ``M = (P + Q) / 2``, in cache-sized blocks spread over
    threads; pairs whose divergence comes out tiny are recomputed as relative entropies, so
    every entry agrees with ``scipy.spatial.distance.jensenshannon(p, q) ** 2`` to rounding.

    Examples
    --------
    >>> D = js_divergences(np.array([[1.0, 0.0], [0.0, 1.0]]))
    >>> bool(np.isclose(D[0, 1], np.log(2)))
    True
    """
    P = _rows(topics)
    Q = P if other is None else _rows(other)
    if P.shape[1] != Q.shape[1]:
        raise ValueError(f"the topics have {P.shape[1]} and {Q.shape[1]} words: compare "
                         "models over one vocabulary")
    square = other is None
    both = _varying_columns(np.vstack([P, Q]) if not square else P)
    P, Q = (both, both) if square else (both[: P.shape[0]], both[P.shape[0]:])
    kp, kq, V = P.shape[0], Q.shape[0], P.shape[1]
    out = np.zeros((kp, kq))
    if V == 0:
        return out
    hp = xlogy(P, P).sum(axis=1)
    hq = hp if square else xlogy(Q, Q).sum(axis=1)
    # sum_w m log m with m = (p + q) / 2 is (sum_w s log s - log 2 * sum_w s) / 2 for
    # s = p + q; a zero s is floored at the smallest normal float, whose log times it is 0
    # (0 log 0 = 0) and which leaves every other sum unchanged.
    tiny = np.finfo(np.float64).tiny
    Pt = P + tiny / 2
    Qt = Pt if square else Q + tiny / 2
    sp_, sq_ = P.sum(axis=1), Q.sum(axis=1)

    def rows(first: int, stride: int) -> None:
        cw = min(V, _COLUMNS)
        step = max(1, min(kq, _BLOCK // cw))
        a, b = np.empty((step, cw)), np.empty((step, cw))
        for i in range(first, kp, stride):
            for s in range(i + 1 if square else 0, kq, step):  # square: upper triangle only
                e = min(s + step, kq)
                acc = np.zeros(e - s)
                for c in range(0, V, cw):
                    d = min(c + cw, V)
                    aa, bb = a[: e - s, : d - c], b[: e - s, : d - c]
                    np.add(Qt[s:e, c:d], Pt[i, c:d][None, :], out=aa)
                    np.log(aa, out=bb)
                    bb *= aa
                    acc += bb.sum(axis=1)
                hm = 0.5 * (acc - np.log(2.0) * (sp_[i] + sq_[s:e]))
                out[i, s:e] = 0.5 * (hp[i] + hq[s:e]) - hm

    workers = max(1, min(os.cpu_count() or 1, 8, kp))
    if workers == 1 or kp * kq * V < (1 << 22):
        rows(0, 1)
    else:  # numpy's ufuncs release the GIL: interleaved rows balance the triangle
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda w: rows(w, workers), range(workers)))
    if square:
        out = out + out.T
    for i in range(kp):  # H(M) - mean H cancels for near-equal rows: redo those exactly
        js = np.flatnonzero(out[i] < _REFINE)
        if square:
            js = js[js != i]
        if len(js):
            out[i, js] = _js_pairs_exact(P[i], Q[js])
    return np.maximum(out, 0.0)


def js_distances(topics: Any, other: Any = None) -> np.ndarray:
    """Jensen-Shannon distances between the rows of ``topics`` and of ``other`` (default:
    ``topics`` itself); k x k'.

    The square roots of :func:`js_divergences` (natural log): entry ``[i, j]`` equals
    ``scipy.spatial.distance.jensenshannon(topics[i], other[j])``.
    """
    return np.sqrt(js_divergences(topics, other))


def classical_mds(D: np.ndarray, dims: int = 2) -> np.ndarray:
    """Classical MDS (principal coordinates) of the distance matrix ``D``: k x dims."""
    k = D.shape[0]
    J = np.eye(k) - 1.0 / k
    B = -0.5 * J @ (D**2) @ J
    vals, vecs = np.linalg.eigh(B)
    order = np.argsort(vals)[::-1][:dims]
    coords = vecs[:, order] * np.sqrt(np.maximum(vals[order], 0.0))
    if coords.shape[1] < dims:
        coords = np.hstack([coords, np.zeros((k, dims - coords.shape[1]))])
    return coords


def _align(coords: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """Rotate / reflect ``coords`` onto ``previous`` (same topics, rows in order)."""
    n = min(len(coords), len(previous))
    if n < 2:
        return coords
    A, B = coords[:n] - coords[:n].mean(0), previous[:n] - previous[:n].mean(0)
    U, _, Vt = np.linalg.svd(A.T @ B)
    return coords @ (U @ Vt)


def intertopic_map(topics: Any, weights: Any = None,
                   previous: np.ndarray | None = None, steps: int = 0
                   ) -> dict[str, np.ndarray]:
    """The topics in 2-D (see the module doc).

    With ``previous`` (k x 2, the last placement of the same topics) and ``steps`` > 0 the
    previous placement moves by that many stress-majorisation steps (SMACOF's Guttman
    transform) towards the new distances instead of being placed afresh: a live map then
    moves continuously, where a fresh classical MDS of nearly equidistant topics picks a
    different plane of them each time (its top eigenvalues nearly tie), which no rotation
    onto the previous frame undoes.

    Returns a dict: ``x``, ``y`` (k,), ``weight`` (k, each topic's share of the tokens:
    ``weights`` normalised, else equal), ``distance`` (k x k Jensen-Shannon).

    Examples
    --------
    >>> m = intertopic_map(np.array([[0.9, 0.1, 0.0], [0.0, 0.1, 0.9], [0.4, 0.2, 0.4]]))
    >>> m["x"].shape
    (3,)
    """
    D = js_distances(topics)
    k = D.shape[0]
    prev = None if previous is None else np.asarray(previous, np.float64).reshape(-1, 2)
    if prev is not None and steps > 0 and prev.shape[0] == k > 1:
        coords = stress_steps(D, prev, int(steps))
    else:
        coords = classical_mds(D) if k > 1 else np.zeros((1, 2))
        if prev is not None and len(prev):
            coords = _align(coords, prev)
    w = np.ones(k) if weights is None else np.asarray(weights, np.float64).reshape(-1)
    if w.shape[0] != k:
        raise ValueError(f"weights has {w.shape[0]} entries for {k} topics")
    return {"x": coords[:, 0].copy(), "y": coords[:, 1].copy(),
            "weight": w / max(float(w.sum()), 1e-300), "distance": D}


def stress_steps(D: np.ndarray, start: np.ndarray, steps: int) -> np.ndarray:
    """``steps`` Guttman transforms (SMACOF, unit weights) of the 2-D placement ``start``
    towards the distances ``D``; each lowers the raw stress sum (D_ij - |x_i - x_j|)^2.

    Examples
    --------
    >>> D = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> X = stress_steps(D, np.array([[0.0, 0.0], [3.0, 0.0]]), 1)
    >>> round(float(np.linalg.norm(X[0] - X[1])), 6)
    1.0
    """
    X = np.array(start, np.float64)
    k = X.shape[0]
    for _ in range(steps):
        d = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2))
        B = -np.divide(D, d, out=np.zeros_like(d), where=d > 1e-12)
        np.fill_diagonal(B, 0.0)
        np.fill_diagonal(B, -B.sum(axis=1))
        X = B @ X / k
    return X


def relevance(topics: Any, term_share: np.ndarray, lam: float) -> np.ndarray:
    """pyLDAvis's relevance, k x vocabulary: ``lam log p(w|t) + (1 - lam) log lift``."""
    P = _rows(topics)
    logp = np.log(np.maximum(P, 1e-300))
    share = np.asarray(term_share, np.float64)  # (a float32 floor of 1e-300 is 0)
    lift = logp - np.log(np.maximum(share, 1e-300))[None, :]
    return lam * logp + (1.0 - lam) * lift


def saliency(topics: Any, topic_freq: np.ndarray, term_share: np.ndarray) -> np.ndarray:
    """Each word's saliency (Chuang et al. 2012; the order of pyLDAvis's default term list):
    ``p(w) sum_t p(t|w) log(p(t|w) / p(t))``, with ``p(t|w)`` the word's probabilities in
    the topics normalised over the topics and ``p(t)`` the topics' shares of the tokens."""
    P = _rows(topics)
    given = P / np.maximum(P.sum(axis=0, keepdims=True), 1e-300)  # p(t | w)
    pt = np.asarray(topic_freq, np.float64) / max(float(np.sum(topic_freq)), 1e-300)
    ratio = given / np.maximum(pt, 1e-300)[:, None]
    return np.asarray(term_share, np.float64) * xlogy(given, np.maximum(ratio, 1e-300)
                                                      ).sum(axis=0)


def check_lambda_step(lambda_step: float, who: str) -> None:
    """Refuse a ``lambda_step`` outside ``[MIN_LAMBDA_STEP, 1]`` (NaN too), naming ``who``
    took it (checked before any work: :func:`prepared_data`, LDA's ``to_pyldavis``).

    Examples
    --------
    >>> check_lambda_step(0.01, "prepared_data")
    """
    if not MIN_LAMBDA_STEP <= float(lambda_step) <= 1.0:
        raise ValueError(f"{who}: lambda_step must be in (0, 1] and at least "
                         f"MIN_LAMBDA_STEP = {MIN_LAMBDA_STEP:g} (the spacing of the relevance "
                         f"weights lambda from 0 to 1); got {lambda_step}: pass e.g. 0.01")


def prepared_data(topics: Any, theta: Any, X: Any, vocab: Sequence[str] | None = None,
                  lambda_step: float = 0.01, R: int = 30) -> dict[str, Any]:
    """pyLDAvis's prepared data for the topics (k x vocabulary), the documents' topic
    proportions ``theta`` (documents x k) and their counts ``X``; JSON-ready. The default
    term list (no topic selected) holds the ``R`` most salient words (:func:`saliency`),
    as pyLDAvis's does. Only the words X holds are listed (a word without tokens in X has
    no bar to draw), so ``R`` is at most their number. Each topic lists the top ``R`` words
    by relevance (:func:`relevance`) at every lambda of ``0, lambda_step, 2 lambda_step,
    ...`` and at 1 (a step, at least :data:`MIN_LAMBDA_STEP`, need not divide 1).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> X = sp.csr_matrix(np.array([[3, 1, 0], [0, 1, 4]]))
    >>> d = prepared_data(np.array([[0.7, 0.2, 0.1], [0.1, 0.2, 0.7]]),
    ...                   np.array([[0.9, 0.1], [0.1, 0.9]]), X, ["a", "b", "c"], R=2)
    >>> sorted(d)
    ['R', 'lambda.step', 'mdsDat', 'plot.opts', 'tinfo', 'token.table', 'topic.order']
    """
    check_lambda_step(lambda_step, "prepared_data")
    P = _rows(topics)
    k, V = P.shape
    theta = np.asarray(backend.to_host(theta), np.float64)
    if hasattr(X, "X") and hasattr(X, "vocab"):
        vocab = list(X.vocab) if vocab is None else vocab
        X = X.X
    Xh = sp.csr_matrix(backend.to_host(X))
    vocab = [str(i) for i in range(V)] if vocab is None else [str(v) for v in vocab]
    if len(vocab) != V or Xh.shape[1] != V or theta.shape != (Xh.shape[0], k):
        raise ValueError(f"prepared_data: shapes disagree: topics {P.shape}, theta "
                         f"{theta.shape}, X {Xh.shape}, vocab {len(vocab)}")
    Xh = Xh.astype(np.float64)  # float32 sums would floor 1e-300 to 0 (log: -inf)
    lengths = np.asarray(Xh.sum(axis=1)).ravel()
    term_freq = np.asarray(Xh.sum(axis=0)).ravel()
    # only the words X holds are listed: a word without tokens in X has no bar to draw and
    # would top every relevance list (its lift divides by its share, 0)
    held = np.flatnonzero(term_freq > 0)
    if held.size == 0:
        raise ValueError(f"prepared_data: the documents X hold no word ({Xh.shape[0]} "
                         "documents, 0 tokens): pass the documents to visualise, e.g. the "
                         "training corpus")
    topic_freq = (theta * lengths[:, None]).sum(axis=0)
    order = np.argsort(-topic_freq, kind="stable")  # pyLDAvis lists topics by size
    P, topic_freq = P[order], topic_freq[order]
    term_topic = P * topic_freq[:, None]
    scale = np.where(term_topic.sum(axis=0) > 0, term_freq / np.maximum(
        term_topic.sum(axis=0), 1e-300), 0.0)
    term_topic *= scale[None, :]
    share = term_freq / max(float(term_freq.sum()), 1e-300)
    m = intertopic_map(P, topic_freq)
    R = min(whole_at_least_one("prepared_data", "R (terms listed per topic)", R), held.size)
    default = held[np.argsort(-saliency(P, topic_freq, share)[held], kind="stable")[:R]]
    cols: dict[str, list[Any]] = {"Term": [], "Freq": [], "Total": [], "Category": [],
                                  "logprob": [], "loglift": []}
    for rank, j in enumerate(default):
        for name, v in (("Term", vocab[j]), ("Freq", float(term_freq[j])),
                        ("Total", float(term_freq[j])), ("Category", "Default"),
                        ("logprob", float(R - rank)), ("loglift", float(R - rank))):
            cols[name].append(v)
    logp = np.log(np.maximum(P, 1e-300))
    lift = logp - np.log(np.maximum(share, 1e-300))[None, :]
    lams = np.arange(0.0, 1.0, float(lambda_step))  # then exactly 1, whatever the step
    lams = np.append(lams[lams < 1.0 - 1e-9], 1.0)
    kept: set[int] = set(int(j) for j in default)
    for t in range(k):
        words: list[int] = []
        for lam in lams:
            rel = lam * logp[t, held] + (1.0 - lam) * lift[t, held]
            words.extend(int(held[j]) for j in np.argsort(-rel, kind="stable")[:R])
        for j in dict.fromkeys(words):
            kept.add(j)
            for name, v in (("Term", vocab[j]), ("Freq", float(term_topic[t, j])),
                            ("Total", float(term_freq[j])), ("Category", f"Topic{t + 1}"),
                            ("logprob", float(round(logp[t, j], 4))),
                            ("loglift", float(round(lift[t, j], 4)))):
                cols[name].append(v)
    terms = sorted(kept)
    tok: dict[str, list[Any]] = {"Topic": [], "Freq": [], "Term": []}
    for j in terms:
        for t in range(k):
            if term_topic[t, j] > 0 and term_freq[j] > 0:
                tok["Topic"].append(t + 1)
                tok["Freq"].append(float(term_topic[t, j] / term_freq[j]))
                tok["Term"].append(vocab[j])
    return {
        "mdsDat": {"x": m["x"].tolist(), "y": m["y"].tolist(),
                   "topics": list(range(1, k + 1)), "cluster": [1] * k,
                   "Freq": (100.0 * m["weight"]).tolist()},
        "tinfo": cols, "token.table": tok, "R": R, "lambda.step": float(lambda_step),
        "plot.opts": {"xlab": "PC1", "ylab": "PC2"},
        "topic.order": [int(t) + 1 for t in order],
    }


def topic_diff(topics: Any, other: Any, distance: str = "jensen_shannon") -> np.ndarray:
    """k x k' differences between two sets of topics, as gensim's ``LdaModel.diff``.

    Each row is normalised to a word distribution first (gensim's ``get_topics``); entry
    ``[i, j]`` is the value gensim's ``diff(other, distance=distance, normed=False,
    annotation=False)`` returns for topic ``i`` of ``topics`` and topic ``j`` of ``other``.

    Parameters
    ----------
    topics, other : array-like
        k x vocabulary and k' x vocabulary topic-word weights over one vocabulary.
    distance : {"jensen_shannon", "hellinger", "kullback_leibler"}
        ``"jensen_shannon"``: the Jensen-Shannon *divergence* (natural log, in
        ``[0, log 2]``), as ``gensim.matutils.jensen_shannon`` -- not its square root, the
        Jensen-Shannon distance of :func:`js_distances` and ``scipy``'s ``jensenshannon``.
        ``"hellinger"``: the Hellinger distance. ``"kullback_leibler"``: ``KL(topic || other
        topic)``, with zero probabilities in ``other`` floored at 1e-300.

    Returns
    -------
    numpy.ndarray
        k x k', unscaled (gensim's default ``normed=True`` divides by the largest entry).

    Examples
    --------
    >>> P = np.array([[1.0, 0.0], [0.5, 0.5]])
    >>> bool(np.isclose(topic_diff(P[:1], P[:1])[0, 0], 0.0))
    True
    """
    if distance == "jensen_shannon":
        return js_divergences(topics, other)
    P, Q = _rows(topics), _rows(other)
    if P.shape[1] != Q.shape[1]:
        raise ValueError(f"the topics have {P.shape[1]} and {Q.shape[1]} words: compare "
                         "models over one vocabulary")
    if distance == "hellinger":
        rp, rq = np.sqrt(P), np.sqrt(Q)
        out = np.sqrt(np.maximum(0.0, 1.0 - rp @ rq.T))
        # 1 - sum sqrt(p q) cancels for near-equal rows (identical ones would give ~1e-8):
        # redo those as gensim does, sqrt(sum (sqrt p - sqrt q)^2 / 2)
        for i, j in np.argwhere(out < _REFINE ** 0.5):
            out[i, j] = np.sqrt(0.5 * np.sum((rp[i] - rq[j]) ** 2))
        return out
    if distance == "kullback_leibler":
        logp = np.log(np.maximum(P, 1e-300))
        logq = np.log(np.maximum(Q, 1e-300))
        out = (P * logp).sum(axis=1)[:, None] - P @ logq.T
        for i, j in np.argwhere(out < _REFINE):  # cancels likewise: sum p log(p / q) here
            out[i, j] = np.sum(P[i] * (logp[i] - logq[j]))
        return np.maximum(out, 0.0)
    raise ValueError(f"topic_diff: unknown distance {distance!r}; choose 'jensen_shannon', "
                     "'hellinger' or 'kullback_leibler'")
