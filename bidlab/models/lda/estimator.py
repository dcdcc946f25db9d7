"""The scikit-learn face shared by :class:`~bidlab.models.LDA` and
:class:`~bidlab.models.LDAGibbs`: a thin wrapper around one LDA model
(:class:`~bidlab.models.lda.core.LDACore`) trained by a :class:`bidlab.learn.Learner`.

* ``fit`` builds the model and runs an :class:`~bidlab.models.lda.learner.LDALearner` to
  completion in the calling thread (every document trained on, no per-minibatch score);
  with ``warm_start=True`` a fitted estimator's ``fit`` continues its model instead;
* ``partial_fit`` runs one pass over the given documents, continuing the model (and the
  step-size schedule: the updater is kept with the model);
* ``learner(X, y=None, **options)`` returns the live learner on the same model object.

Inputs are checked by scikit-learn's ``validate_data`` (dense or any sparse format,
``n_features_in_``, feature names) and then as counts (no NaN, infinite or negative
entries, and for Gibbs whole numbers), each refusal naming the first bad (document,
word). Empty documents are skipped and counted in ``n_empty_docs_``. ``transform``
returns the input's float dtype; the model computes in ``dtype``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted, validate_data

from bidlab import backend
from bidlab.learn import Option
from bidlab.models.base import BidlabEstimator
from bidlab.models.in_memory import refuse_source_input
from bidlab.models.lda import common
from bidlab.models.lda.continuation import continued_options, online_updater, trained_params
from bidlab.models.lda.core import LDACore
from bidlab.models.lda.fit_guard import corpus_counts, kept_on_error
from bidlab.models.lda.learner import LDALearner
from bidlab.models.lda.steering import TopicSteering
from bidlab.models.sk_params import COMMON
from bidlab.models.validation import RANDOM_STATE, seed_from

__all__ = ["LDAEstimator"]


def is_float_dtype(value: Any) -> bool:
    """float32 or float64 (as a type, dtype or name)."""
    if isinstance(value, bool) or value is None:
        return False
    return np.dtype(value) in (np.dtype(np.float32), np.dtype(np.float64))


BATCH_SIZE = Option("batch_size", int, None, "documents per minibatch (None: a default per "
                    "device)", low=1, none_ok=True)
N_PASSES = Option("n_passes", int, 10, "passes over the data made by fit", low=1,
                  high=10**9)
DTYPE = Option("dtype", str, np.float32, "the model's arithmetic", test=is_float_dtype,
               text="float32 or float64")
#: the online updater's options an LDA estimator takes as parameters
SCHEDULE = ("tau0", "kappa")
DEVICE = Option("device", str, None, "where the model lives (None: the data's device)",
                choices=("cpu", "gpu"), none_ok=True)


class LDAEstimator(TopicSteering, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                   BidlabEstimator):
    """Shared estimator machinery; see :class:`bidlab.models.LDA` for the parameters."""

    _integer_counts = False
    _cpu_batch = 512  # documents per minibatch when batch_size is None
    _gpu_batch = 16384
    _min_gpu_batches = 16  # a default GPU minibatch leaves at least this many per pass
    PARAMS: ClassVar[tuple[Option, ...]] = ()
    #: a loaded estimator's shapes (bidlab.learn.persist_check): k topics x the vocabulary
    STATE_SHAPES: ClassVar[dict[str, tuple[str, ...]]] = {
        "model_.lamT": ("n_features_in_", "n_components"),
        "model_.NT": ("n_features_in_", "n_components"),
        "vocab_": ("n_features_in_",)}

    @staticmethod
    def params_of(model_cls: type, updater_cls: type, extra: tuple[Option, ...] = (),
                  **defaults: Any) -> tuple[Option, ...]:
        """The estimator's parameter table: the model's option rows and the updater's
        schedule rows (``tau0``, ``kappa``), with the estimator's defaults; ``extra`` rows;
        and batch_size, n_passes, dtype, device, warm_start, n_jobs, verbose."""
        rows: dict[str, Option] = {}
        for spec in model_cls.option_table():
            if spec.name != "train_score":
                rows[spec.name] = spec
        for spec in updater_cls.option_table():
            if spec.name in SCHEDULE:
                rows[spec.name] = spec
        for spec in (*extra, BATCH_SIZE, N_PASSES, DTYPE, DEVICE, RANDOM_STATE, *COMMON):
            rows[spec.name] = spec
        return tuple(dataclasses.replace(s, default=defaults[s.name]) if s.name in defaults
                     else s for s in rows.values())

    # -- to implement ---------------------------------------------------------------------
    def _make_model(self) -> LDACore:
        raise NotImplementedError

    @classmethod
    def _upgrade_state(cls, state: dict[str, Any]) -> None:
        if "k" in state:  # written before the scikit-learn names
            state["n_components"] = state.pop("k")
            state["warm_docs"] = state.pop("warm_start", True)

    def _model_options(self, model_cls: type) -> dict[str, Any]:
        names = {s.name for s in model_cls.option_table()} - {"train_score"}
        values = {name: getattr(self, name) for name in names}
        if "random_state" in values:  # a generator gives the engine one int drawn from it
            values["random_state"] = seed_from(values["random_state"])
        return values

    # -- sklearn plumbing -----------------------------------------------------------------
    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        tags.requires_fit = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    def __sklearn_is_fitted__(self) -> bool:
        return "model_" in self.__dict__

    @property
    def _n_features_out(self) -> int:
        return int(self.model_.opts.n_components)

    # -- input ----------------------------------------------------------------------------
    def _validated(self, X: Any, reset: bool) -> tuple[Any, np.dtype, bool]:
        """(X checked by validate_data, the float dtype outputs take, X is on the GPU)."""
        name = type(self).__name__
        refuse_source_input(self, X)
        X = corpus_counts(self, X, reset)  # a Corpus: its counts (and its vocabulary)
        X = getattr(X, "csr", None) if hasattr(X, "csr") and hasattr(X, "nnz") else X
        if hasattr(X, "guid") and hasattr(X, "data") and not hasattr(X, "indptr"):
            X = X.data  # a bidlab.Mat
        if common.holds_text(X):
            raise TypeError(
                f"{name}: X holds text, not documents x vocabulary counts: for a fitted "
                "model use transform_texts(texts); to train, count the words first "
                "(bidlab.datasets.load_text_folder, or scikit-learn's CountVectorizer)")
        self._check_structure(X)
        if not reset and getattr(X, "ndim", 2) == 2 and hasattr(X, "shape"):
            want = self.n_features_in_
            if int(X.shape[1]) != want:
                raise ValueError(
                    f"X has {X.shape[1]} features, but {name} is expecting {want} features "
                    "as input: use the training vocabulary (e.g. vocabulary=train.vocab)")
        if backend.is_cupy_array(X) or (backend.is_sparse(X) and
                                        backend.is_cupy_array(getattr(X, "data", None))):
            if len(X.shape) != 2:
                raise ValueError(f"{name}: X must be 2-D (documents x vocabulary); got shape "
                                 f"{tuple(X.shape)}")
            if reset:
                self.n_features_in_ = int(X.shape[1])
            dt = X.dtype if X.dtype in (np.float32, np.float64) else np.dtype(np.float64)
            return X, np.dtype(dt), True
        if getattr(X, "ndim", None) == 1:
            raise ValueError(f"{name}: X must be 2-D (documents x vocabulary); got shape "
                             f"{tuple(X.shape)}. Reshape your data: X.reshape(1, -1) "
                             "for a single document")
        X = validate_data(self, X, reset=reset, accept_sparse="csr",
                          dtype=[np.float64, np.float32], ensure_all_finite=False)
        return X, np.dtype(X.dtype), False

    def _counts(self, X: Any, model: Any) -> Any:
        """Canonical CSR counts in the model's dtype, on the model's device."""
        name = type(self).__name__
        C = common.as_counts(X, owner=name, dtype=np.dtype(self.dtype),
                             integer=self._integer_counts)
        on_gpu = backend.is_cupy_array(C.data)
        want_gpu = (model.device == "gpu" if model is not None and model.initialised
                    else self.device == "gpu" or (self.device is None and on_gpu))
        if want_gpu and not on_gpu:
            return backend.to_device(C)
        if on_gpu and not want_gpu:
            raise TypeError(f"{name}: this model lives on the CPU but X is on the GPU; pass "
                            "bidlab.backend.to_host(X) or fit a model with device='gpu'")
        return C

    def _drop_empty(self, C: Any, ranks: int = 1) -> Any:
        mask = common.nonempty_rows(C)
        empty = int(mask.shape[0] - mask.sum())
        self.n_empty_docs_ += empty
        if empty == mask.shape[0] and ranks == 1:
            raise ValueError(f"{type(self).__name__}: every document of X is empty (no "
                             "counts): there is nothing to learn from")
        if empty == 0 or ranks > 1:  # ranks keep theirs: equal minibatches on every rank
            return C
        idx = np.flatnonzero(mask)
        if backend.is_cupy_array(C.data):
            idx = backend.cupy().asarray(idx)
        return C[idx]

    # -- training -------------------------------------------------------------------------
    def _new_model(self) -> None:
        self._validate_params()
        model = self._make_model()
        model.set_owner(self)  # edits through model_ change n_components here too
        self.model_ = model
        self.updater_ = model.default_updater(tau0=self.tau0, kappa=self.kappa)
        self.n_empty_docs_ = 0

    def _default_batch(self, C: Any) -> int:
        """The CPU's minibatch, or on a GPU a larger one (up to ``_gpu_batch``) that still
        leaves ``_min_gpu_batches`` per pass: large batches keep the GPU busy, but a small
        corpus in one batch would make a few coarse updates and a worse model than the CPU's."""
        if not backend.is_cupy_array(C.data):
            return self._cpu_batch
        per_pass = -(-int(C.shape[0]) // self._min_gpu_batches)
        return min(self._gpu_batch, max(self._cpu_batch, per_pass))

    def _batch_rows(self, C: Any, batch_size: int | None) -> int:
        if self.model_.initialised:
            B = self.model_.batch_rows
        else:
            B = batch_size or self.batch_size or self._default_batch(C)
        return max(1, min(int(B), int(C.shape[0])))

    def _learner_for(self, C: Any, plan_passes: int, warm: bool, batch_size: int | None = None,
                     **options: Any) -> LDALearner:
        if self.model_.initialised:  # parameters set since the model trained reach it
            options = {**continued_options(self), **options}
        self._trained_params = trained_params(self)
        C = self._drop_empty(C, getattr(options.get("comm"), "size", 1))
        self.model_.prepare(C, n_passes=plan_passes, warm=warm)
        return self._build_learner(self.model_, C, options.pop("updater", self.updater_),
                                   batch_size=self._batch_rows(C, batch_size),
                                   estimator=self, learner_class=LDALearner, **options)

    def _run(self, C: Any, plan_passes: int, n_passes: int, warm: bool,
             **options: Any) -> LDALearner:
        """A learner over C for ``n_passes`` passes, every document trained on."""
        return self._learner_for(C, plan_passes, warm, n_passes=n_passes, val_every=0,
                                 train_score=False, **options)

    def _done(self, lr: LDALearner) -> None:
        self._detach_run_options()
        del lr

    def _fit_learner(self, X: Any) -> LDALearner:
        n_passes = int(self.n_passes)
        with kept_on_error(self):  # refused X: the fitted model (if any) stays
            if self.warm_start and self.__sklearn_is_fitted__() and self.model_.initialised:
                self._validate_params()
                Xv, _, _ = self._validated(X, reset=False)
                return self._run(self._counts(Xv, self.model_), n_passes, n_passes, warm=True)
            self._new_model()
            Xv, _, _ = self._validated(X, reset=True)
            return self._run(self._counts(Xv, None), n_passes, n_passes, warm=True)

    def fit(self, X: Any, y: Any = None) -> LDAEstimator:
        """Train ``n_passes`` passes over the documents x vocabulary counts X: from scratch,
        or with ``warm_start=True`` on a fitted estimator, continuing its model (its
        ``n_passes_done_`` adds up)."""
        del y
        with self._threads():
            lr = self._fit_learner(X)
            lr.fit(progress=self._progress())
            self._done(lr)
        return self

    def fit_passes(self, X: Any, every: int = 0) -> Iterator[int]:
        """``fit``, a piece at a time: yields the number of passes done after each pass and,
        with ``every`` > 0, also after every ``every``-th minibatch of a pass.

        Lets a caller time, score or stop training in between (exhausting it equals
        ``fit(X)``); temperatures set in between take effect at once.
        """
        lr = self._fit_learner(X)
        bpp = lr.source.batches_per_pass or 1
        for p in range(int(self.n_passes)):
            if every > 0:
                for i in range(every, bpp, every):
                    lr.set(n_passes=p + 1, max_steps=p * bpp + i)
                    lr.fit(progress=None)
                    yield p
            lr.set(n_passes=p + 1, max_steps=None)
            lr.fit(progress=None)
            yield p + 1
        self._done(lr)

    def partial_fit(self, X: Any, y: Any = None) -> LDAEstimator:
        """One online pass over X (whatever ``method``, as in scikit-learn), continuing
        from the current state (streams / shards). Set ``total_docs`` to the size of the
        whole stream: the online update scales each minibatch by total_docs / batch
        documents (default: the documents of the first call). With shards whose sizes are
        multiples of ``batch_size``, the first holding the documents the initialisation
        looks at (8 per topic, 256 to 1024), this equals an online ``fit`` with
        ``n_passes=1`` on their concatenation.
        """
        del y
        with kept_on_error(self):  # refused X: nothing of this call stays
            first = not self.__sklearn_is_fitted__()
            if first:
                self._new_model()
            Xv, _, _ = self._validated(X, reset=first)
            lr = self._run(self._counts(Xv, self.model_), int(self.n_passes), 1, warm=False,
                           updater=online_updater(self))
        with self._threads():
            lr.fit(progress=self._progress())
        self._done(lr)
        return self

    def learner(self, X: Any, y: Any = None, **options: Any) -> LDALearner:
        """A live :class:`bidlab.learn.Learner` training this estimator's model on X.

        ``start()`` runs it in a background thread (``pause`` / ``resume`` / ``stop``,
        live options such as ``alpha`` or ``e_iters``, ``observe`` for snapshots,
        checkpoints); ``fit()`` runs it in the calling thread with a progress bar. Options
        are the learner's (``n_passes``, ``val_every``, ``checkpoint``, ``batch_size``,
        ...), the model's and the updater's. A fitted estimator continues its model; the
        estimator follows the learner (``components_`` etc.). ``y`` is ignored.
        """
        del y
        n_passes = int(options.pop("n_passes", self.n_passes))
        batch_size = options.pop("batch_size", None)
        options.setdefault("train_score", True)
        with kept_on_error(self):  # refused X or options: nothing of this call stays
            first = not self.__sklearn_is_fitted__()
            if first:
                self._new_model()
            Xv, _, _ = self._validated(X, reset=first)
            C = self._counts(Xv, self.model_)
            # live: the model exists before start(), so temperatures, views and options can
            # be set on it at once, without racing the training thread's first minibatch
            return self._learner_for(C, n_passes, True, batch_size, n_passes=n_passes,
                                     live=True, **options)

    # -- topic steering (bidlab.models.lda.steering) -------------------------------------
    def _steer_model(self) -> Any:
        model = self._fitted()
        model.set_owner(self)
        return model

    def _steer_vocab(self) -> Sequence[str] | None:
        vocab = getattr(self, "vocab_", None)
        if vocab is None:
            names = getattr(self, "feature_names_in_", None)
            vocab = None if names is None else list(names)
        return vocab

    # -- results --------------------------------------------------------------------------
    def _fitted(self) -> LDACore:
        check_is_fitted(self)
        if not self.model_.initialised:
            raise NotFittedError(f"this {type(self).__name__} has not trained yet: call "
                                 "fit(X) or partial_fit(X), or run its learner")
        return self.model_

    def transform(self, X: Any) -> Any:
        """Documents' topic proportions (documents x k, rows sum to 1) in X's float dtype,
        on X's backend. The topics are held fixed and each document's proportions
        inferred by the variational E-step; an empty document gets the prior mean."""
        model = self._fitted()
        Xv, out_dtype, on_gpu = self._validated(X, reset=False)
        with self._threads():
            theta = model.transform(self._counts(Xv, model))
        if not on_gpu:
            theta = np.asarray(backend.to_host(theta))
        return theta.astype(out_dtype, copy=False)

    def score(self, X: Any, y: Any = None, random_state: int = 0) -> float:
        """Held-out per-word log-likelihood of X by document completion (higher is better).

        Document completion: each document's tokens are split in two halves
        (``random_state`` seeds the split); its topic proportions are inferred from the
        first half with the topics held fixed, and the score is the mean log-probability
        per token of the second half. This is not scikit-learn's
        ``LatentDirichletAllocation.score`` (the approximate variational bound of all of
        X, summed over documents: divide it by the total count ``X.sum()`` for a per-word
        figure) nor gensim's ``LdaModel.log_perplexity`` (that bound per word, all
        tokens); those bounds include the tokens the proportions were inferred from, so
        they are not directly comparable with this held-out figure.
        """
        del y
        model = self._fitted()
        Xv, _, _ = self._validated(X, reset=False)
        C = common.as_counts(Xv, owner=type(self).__name__, dtype=np.float64)
        with self._threads():
            return model.heldout_score(C, random_state=random_state)

    def perplexity(self, X: Any, y: Any = None) -> float:
        """Document-completion perplexity: ``exp(-score(X))``, the held-out per-word
        perplexity of each document's second half of tokens given its first (lower is
        better; see :meth:`score`).

        Conversions: scikit-learn's ``LatentDirichletAllocation.perplexity(X)`` is
        ``exp(-bound / X.sum())`` with ``bound`` its variational bound of all of X, and
        gensim reports ``2 ** -log_perplexity`` with ``log_perplexity`` that bound per word
        (natural log): ``exp(-log_perplexity)`` gives scikit-learn's figure. Both score
        every token, including those the proportions were fitted on, so they run lower
        than this held-out perplexity on the same model and data.
        """
        return float(np.exp(-self.score(X, y)))

    @property
    def components_(self) -> np.ndarray:
        """Topics: k x vocabulary host numpy float64, each row sums to 1."""
        return self._fitted().components()

    @property
    def n_batches_(self) -> int:
        """Training minibatches so far."""
        return self._fitted().n_batches

    @property
    def n_passes_done_(self) -> int:
        """Passes finished so far."""
        return self._fitted().n_passes_done

    @property
    def n_docs_seen_(self) -> int:
        """Documents trained on so far (counting each pass)."""
        return self._fitted().n_docs_seen

    def top_words(self, n: int = 10, vocab: Sequence[str] | None = None,
                  with_weights: bool = False) -> list[list[str]] | list[list[tuple[str, float]]]:
        """Each topic's ``n`` most probable words, best first; with ``with_weights``,
        (word, probability in the topic) pairs.

        ``vocab`` names the columns (default: the training Corpus's vocabulary, else the
        feature names seen in fit, else the column numbers as strings).
        """
        comp = self.components_
        if vocab is None:
            vocab = self._steer_vocab() or [str(i) for i in range(comp.shape[1])]
        if len(vocab) != comp.shape[1]:
            raise ValueError(f"vocab has {len(vocab)} words while the model was trained with "
                             f"{comp.shape[1]}")
        n = max(1, min(int(n), comp.shape[1]))
        best = np.argsort(-comp, axis=1, kind="stable")[:, :n]
        if with_weights:
            return [[(vocab[j], float(comp[t, j])) for j in row] for t, row in enumerate(best)]
        return [[vocab[j] for j in row] for row in best]

    def _facts(self) -> list[tuple[str, Any]]:
        model = self.model_
        if not model.initialised:
            return [("trained", "not yet")]
        facts: list[tuple[str, Any]] = [
            ("components_", f"{model.opts.n_components} topics x {model.vocab_size} words"),
            ("n_passes_done_", self.n_passes_done_), ("n_batches_", self.n_batches_),
            ("n_docs_seen_", self.n_docs_seen_),
            ("n_empty_docs_", getattr(self, "n_empty_docs_", 0))]
        return facts
