"""What a saved NMF, SFA, PageRank or BayesNet estimator may hold, checked at load.

Each family's estimator class takes one of these classes as a base: the declarations
(:mod:`bidlab.learn.persist_check`: ``STATE_SHAPES``, ``FINITE_STATE``,
``NONNEGATIVE_STATE``, ``COUNT_STATE``, ``FITTED_STATE``) and the ``check_loaded`` rules
that relate its parts (the model's options to its matrices and its updater, counters to
the histories they count). A file that breaks one -- damaged, or edited by hand -- is
refused when it is loaded, naming the file and the field, rather than loading and then
failing inside a kernel or answering with nonsense. The checks run once, at load.
"""

from __future__ import annotations

from typing import Any, ClassVar, NoReturn

import numpy as np

__all__ = ["NMFSaved", "SFASaved", "PageRankSaved", "BayesNetSaved"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_K, _D = "model_.opts.k", "n_features_in_"


def _refuse(field: str, why: str) -> NoReturn:
    exc = ValueError(f"{why}; the file is damaged or was edited: fit the model again")
    exc.field = field  # type: ignore[attr-defined]
    raise exc


def _value(obj: Any, name: str, default: Any = None) -> Any:
    return vars(obj).get(name, default) if hasattr(obj, "__dict__") else default


def _check_dtype(model: Any) -> None:
    """A float model dtype, that of its model matrices."""
    dtype = _value(model, "dtype")
    try:
        ok = dtype is None or np.dtype(dtype) in _FLOATS
    except TypeError:
        ok = False
    if not ok:
        _refuse("model_.dtype", f"{getattr(dtype, 'name', dtype)!r:.40}, where a model "
                "computes in float32 or float64")
    mats = _value(model, "modelmats") or []
    if dtype is not None and mats and np.dtype(mats[0].dtype) != np.dtype(dtype):
        _refuse("model_.dtype", f"{np.dtype(dtype).name}, but the model matrices are "
                f"{np.dtype(mats[0].dtype).name}")


def _factor_model(state: dict[str, Any], history: str) -> Any:
    """A saved factor model's ``model_`` (None: not fitted), its dtype and its per-pass
    ``history`` checked (:func:`_check_dtype`, :func:`_check_history`)."""
    model = state.get("model_")
    if model is not None:
        _check_dtype(model)
        _check_history(model, history)
    return model


def _check_history(model: Any, name: str) -> None:
    """A per-pass history no longer than the passes counted."""
    done, seen = _value(model, "n_passes_done"), _value(model, name)
    if isinstance(done, int) and isinstance(seen, list) and len(seen) > done:
        _refuse("model_.n_passes_done", f"{done}, but the model's {name} record "
                f"{len(seen)} passes")


class NMFSaved:
    """A saved NMF: k x d components (and statistics), nonnegative row factors, passes
    counted, and the loss, solver and updater the model was made with."""

    STATE_SHAPES: ClassVar[dict[str, tuple[str | int, ...]]] = {
        "model_.modelmats.0": (_K, _D), "model_._Ht": (_D, _K),
        "model_.updatemats.0.num": (_K, _D), "model_.updatemats.0.den": (_K, _D),
        "model_.updatemats.0.gram": (_K, _K), "model_.W.values": ("rows", _K),
        "updater_.num.0": (_K, _D), "updater_._row.0": (1, _D)}
    NONNEGATIVE_STATE: ClassVar[tuple[str, ...]] = ("model_.modelmats", "model_.W.values",
                                                    "model_.w_start")
    COUNT_STATE: ClassVar[tuple[str, ...]] = ("model_.n_passes_done",)
    FITTED_STATE: ClassVar[tuple[str, ...]] = ("updater_",)

    @classmethod
    def check_loaded(cls, state: dict[str, Any]) -> None:
        model = _factor_model(state, "errors")
        if model is None:
            return
        opts = model.opts
        if opts.loss != state.get("loss", opts.loss):
            _refuse("model_.opts.loss", f"{opts.loss!r}, but the estimator's loss is "
                    f"{state['loss']!r}")
        if opts.solver == "cd" and (opts.loss, opts.method) != ("frobenius", "batch"):
            _refuse("model_.opts.solver", f"'cd' with loss={opts.loss!r} and method="
                    f"{opts.method!r}, where coordinate descent takes the Frobenius loss "
                    "and the batch method only")
        if state.get("solver", "auto") not in ("auto", opts.solver):
            _refuse("model_.opts.solver", f"{opts.solver!r}, but the estimator's solver is "
                    f"{state['solver']!r}")
        updater, want = state["updater_"], type(model.default_updater())
        if type(updater) is not want:  # (BatchCD is a BatchMult: the exact class)
            _refuse("updater_", f"a {type(updater).__name__}, but a model with solver="
                    f"{opts.solver!r} and method={opts.method!r} trains with a "
                    f"{want.__name__}")
        den = (_value(updater, "den") or [None])[0]
        if den is not None:
            k, d = model.modelmats[0].shape
            shape = (k, k) if opts.solver == "cd" else (k, d)
            if tuple(den.shape) != shape:
                _refuse("updater_.den.0", f"has shape {tuple(den.shape)}, where this "
                        f"model's is {shape}")


class SFASaved:
    """A saved SFA: f = k (+1 for explicit ratings: the bias) finite numbers per item and
    per user, the ratings it filters by (users x items), passes counted."""

    STATE_SHAPES: ClassVar[dict[str, tuple[str | int, ...]]] = {
        "model_.modelmats.0": ("items", "f"), "model_.updatemats.0": ("items", "f"),
        "model_.W.values": ("users", "f"), "train_": ("n_users_", "n_items_")}
    FINITE_STATE: ClassVar[tuple[str, ...]] = ("model_.modelmats", "model_.W.values",
                                               "model_.mu")
    COUNT_STATE: ClassVar[tuple[str, ...]] = ("model_.n_passes_done", "n_users_",
                                              "n_items_")
    FITTED_STATE: ClassVar[tuple[str, ...]] = ("updater_", "train_", "model_.W",
                                               "n_users_", "n_items_")

    @classmethod
    def check_loaded(cls, state: dict[str, Any]) -> None:
        model = _factor_model(state, "rmse")
        if model is None:
            return
        opts, mats = model.opts, model.modelmats
        if mats:
            f = int(mats[0].shape[1])
            want = opts.k + (opts.feedback == "explicit")
            if f != want:
                _refuse("model_.opts.k", f"{opts.k} with feedback={opts.feedback!r} "
                        f"({want} numbers per item), but the factors hold {f}")


class PageRankSaved:
    """A saved PageRank: teleport and dangling weights (>= 0) of every vertex, the
    iterations run and their changes."""

    STATE_SHAPES: ClassVar[dict[str, tuple[str | int, ...]]] = {
        "ids_": (_D,), "model_.modelmats.0": (1, _D), "model_.updatemats.0": (1, "model_.n"),
        "model_.personalization": ("model_.n",), "model_.dangling": ("model_.n",),
        "model_.residuals": ("iterations",), "model_._prev": (1, "model_.n"),
        "model_._p": (1, "model_.n"), "model_._u": (1, "model_.n")}
    NONNEGATIVE_STATE: ClassVar[tuple[str, ...]] = (
        "model_.modelmats", "model_.personalization", "model_.dangling", "model_._prev",
        "model_._p", "model_._u")
    COUNT_STATE: ClassVar[tuple[str, ...]] = ("model_.n_iter",)
    FITTED_STATE: ClassVar[tuple[str, ...]] = ("model_.residuals", "model_.personalization",
                                               "model_.dangling")

    @classmethod
    def check_loaded(cls, state: dict[str, Any]) -> None:
        model = state.get("model_")
        if model is None:
            return
        n_iter, res = model.n_iter, np.asarray(model.residuals)
        if n_iter > res.shape[0]:
            _refuse("model_.n_iter", f"{n_iter}, but the model records the changes of "
                    f"{res.shape[0]} iterations")
        run = res[:n_iter]
        if run.dtype.kind != "f" or not (np.isfinite(run).all() and (run >= 0).all()):
            _refuse("model_.residuals", "the changes of the iterations run hold NaN, "
                    "infinity or negative values, where each is an L1 norm")


class BayesNetSaved:
    """A saved BayesNet: one marginal per variable (a probability per state), and a model
    whose arrays fit its network's tables (temperatures carry over to the next run)."""

    NONNEGATIVE_STATE: ClassVar[tuple[str, ...]] = ("marginals_", "model_._counts")
    FINITE_STATE: ClassVar[tuple[str, ...]] = ("model_.temp",)
    STATE_SHAPES: ClassVar[dict[str, tuple[str | int, ...]]] = {
        "model_.modelmats.0": (1, "tables"), "model_.updatemats.0": (1, "tables"),
        "model_._counts": ("tables",), "model_.temp": ("tables",),
        "model_._seen": ("model_.info.n_samples",)}
    COUNT_STATE: ClassVar[tuple[str, ...]] = ("model_._where.pass", "model_._where.batch")

    @classmethod
    def check_loaded(cls, state: dict[str, Any]) -> None:
        model = state.get("model_")
        net = _value(model, "network")
        if net is not None and hasattr(net, "flat_tables"):
            _, off = net.flat_tables()
            for name in ("_off", "_temp_off"):
                got = _value(model, name)
                if got is not None and not (isinstance(got, np.ndarray) and got.shape ==
                                            off.shape and np.array_equal(got, off)):
                    _refuse(f"model_.{name}", "offsets that are not those of the model's "
                            "network tables")
            temp = _value(model, "temp")
            if isinstance(temp, np.ndarray) and temp.size:
                if not (temp > 0).all():
                    _refuse("model_.temp", "temperatures <= 0, where each is > 0")
                if bool(_value(model, "temp_active")) != bool((temp != 1.0).any()):
                    _refuse("model_.temp_active", "contradicts the temperatures it flags")
        marg = state.get("marginals_")
        if marg is None:
            return
        if model is not None and _value(model, "learn"):
            net = _value(model, "network")
        else:
            net = state.get("_network") or state.get("network")
        states = getattr(net, "states", None)
        if not isinstance(marg, list) or states is None:
            return
        if len(marg) != len(states):
            _refuse("marginals_", f"{len(marg)} marginals, but the network has "
                    f"{len(states)} variables")
        for v, (m, names) in enumerate(zip(marg, states, strict=True)):
            if np.shape(m) != (len(names),):
                _refuse(f"marginals_.{v}", f"has shape {np.shape(m)}, but variable "
                        f"{v} has {len(names)} states")
