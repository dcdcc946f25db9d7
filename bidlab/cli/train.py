"""``bidlab train <model> --data PATH [--NAME VALUE ...] [--checkpoint PATH] [--save PATH]``.

Trains any registered model (``bidlab.learn.MODELS``: importing :mod:`bidlab.models`
registers ``lda``, ``ldagibbs``, ``glm``, ``kmeans``; ``lsq`` is a plain
:class:`~bidlab.learn.Model`) with the learner's progress bar and one summary line per
pass. ``bidlab train --help`` lists the models; ``bidlab train <model> --help`` lists the
model's parameters (an estimator's ``PARAMS`` table, or a plain model's, updater's and
mixins' ``OPTIONS``) and the learner's options, each with its default and allowed values.
Every such option is given as ``--name value`` (dashes or underscores, ``--name=value``,
vectors as ``0.1,0.2``, a bare ``--flag`` for True) and parsed by its
:class:`~bidlab.learn.Option` row, so a bad value reads the same as in Python.

``--data`` is sniffed by content (:mod:`bidlab.datasets.sniff`): svmlight / LIBSVM files
with or without an extension, UCI docword files (plain or gzip) with their vocabulary,
``.npz`` files (numpy or ``scipy.sparse.save_npz``), bidlab shard folders, and folders or
tar archives of text files, whose words ``--min_df`` and ``--max_df`` bound as in ``bidlab
demo`` (refused for other data).

With ``--checkpoint PATH`` the learner writes a checkpoint (atomically) at each pass end,
every ``--checkpoint_every`` seconds and when the run ends; an existing one is resumed
(options on the command line override the saved ones; ``--restart`` ignores it).
``--save PATH`` writes the fitted estimator at the end (``est.save``; read it back with
``bidlab.models.load``), with the data's vocabulary when it has one, so a loaded topic
model's ``top_words()`` shows words, and an edge list's vertex ids (PageRank's ``ids_``:
``scores_[i]`` is vertex ``ids_[i]``'s). An estimator trains on all but ``--holdout`` of the
rows (10%, at most 10,000, chosen with a fixed seed) and is scored on those at the end
(one with ``fit_learner``, GLM and KMeans, trains and ends as its ``fit`` does: scaled
features, final labels);
a topic model's score line adds its document-completion perplexity (``LDA.perplexity``
says how it compares with scikit-learn's and gensim's), and its topics follow, one line
each; PageRank's convergence and top 10 vertices (by their ids in the file) follow likewise.
``--seed`` is a deprecated spelling of ``--random_state``, ``--passes`` of
``--n_passes``. Both paths are checked before the data is read: each must be a new
path or a regular file in a folder where a file can be created, not the other's file nor
one it reads (--data, --network), else the command exits 2 with one line saying why.

This module runs the command (build the learner, train, report);
:mod:`bidlab.cli.train_options` declares its arguments, reads the options and writes
the help; :mod:`bidlab.cli.train_data` reads the data and holds rows out;
:mod:`bidlab.cli.train_report` writes the final score and topics.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab.cli import train_report as report
from bidlab.cli.train_coherence import train_pass_by_pass
from bidlab.cli.train_data import (
    check_inputs,
    describe_data,
    hold_out,
    is_ratings,
    is_scored,
    load_data,
    ratings_mask,
    read_shards,
    sniff_data,
)
from bidlab.cli.train_options import (
    _is_estimator,
    _learner_table,
    _needs_targets,
    _overview,
    _owned,
    _parse_extra,
    _plain_model_table,
    _registry,
    _updater_name,
    add_arguments,
    help_text,
)
from bidlab.cli.train_outputs import SaveTargetError, check_train_outputs
from bidlab.cli.train_resume import reshaped_text, resumed_text

__all__ = ["ACCEPTS_EXTRA", "add_arguments", "run"]

ACCEPTS_EXTRA = True


class _BadInput(Exception):
    """A command-line or data problem: printed as one line, exit code 2."""


def _input_errors() -> tuple[type[BaseException], ...]:
    """The errors ``run`` prints as one line of bad input (exit code 2)."""
    from bidlab.learn.options import OptionError
    from bidlab.learn.shards import ShardError
    return (_BadInput, OptionError, ShardError, ValueError, TypeError, FileNotFoundError)


# ============================================================================= running
def run(args: argparse.Namespace, estimator_job: type | None = None) -> int:
    """Train; exit 0 when done, 1 on a training error, 2 on bad input, 130 on Ctrl-C.

    ``--ranks N`` (N > 1) runs the same command on N MPI ranks
    (:mod:`bidlab.distributed.train`); ``estimator_job`` replaces the job class of an
    estimator model (the distributed command's, which shards the data)."""
    models, problem = _registry()
    err = sys.stderr
    if args.model is None:
        if args.help:
            print(_overview(models, problem))
            return 0
        print(f"bidlab train: name a model: {', '.join(sorted(models))} (bidlab train "
              "--help)", file=err)
        return 2
    factory = models.get(args.model)
    if factory is None:
        note = f" (bidlab.models failed to import: {problem})" if problem else ""
        print(f"bidlab train: unknown model {args.model!r}; known models: "
              f"{', '.join(sorted(models)) or 'none'}{note}", file=err)
        return 2
    from bidlab.cli.aliases import rename_extra

    extra = rename_extra(list(getattr(args, "extra", [])), "bidlab train")
    if (getattr(args, "ranks", None) or 1) > 1:
        from bidlab.distributed.launch import launch, not_on_ranks, rebuild_argv
        from bidlab.distributed.rank_options import without_rank_options

        why = not_on_ranks(args)
        if why:
            print(f"bidlab train: {why}", file=err)
            return 2
        if not args.help:  # bad options or --data: said once here, not once per rank
            try:
                _EstimatorJob(args, factory, without_rank_options(extra)).preflight()
            except _input_errors() as exc:
                print(f"bidlab train: {exc}", file=err)
                return 2
        return launch(args.ranks, rebuild_argv(args))
    job = (estimator_job or _EstimatorJob) if _is_estimator(factory) else _ModelJob
    try:
        return job(args, factory, extra).run()
    except _input_errors() as exc:
        print(f"bidlab train: {exc}", file=err)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted before training started", file=err)
        return 130
    except Exception as exc:  # e.g. building the learner failed: say what, not a traceback
        if isinstance(exc, BrokenPipeError):  # stdout's reader went: bidlab.cli.main ends
            raise
        print(f"bidlab train: {args.model} could not start: {type(exc).__name__}: {exc}",
              file=err)
        return 1


class _Job:
    """One ``bidlab train`` run: parse, load, build the learner, train, report."""

    def __init__(self, args: argparse.Namespace, factory: Any, extra: list[str]) -> None:
        self.args = args
        self.name = args.model
        self.factory = factory
        self.extra = extra

    def run(self) -> int:
        raise NotImplementedError

    def check_outputs(self, inputs: dict[str, Any] | None = None) -> None:
        """Refuse ``--checkpoint`` / ``--save`` paths that cannot be written, that name one
        file, or a file read (``--data``, ``inputs``), before any data is read or training
        starts (one line, exit status 2): :mod:`bidlab.cli.train_outputs`."""
        try:
            check_train_outputs(self.args, inputs)
        except SaveTargetError as exc:
            raise _BadInput(str(exc)) from None

    def need_data(self) -> Any:
        if not self.args.data:
            raise _BadInput("--data is required: a file or folder of data (bidlab train "
                            f"{self.name} --help lists the formats)")
        data = load_data(self.args.data, self.name, self.args.min_df, self.args.max_df)
        print(f"data {describe_data(data, self.name)}", file=sys.stderr)
        return data

    def learner_options(self, est: Any, lopts: dict[str, Any]) -> dict[str, Any]:
        """The options the estimator's learner is made with (a subclass adds its own)."""
        return lopts

    def resume(self, learner: Any, again: dict[str, Any], params: dict[str, Any] | None = None
               ) -> bool:
        """Load ``--checkpoint`` when it exists (unless ``--restart``); re-apply ``again``.

        ``params``: the estimator parameters given on the command line. The checkpoint's
        options replace the model's, so when they reshape it (an estimator's
        ``--n_components`` is its model's ``k``) the run is refused rather than silently
        resumed with the checkpoint's shapes."""
        ck = self.args.checkpoint
        if not ck or not os.path.exists(ck) or self.args.restart:
            return False
        from bidlab.learn.checkpoint import CheckpointError
        from bidlab.learn.learner_state import SavedObjectError
        from bidlab.learn.options import OptionError

        # the learner's own options as this command made them (n_passes from --max_iter,
        # ...) win over the saved run's; the run that wrote it may have been cut short
        opts = learner.opts
        built = opts.as_dict()  # a model option: what this command made of it (a seed)
        mine = {k: v for k, v in built.items()
                if opts.specs[k].owner == "Learner" and opts.specs[k].type != "path"}
        made = ([tuple(m.shape) for m in learner.model.modelmats]
                if getattr(learner.model, "initialised", False) else None)
        again_hint = "Resume with the options it was made with, or add --restart to train anew"
        try:
            learner.load(ck)
        except CheckpointError as exc:  # a saved model there: never offer to replace it
            hint = ("Give --checkpoint a path of its own" if isinstance(exc, SavedObjectError)
                    else again_hint)
            raise _BadInput(f"cannot resume: {exc}. {hint}") from None
        except ValueError as exc:  # the model rebuilt with the checkpoint's options failed
            raise _BadInput(f"cannot resume {ck} with these options: {exc}. "
                            f"{again_hint}") from None
        loaded = [tuple(m.shape) for m in learner.model.modelmats]
        if params and made is not None and loaded != made:
            raise _BadInput(f"{reshaped_text(ck, opts, built, params, loaded, made)} "
                            f"{again_hint}")

        again = {**mine, "max_steps": None, **again}
        try:
            learner.set(**{k: v if opts.specs[k].owner == "Learner" else built.get(k, v)
                           for k, v in again.items() if k in opts.specs})
        except OptionError as exc:
            raise _BadInput(f"cannot resume {ck} with these options: {exc}. Resume with the "
                            "checkpoint's value, or add --restart to train anew") from None
        print(resumed_text(learner, ck), file=sys.stderr)
        return True

    def train(self, learner: Any, source_close: Any = None) -> int:
        args, err = self.args, sys.stderr
        try:
            learner.fit(progress=None if args.progress == "none" else args.progress, file=err)
        except KeyboardInterrupt:
            print("\ninterrupted: the learner stopped cleanly"
                  + (f"; checkpoint in {args.checkpoint}" if args.checkpoint else ""), file=err)
            return 130
        except Exception as exc:  # a divergence names its fix: no traceback for it
            from bidlab.learn.divergence import DivergedError
            where = "" if isinstance(exc, DivergedError) else learner.traceback or ""
            print(f"bidlab train: training failed: {type(exc).__name__}: {exc}"
                  + (f"\n{where}" if where else ""), file=err)
            return 1
        finally:
            if source_close is not None:
                source_close()
        return 0

    def result(self, learner: Any, extra: str = "") -> str:
        return report.result_line(learner, self.args.checkpoint, extra)


class _ModelJob(_Job):
    """A plain :class:`~bidlab.learn.Model` (``lsq``): streamed data, any updater."""

    def run(self) -> int:
        from bidlab.learn.datasource import MemorySource
        from bidlab.learn.learner import Learner
        from bidlab.learn.mixins import MIXINS
        from bidlab.learn.options import Options
        from bidlab.learn.shards import ShardSource
        from bidlab.learn.updaters import UPDATERS

        cli = _plain_model_table()
        upd_name = _updater_name(self.extra)
        if upd_name is not None:
            upd_name = cli["updater"].parse(upd_name)
        model = self.factory()
        updater = UPDATERS[upd_name]() if upd_name else model.default_updater()
        named = {t[2:].partition("=")[0].replace("-", "_") for t in self.extra
                 if t.startswith("--")}
        mixins = [cls() for key, cls in MIXINS.items() if key in named]
        merged = Options()
        for comp in (Learner, model, updater, *mixins):
            table = comp.option_table() if isinstance(comp, type) else comp.opts.specs.values()
            for spec in table:
                if spec.name != "checkpoint":
                    merged.declare(spec)
        if self.args.help:
            regs = Options()
            for cls in MIXINS.values():
                for spec in cls.option_table():
                    regs.declare(spec)
            print(help_text(self.name, self.factory, [
                ("data options:", cli),
                (f"options of {type(model).__name__}, {type(updater).__name__} (--updater "
                 "picks another) and the learner:", dict(merged.specs)),
                ("regularisers (naming one adds it):", dict(regs.specs)),
            ]))
            return 0
        given, values = _parse_extra(self.extra, [cli, dict(merged.specs)], self.name)
        if self.args.save:
            raise _BadInput(f"--save needs an estimator model (e.g. glm); {self.name} is a "
                            "plain learner Model: keep its state with --checkpoint PATH")
        if self.args.holdout:  # nothing scores the plain model at the end
            raise _BadInput(f"--holdout needs an estimator model (e.g. glm); {self.name} is "
                            "a plain learner Model: its val_every minibatches are held out")
        self.check_outputs()
        data = self.need_data()
        o = {k: given.get(k, cli[k].default) for k in ("batch_size", "shuffle", "device")}
        if getattr(data, "format", None) == "shards":
            source = ShardSource(data.path, batch_size=o["batch_size"],
                                 shuffle_shards=o["shuffle"], shuffle_rows=o["shuffle"],
                                 device=o["device"])
        else:
            source = MemorySource(*data.matrices(), batch_size=o["batch_size"],
                                  shuffle=o["shuffle"], device=o["device"])
        try:
            learner = Learner(model, source, updater, mixins, name=self.name)
            self.resume(learner, values)
            learner.set(**values)
            if self.args.checkpoint:
                learner.set(checkpoint=self.args.checkpoint)
        except BaseException:
            source.close()
            raise
        code = self.train(learner, source.close)
        if code == 0:
            print(self.result(learner))
        return code


class _EstimatorJob(_Job):
    """A scikit-learn estimator with ``PARAMS`` and ``learner(X, y=None, **options)``."""

    def tables(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the estimator's parameter table, the learner's options but those names)."""
        cls = self.factory
        params_table = {s.name: _owned(s, cls.__name__) for s in getattr(cls, "PARAMS", ())}
        return params_table, _learner_table(exclude=set(params_table))

    def checked_options(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(estimator parameters, learner options) from the command line, with the checks
        that need no data: fit-only parameters, ``--save`` support, the output paths."""
        cls = self.factory
        params, lopts = _parse_extra(self.extra, list(self.tables()), self.name)
        fit_only = sorted(set(params) & set(getattr(cls, "FIT_ONLY", ())))
        if fit_only:
            flags = ", ".join(f"--{n}" for n in fit_only)
            raise _BadInput(f"{flags}: only {cls.__name__}.fit uses it, and bidlab train "
                            "trains the live learner (its passes, then a score on the "
                            "--holdout rows): leave it out, or call fit from Python")
        check_inputs(self.name, cls, params, self.args.holdout)
        if self.args.save and not callable(getattr(cls, "save", None)):
            raise _BadInput(f"--save: {cls.__name__} has no save(path) method, so it cannot "
                            "be saved; keep its state with --checkpoint PATH")
        self.check_outputs({"--network": params.get("network")})
        return params, lopts

    def preflight(self) -> None:
        """Before ``--ranks N`` starts its processes, the checks every rank would make
        alike on the options and ``--data`` (its format, not its rows), so a mistake is
        said once rather than by every rank, followed by MPI's abort lines."""
        params, _ = self.checked_options()
        if not self.args.data:
            self.need_data()  # its message
        sniff_data(self.args.data, self.name, self.args.min_df, self.args.max_df)
        self.factory(**params)

    def run(self) -> int:
        cls = self.factory
        params_table, learner_table = self.tables()
        if self.args.help:
            shown = {k: v for k, v in learner_table.items() if k not in params_table}
            fit_only = set(getattr(cls, "FIT_ONLY", ()))
            params_table = {k: v for k, v in params_table.items() if k not in fit_only}
            print(help_text(self.name, cls, [
                (f"parameters of {cls.__name__}:", params_table),
                ("learner options (a parameter above of the same name goes to the learner "
                 "too):", shown)]))
            return 0
        params, lopts = self.checked_options()
        data = self.need_data()
        if getattr(data, "format", None) == "shards":
            data = read_shards(data.path)
        est = cls(**params)
        supervised = _needs_targets(est)
        if supervised and data.y is None:
            raise _BadInput(f"{self.name} needs targets y, and {self.args.data} holds none: "
                            "give an svmlight file, an .npz with X and y, or a folder of text "
                            "files in one sub-folder per label")
        if self.args.checkpoint:
            lopts["checkpoint"] = self.args.checkpoint
        holdout = self.args.holdout
        no_score = ("no held-out score (--holdout 0)" if holdout == 0 else
                    "no held-out score (the rows are users or vertices: none held out)")
        rows_are_samples = est.ROWS_ARE_SAMPLES and not is_ratings(data)
        if holdout is None:  # a graph's vertices, a ratings file's users: none held out
            holdout = 0.1 if rows_are_samples and is_scored(est) else 0.0
        elif holdout > 0 and not rows_are_samples:
            raise _BadInput(f"--holdout {holdout:g}: {self.name}'s rows are not samples "
                            "(a graph's vertices, or users who each need their factors), so "
                            "none can be held out: leave --holdout out")
        try:
            X, y, X_out, y_out = hold_out(data.X, data.y, holdout)
        except ValueError as exc:
            if self.args.holdout is not None:
                raise _BadInput(f"--holdout {exc}: give a fraction that holds out at least "
                                "one row and leaves one, or --holdout 0 to train on every "
                                "row") from None
            X, y, X_out, y_out = data.X, data.y, None, None  # the default, on tiny data
            no_score = f"no held-out score (the default --holdout {exc})"
        if ratings_mask(data, est):  # a ratings file's stored entries are the observed ones
            lopts["mask"] = sp.csr_matrix((np.ones(X.nnz, bool), X.indices, X.indptr),
                                          shape=X.shape)
        lopts = self.learner_options(est, lopts)
        if getattr(lopts.get("comm"), "size", 1) > 1:  # none held out on ranks, asked or not
            no_score = f"no held-out score (none is held out on {lopts['comm'].size} ranks)"
        finish = None
        if callable(getattr(est, "fit_learner", None)):  # trains as fit does (GLM: scaled)
            learner, finish = est.fit_learner(X, y, **lopts)
        else:
            learner = est.learner(X, y, **lopts) if supervised else est.learner(X, **lopts)
        self.resume(learner, {**params, **lopts}, params)
        with getattr(est, "_threads", contextlib.nullcontext)():  # n_jobs
            code = (self.train_with_coherence(learner, self.args.coherence)
                    if getattr(self.args, "coherence", None) else self.train(learner))
        if code != 0:
            return code
        if finish is not None:
            finish()
        report.name_features(est, data)  # words, vertex ids: kept in the saved model
        notes = [report.score_note(est, X_out, y_out if supervised else None, no_score)]
        if self.args.save:
            try:
                notes.append(f"saved {est.save(self.args.save)}")
            except Exception as exc:
                print(f"bidlab train: training finished but --save {self.args.save} failed: "
                      f"{type(exc).__name__}: {exc}", file=sys.stderr)
                return 1
        print(self.result(learner, "; ".join(n for n in notes if n)))
        print(report.topics_text(est) + report.ranking_text(est), end="")
        return 0

    def train_with_coherence(self, learner: Any, measure: str) -> int:
        """Train a pass at a time, printing the topics' coherence after each (stderr):
        :func:`bidlab.cli.train_coherence.train_pass_by_pass`."""
        if not callable(getattr(learner, "coherence", None)):
            raise _BadInput(f"--coherence applies to topic models (lda, ldagibbs); "
                            f"{self.name} has no topics")
        return train_pass_by_pass(self, learner, measure)
