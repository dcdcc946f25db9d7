"""The scikit-learn surface shared by :class:`LDA` and :class:`LDAGibbs`.

A subclass supplies the model's state and one minibatch step; this class turns documents
into fixed-shape minibatches and offers ``fit``, ``partial_fit``, ``transform``,
``score``, ``perplexity``, ``components_`` and ``top_words``.

Minibatches always have ``batch_size`` rows: the last, short one is padded with empty
documents (which contribute nothing), so every cached container keeps its shape and a
training loop allocates nothing after its first pass (sparse buffers settle on the
largest minibatch of each size class). Empty documents of the input are skipped and
counted in ``n_empty_docs_``; they never produce a NaN.

The topics start from a light k-means seeding (:meth:`LDABase._seed_topics`) and each
minibatch row from a fixed random point; ``fit`` keeps every document's topic weights
between passes (``warm_start``) so later passes need fewer E-step iterations.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

import bidlab as bl
from bidlab import backend
from bidlab.models import _lda_common as common


class LDABase:
    """Shared estimator machinery; see :class:`bidlab.models.LDA` for the parameters."""

    _owner = "LDA"
    _integer_counts = False
    _cpu_batch = 512  # documents per minibatch when batch_size is None
    _gpu_batch = 16384
    _kmeans_tokens = 30.0  # pseudo-tokens of its k-means cluster in an initial topic

    def __init__(
        self,
        k: int = 10,
        *,
        alpha: float = 0.1,
        beta: float = 0.01,
        batch_size: int | None = None,
        n_passes: int = 10,
        e_iters: int = 5,
        e_iters_warm: int | None = None,
        tau0: float = 16.0,
        kappa: float = 0.7,
        total_docs: int | None = None,
        warm_start: bool = True,
        init: str = "kmeans",
        seed: int = 0,
        dtype: Any = np.float32,
        device: str | None = None,
    ) -> None:
        if init not in ("random", "kmeans"):
            raise ValueError(
                f"The 'init' parameter of {self._owner} must be 'random' or 'kmeans'. "
                f"Got {init!r} instead."
            )
        if batch_size is not None:
            common.check_params(self._owner, batch_size=batch_size)
        common.check_params(
            self._owner,
            k=k,
            alpha=alpha,
            beta=beta,
            n_passes=n_passes,
            e_iters=e_iters,
            tau0=tau0,
            kappa=kappa,
        )
        if total_docs is not None:
            common.check_params(self._owner, total_docs=total_docs)
        if e_iters_warm is not None:
            common.check_params(self._owner, e_iters=e_iters_warm)
        if device not in (None, "cpu", "gpu"):
            raise ValueError(
                f"The 'device' parameter of {self._owner} must be 'cpu', 'gpu' or None (the "
                f"data's device). Got {device!r} instead."
            )
        self.k = int(k)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self._batch_size_arg = None if batch_size is None else int(batch_size)
        self.batch_size = self._batch_size_arg or self._cpu_batch  # resolved per device
        self.n_passes = int(n_passes)
        self.e_iters = int(e_iters)
        self.e_iters_warm = None if e_iters_warm is None else int(e_iters_warm)
        self.tau0 = float(tau0)
        self.kappa = float(kappa)
        self.total_docs = total_docs
        self.warm_start = bool(warm_start)
        self.init = init
        self.seed = int(seed)
        self.dtype = common.check_dtype(self._owner, dtype)
        self.device = device
        self.vocab_: list[str] | None = None
        self._reset()

    # ------------------------------------------------------------------ state management
    def _reset(self) -> None:
        self._V: int | None = None
        self._xp: Any = None
        self.n_batches_ = 0  # minibatch updates so far (t of the rho_t schedule)
        self.n_docs_seen_ = 0
        self.n_empty_docs_ = 0
        self.n_passes_done_ = 0
        self.history_: list[dict[str, Any]] = []
        self._total_docs = self.total_docs
        self._store: bl.Mat | None = None  # per-document topic weights kept across passes
        self._store_ready = False
        self._lo = 0

    @property
    def is_fitted(self) -> bool:
        return self._V is not None

    def _ensure_state(self, X: Any) -> None:
        """Allocate the model for X's vocabulary and device on first use."""
        xp = backend.namespace(X.data)
        if self.device == "gpu" and xp is np:
            xp = backend.cupy()
        if self._V is None:
            self._V = int(X.shape[1])
            self._xp = xp
            self.batch_size = self._batch_size_arg or (
                self._cpu_batch if xp is np else self._gpu_batch)
            rng = np.random.default_rng(self.seed)
            # each minibatch row starts from its own random point (scikit-learn's
            # Gamma(100, 0.01) draw) so that documents break the topics' symmetry
            noise = rng.gamma(100.0, 0.01, size=(self.batch_size, self.k)).astype(self.dtype)
            self._doc_init = bl.Mat(backend.empty(noise.shape, self.dtype, xp))
            self._doc_init.data[...] = noise if xp is np else xp.asarray(noise)
            if self.init == "kmeans":
                seedT = self._seed_topics(X, rng)
            else:  # Hoffman's / scikit-learn's Gamma(100, 0.01), as probabilities
                seedT = rng.gamma(100.0, 0.01, size=(self._V, self.k))
                seedT /= seedT.sum(axis=0, keepdims=True)
            self._allocate(self._V, xp, rng, seedT)
            self._batch: dict[int, bl.SMat] = {}
            self._ptr: Any = None
            return
        if X.shape[1] != self._V:
            raise ValueError(
                f"X has {X.shape[1]} words (columns) while the model was trained with "
                f"{self._V}: use the training vocabulary (e.g. vocabulary=train.vocab)"
            )

    def seed_docs(self) -> int:
        """How many leading documents the k-means initialisation looks at (8 per topic,
        between 256 and 1024)."""
        return min(1024, max(256, 8 * self.k))

    def _seed_topics(
        self, X: Any, rng: np.random.Generator, lloyd: int = 5, restarts: int = 3
    ) -> np.ndarray:
        """Initial topics, vocabulary x k (columns sum to 1), from spherical k-means.

        The first :meth:`seed_docs` documents (L2-normalised counts) are clustered by a
        few Lloyd iterations of spherical k-means started by greedy k-means++ (scikit-
        learn's KMeans seeding, with cosine distance); the best of ``restarts`` runs wins.
        Topic t starts as about scikit-learn's start (one pseudo-count per word, times
        +-10% uniform noise) plus 30 pseudo-tokens spread like the words of cluster t:
        enough to start the topics apart (from the near-uniform random start LDA ends with
        merged or dead topics far more often on planted-topic corpora), little enough not
        to pull a real corpus into the clusters' optimum (on KOS it ends better than the
        random start). Only leading documents are used, so a partial_fit stream whose first
        shard holds them starts exactly like ``fit``.
        """
        n = min(int(X.shape[0]), self.seed_docs())
        k = self.k
        full = sp.csr_matrix(backend.to_host(X[:n]), dtype=np.float64)
        used = np.unique(full.indices)  # cluster on the words these documents use
        S = sp.csr_matrix(full[:, used])
        lengths = np.sqrt(np.asarray(S.multiply(S).sum(axis=1)).ravel())
        lengths[lengths == 0] = 1.0
        Sn = sp.csr_matrix(sp.diags(1.0 / lengths) @ S)
        dist = 1.0 - (Sn @ Sn.T).toarray()  # n x n cosine distances

        def kmeans() -> tuple[float, np.ndarray]:
            chosen = [int(rng.integers(n))]
            best = dist[chosen[0]].copy()
            trials = 2 + int(np.log(k))
            for _ in range(1, k):
                p = np.maximum(best, 0.0) ** 2
                total = p.sum()
                if total <= 0:
                    chosen.append(int(rng.integers(n)))
                    continue
                cands = rng.choice(n, size=trials, p=p / total)
                options = np.minimum(best[None, :], dist[cands])
                pick = int(np.argmin((options**2).sum(axis=1)))
                chosen.append(int(cands[pick]))
                best = options[pick]
            assign = np.argmin(dist[chosen], axis=0)  # each document's nearest seed
            for _ in range(lloyd + 1):
                onehot = sp.csr_matrix((np.ones(n), (assign, np.arange(n))), shape=(k, n))
                summed = (onehot @ Sn).toarray()
                norms = np.sqrt((summed * summed).sum(axis=1, keepdims=True))
                centresT = np.ascontiguousarray((summed / np.maximum(norms, 1e-300)).T)
                sim = Sn @ centresT  # n x k
                assign = sim.argmax(axis=1)
            return float(sim.max(axis=1).sum()), assign

        # the best of a few restarts (scikit-learn's KMeans n_init), by total similarity
        assign = max((kmeans() for _ in range(restarts)), key=lambda r: r[0])[1]
        onehot = sp.csr_matrix((np.ones(n), (assign, np.arange(n))), shape=(k, n))
        docs = np.full((k, full.shape[1]), 1e-12)
        docs[:, used] += (onehot @ S).toarray()
        docs /= docs.sum(axis=1, keepdims=True)
        noise = rng.random(size=docs.shape)  # +-10%, like Gamma(100, 0.01) but cheaper
        noise *= 0.2
        noise += 0.9
        topics = (1.0 + self._kmeans_tokens * docs) * noise
        topics /= topics.sum(axis=1, keepdims=True)
        return np.ascontiguousarray(topics.T)

    def _to_model_device(self, X: Any) -> Any:
        if self._xp is not np and not backend.is_cupy_array(X):
            return backend.to_device(X)
        if self._xp is np and backend.is_cupy_array(X):
            raise TypeError(
                f"{self._owner}: this model lives on the CPU but X is on the GPU; pass "
                "bidlab.backend.to_host(X) or fit a model with device='gpu'"
            )
        return X

    def _counts(self, X: Any) -> Any:
        if hasattr(X, "vocab") and hasattr(X, "X") and self.vocab_ is None:
            self.vocab_ = list(X.vocab)
        return common.as_counts(
            X, owner=self._owner, dtype=self.dtype, integer=self._integer_counts
        )

    # ------------------------------------------------------------------ minibatches
    def _load(self, X: Any, lo: int, hi: int) -> bl.SMat:
        """Rows lo..hi of CSR X copied into a persistent batch_size-row SMat (padded with
        empty rows). Its buffers grow (by the core's growth factor) until they hold the
        largest minibatch of its size class; from then on loading allocates nothing.
        """
        xp = self._xp
        B = self.batch_size
        indptr = X.indptr
        start, stop = int(indptr[lo]), int(indptr[hi])
        n = hi - lo
        if self._ptr is None or self._ptr.dtype != indptr.dtype:
            self._ptr = backend.empty((B + 1,), indptr.dtype, xp)
        ptr = self._ptr
        xp.subtract(indptr[lo : hi + 1], start, out=ptr[: n + 1])
        ptr[n + 1 :] = stop - start
        csp = backend.sparse_module(xp)
        view = csp.csr_matrix(
            (X.data[start:stop], X.indices[start:stop], ptr), shape=(B, self._V), copy=False
        )
        # Minibatches go to one of several SMats by nnz (classes 1.5x wide), so that no
        # SMat's buffers are over twice its nnz: scipy copies a CSR's arrays when they view
        # a buffer over twice their size, and the core's cached CSR views would then hand
        # the kernels stale copies (reported to the core's owner). Each class allocates
        # once; after a pass nothing is allocated.
        slot = int(np.log(max(stop - start, 1)) / np.log(1.5))
        batch = self._batch.get(slot)
        if batch is None:
            batch = self._batch[slot] = bl.SMat(view.copy())
        batch.copy_from(view)
        return batch

    def _batches(self, X: Any) -> Iterator[tuple[int, int, int]]:
        """(lo, hi, ndocs) row ranges of up to batch_size documents, in order."""
        for lo in range(0, X.shape[0], self.batch_size):
            hi = min(lo + self.batch_size, X.shape[0])
            yield lo, hi, hi - lo

    def _drop_empty(self, X: Any) -> Any:
        mask = common.nonempty_rows(X)
        empty = int(mask.shape[0] - mask.sum())
        self.n_empty_docs_ += empty
        if empty == 0:
            return X
        idx = np.flatnonzero(mask)
        if backend.is_cupy_array(X.data):
            idx = backend.cupy().asarray(idx)
        return X[idx]

    def _prepare(self, X: Any) -> Any:
        X = self._counts(X)
        X = self._to_model_device(X) if self._V is not None else X
        self._ensure_state(X)
        X = self._to_model_device(X)
        return self._drop_empty(X)

    def _pass_steps(self, X: Any) -> Iterator[int]:
        """One pass of minibatch updates over the (non-empty) documents of X, yielding the
        number of minibatches done after each one (the caller may score in between)."""
        t0 = time.perf_counter()
        for i, (lo, hi, n) in enumerate(self._batches(X)):
            with bl.caching():
                sb = self._load(X, lo, hi)
                self._lo = lo
                self._train_batch(sb, n)
            self.n_batches_ += 1
            self.n_docs_seen_ += n
            if hi < X.shape[0]:
                yield i + 1
        with bl.caching():
            self._end_pass()
        self.n_passes_done_ += 1
        self._store_ready = self._store is not None
        self.history_.append({"pass": self.n_passes_done_, "seconds": time.perf_counter() - t0})
        self._after_pass()
        yield -1

    def _run_pass(self, X: Any) -> None:
        for _ in self._pass_steps(X):
            pass

    def _after_pass(self) -> None:
        """Called after each pass, outside the training step (Gibbs: idle temperatures)."""

    # ------------------------------------------------------------------ public surface
    def fit(self, X: Any, y: Any = None) -> LDABase:
        """Train from scratch: ``n_passes`` passes over the documents x vocabulary counts X."""
        del y
        for _ in self.fit_passes(X):
            pass
        return self

    def fit_passes(self, X: Any) -> Iterator[int]:
        """``fit``, one pass at a time: yields the number of passes done after each.

        Lets a caller time, score or stop training between passes (the benchmark's
        log-likelihood-against-time checkpoints); exhausting it equals ``fit(X)``.
        """
        for _, index in self._fit_steps(X, every=0):
            if index < 0:
                yield self.n_passes_done_

    def _fit_steps(self, X: Any, every: int) -> Iterator[tuple[int, int]]:
        """``fit`` yielding (passes done, minibatch index or -1 at a pass end) after every
        ``every``-th minibatch of a pass (0: at pass ends only)."""
        self._reset()
        X = self._prepare(X)
        if self._total_docs is None:
            self._total_docs = max(int(X.shape[0]), 1)
        if self.warm_start and self.n_passes > 1:
            dev = "cpu" if self._xp is np else "gpu"
            self._store = bl.ones((X.shape[0], self.k), self.dtype, dev)
        self._plan(self.n_passes)
        for _ in range(self.n_passes):
            for index in self._pass_steps(X):
                if index < 0 or (every and index % every == 0):
                    yield self.n_passes_done_, index

    def partial_fit(self, X: Any, y: Any = None) -> LDABase:
        """One online pass over X, continuing from the current state (streams / shards).

        Set ``total_docs`` to the size of the whole stream: the online update scales each
        minibatch by total_docs / batch documents (default: the documents of the first
        call). With shards whose sizes are multiples of ``batch_size``, the first holding
        at least :meth:`seed_docs` documents (the initialisation looks at those), this
        equals ``fit`` with ``n_passes=1`` on their concatenation, for a fixed seed.
        """
        del y
        first = self._V is None
        X = self._prepare(X)
        if self._total_docs is None:
            self._total_docs = max(int(X.shape[0]), 1)
        if first:
            self._plan(self.n_passes)
        self._run_pass(X)
        return self

    def _check_fitted(self) -> None:
        if self._V is None:
            raise RuntimeError(
                f"this {self._owner} is not fitted yet: call fit(X) or partial_fit(X) first"
            )

    def transform(self, X: Any) -> Any:
        """Documents' topic proportions (documents x k, rows sum to 1) on X's backend.

        The topics are held fixed and each document's proportions inferred by the
        variational E-step (:func:`bidlab.models._lda_common.infer_theta`); an empty
        document gets the prior mean (uniform).
        """
        self._check_fitted()
        on_gpu = backend.is_cupy_array(getattr(X, "data", X))
        X = common.as_counts(X, owner=self._owner, dtype=self.dtype)
        if X.shape[1] != self._V:
            raise ValueError(
                f"X has {X.shape[1]} words (columns) while the model was trained with "
                f"{self._V}: use the training vocabulary (e.g. vocabulary=train.vocab)"
            )
        X = self._to_model_device(X) if on_gpu or self._xp is not np else X
        gamma = common.infer_theta(self._topicsT(), bl.SMat(X), self.alpha)
        theta = (gamma / gamma.sum(axis=1)).data
        return theta if on_gpu else np.asarray(backend.to_host(theta))

    def fit_transform(self, X: Any, y: Any = None) -> Any:
        return self.fit(X, y).transform(X)

    def score(self, X: Any, y: Any = None, *, seed: int = 0) -> float:
        """Held-out per-word log-likelihood of X by document completion (higher is better)."""
        del y
        self._check_fitted()
        X = common.as_counts(X, owner=self._owner, dtype=np.float64)
        if X.shape[1] != self._V:
            raise ValueError(
                f"X has {X.shape[1]} words (columns) while the model was trained with "
                f"{self._V}: use the training vocabulary"
            )
        return float(common.heldout_loglik(self.components_, X, self.alpha, seed=seed))

    def perplexity(self, X: Any, y: Any = None) -> float:
        """exp(-score(X)): the held-out per-word perplexity (lower is better)."""
        return float(np.exp(-self.score(X, y)))

    @property
    def components_(self) -> np.ndarray:
        """Topics: k x vocabulary host numpy, each row sums to 1."""
        self._check_fitted()
        phiT = np.asarray(backend.to_host(self._topicsT().data), dtype=np.float64)
        comp = np.ascontiguousarray(phiT.T)
        comp /= comp.sum(axis=1, keepdims=True)
        return comp

    def top_words(self, n: int = 10, vocab: Sequence[str] | None = None) -> list[list[str]]:
        """Each topic's ``n`` most probable words, best first.

        ``vocab`` names the columns (default: the training Corpus's vocabulary if ``fit``
        got one, else the column numbers as strings).
        """
        comp = self.components_
        if vocab is None:
            vocab = self.vocab_ if self.vocab_ is not None else [str(i) for i in range(self._V)]
        if len(vocab) != comp.shape[1]:
            raise ValueError(
                f"vocab has {len(vocab)} words while the model was trained with "
                f"{comp.shape[1]}"
            )
        n = max(1, min(int(n), comp.shape[1]))
        best = np.argsort(-comp, axis=1, kind="stable")[:, :n]
        return [[vocab[j] for j in row] for row in best]

    def learner(self, X: Any, **options: Any) -> Any:
        """A live :class:`bidlab.learn.Learner` training this model on X.

        ``start()`` runs it in a background thread (``pause`` / ``resume`` / ``stop``,
        live options such as ``alpha`` or ``e_iters``, ``observe`` for snapshots,
        checkpoints); ``fit()`` runs it in the foreground with a progress bar. Options are
        the learner's (``n_passes``, ``val_every``, ...) and the model's. For
        :class:`LDAGibbs` it also sets and logs temperatures (``set_temperature``).
        The estimator is trained in place: ``components_`` etc. follow the learner.
        """
        from bidlab.models._lda_learn import make_learner

        return make_learner(self, X, **options)

    def _batch_loglik(self, sb: bl.SMat) -> bl.Mat:
        """Per-word log-likelihood of a minibatch, its documents' proportions fitted with
        the topics fixed (``e_iters`` E-steps); a 1 x 1 Mat, allocation-free when cached."""
        phiT = self._topicsT()
        if getattr(self, "_ev", None) is None:
            dev = "cpu" if self._xp is np else "gpu"
            self._ev = (bl.zeros((self.batch_size, self.k), self.dtype, dev),
                        bl.zeros((self.batch_size, self.k), self.dtype, dev))
        gamma, et = self._ev
        tiny = common.mu_floor(self.dtype)
        et <<= 1.0
        with bl.caching():
            for _ in range(self.e_iters):
                mu = bl.sddmm(et.T, phiT.T, sb)
                gamma <<= et * ((sb / (mu + tiny)) @ phiT) + self.alpha_m
                bl.expdigamma(gamma, out=et)
        return self._score_with(sb, gamma)

    def _score_with(self, sb: bl.SMat, doc_params: bl.Mat) -> bl.Mat:
        """Per-word log-likelihood of ``sb`` under the current topics, each document's
        proportions being its row of ``doc_params`` normalised (Dirichlet parameters or
        topic counts); one SDDMM, a 1 x 1 Mat, allocation-free when cached.

        The learner's training score: after a minibatch's E-step (or sampling sweeps) the
        fitted parameters are at hand, so scoring costs one SDDMM instead of a new fit."""
        phiT = self._topicsT()
        tiny = common.mu_floor(self.dtype)
        with bl.caching():
            theta = doc_params / doc_params.sum(axis=1)
            prob = bl.sddmm(theta.T, phiT.T, sb)
            return (sb * bl.log(prob + tiny)).sum() / sb.sum()

    # ------------------------------------------------------------------ subclass hooks
    def _allocate(self, V: int, xp: Any, rng: np.random.Generator, seedT: np.ndarray) -> None:
        """Allocate the model's matrices; ``seedT`` holds the initial topics (V x k)."""
        raise NotImplementedError

    def _plan(self, n_passes: int) -> None:
        """Called before training with the planned number of passes (annealing)."""

    def _train_batch(self, sb: bl.SMat, ndocs: int) -> None:
        raise NotImplementedError

    def _end_pass(self) -> None:
        """Called after each pass (the batch updater applies its update here)."""

    def _topicsT(self) -> bl.Mat:
        """vocabulary x k topics (columns sum to 1) on the model's device."""
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers
    def _init_doc_topics(self, target: bl.Mat, n: int) -> None:
        """Start a minibatch's document-topic weights: last pass's values (``warm_start``
        in ``fit``) or the fixed random start ``_doc_init``."""
        if self._store_ready:
            target.data[:n] = self._store.data[self._lo : self._lo + n]
            target.data[n:] = self._doc_init.data[n:]
        else:
            target <<= self._doc_init

    def _n_e_iters(self) -> int:
        """E-step iterations for this minibatch (fewer once warm-started)."""
        if self._store_ready and self.e_iters_warm is not None:
            return self.e_iters_warm
        return self.e_iters

    def _save_doc_topics(self, source: bl.Mat, n: int) -> None:
        if self._store is not None:
            self._store.data[self._lo : self._lo + n] = source.data[:n]

    def _rho(self, ndocs: int | None = None) -> float:
        """Hoffman's step size rho_t = (tau0 + t)^-kappa, t = 1, 2, ... minibatches.

        A short minibatch (a pass's last) of n < batch_size documents takes the step
        rho_t * n / batch_size: its D / n-scaled statistics are noisy, and a full step from
        a handful of documents would undo much of the pass.
        """
        rho = float((self.tau0 + self.n_batches_ + 1) ** (-self.kappa))
        if ndocs is not None and ndocs < self.batch_size:
            rho *= ndocs / self.batch_size
        return rho

    def __repr__(self) -> str:
        return f"{type(self).__name__}(k={self.k}, alpha={self.alpha}, beta={self.beta})"
