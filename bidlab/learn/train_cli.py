"""``bidlab train <model> --data <path> [--option value ...] [--checkpoint path]``.

Trains a registered model (``bidlab.learn.MODELS``: ``lsq`` here; later issues add
``lda``, ``glm``, ``kmeans``) with the learner's progress bar and one summary line per
pass. Any learner, model, updater or mixin option is given as ``--name value``
(dashes or underscores; vectors as ``0.1,0.2``); ``bidlab train <model> --help`` lists
them. With ``--checkpoint PATH`` a checkpoint is written at each pass end and when the run
ends, and an existing one is resumed (options on the command line override the saved
ones; ``--restart`` ignores it).

Data (samples are rows):

* a shard folder written by :func:`bidlab.learn.write_shards` (read with prefetch);
* an ``.npz`` with numeric arrays ``X`` (or CSR parts ``X__data``, ``X__indices``,
  ``X__indptr``, ``X__shape``) and optionally ``y`` and ``w``; also a
  ``scipy.sparse.save_npz`` file (features only);
* an svmlight / libsvm text file (``.svm``, ``.libsvm``, ``.txt``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

ACCEPTS_EXTRA = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``bidlab train``'s own arguments (learner options come as extras)."""
    parser.add_argument("model", help="model name (e.g. lsq)")
    parser.add_argument("--data", required=False, help="shard folder, .npz or svmlight file")
    parser.add_argument("--batch-size", type=int, default=1000, help="rows per minibatch")
    parser.add_argument("--updater", default=None, help="grad, adagrad, incnorm or batch "
                        "(default: the model's choice, else adagrad)")
    parser.add_argument("--shuffle", action="store_true", help="shuffle rows (and shards)")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--checkpoint", default=None,
                        help="checkpoint file: written at pass ends, resumed when present")
    parser.add_argument("--restart", action="store_true",
                        help="ignore an existing checkpoint and start from scratch")
    parser.add_argument("--progress", choices=["auto", "text", "none"], default="auto")
    parser.add_argument("-h", "--help", action="store_true",
                        help="show this help and the model's options")


def load_data(path: str, batch_size: int, shuffle: bool, device: str) -> Any:
    """A DataSource for ``path`` (shard folder, .npz, svmlight)."""
    from bidlab.learn.datasource import MemorySource
    from bidlab.learn.shards import ShardSource

    p = Path(path)
    if p.is_dir() or p.name == "manifest.json":
        return ShardSource(p, batch_size=batch_size, shuffle_shards=shuffle,
                           shuffle_rows=shuffle, device=device)
    if not p.is_file():
        raise FileNotFoundError(f"--data {path}: no such file or folder")
    if p.suffix == ".npz":
        with np.load(p, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        mats = _npz_mats(arrays, p)
    elif p.suffix in (".svm", ".libsvm", ".txt", ".svmlight"):
        from sklearn.datasets import load_svmlight_file

        X, y = load_svmlight_file(str(p), dtype=np.float32)
        mats = [X.astype(np.float32), y.astype(np.float32)]
    else:
        raise ValueError(f"--data {path}: expected a shard folder, an .npz or an svmlight "
                         "file (.svm, .libsvm, .txt)")
    return MemorySource(*mats, batch_size=batch_size, shuffle=shuffle, device=device)


def _npz_mats(arrays: dict[str, np.ndarray], path: Path) -> list[Any]:
    if {"data", "indices", "indptr", "shape", "format"} <= arrays.keys():  # scipy save_npz
        fmt = arrays["format"].item()
        fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
        cls = {"csr": sp.csr_matrix, "csc": sp.csc_matrix}.get(fmt)
        if cls is None:
            raise ValueError(f"{path}: sparse format {fmt!r} is not supported (csr or csc)")
        X = cls((arrays["data"], arrays["indices"], arrays["indptr"]),
                shape=tuple(arrays["shape"]))
        return [X.tocsr()]
    mats = []
    for name in ("X", "y", "w"):
        if name in arrays:
            mats.append(arrays[name])
        elif f"{name}__data" in arrays:
            mats.append(sp.csr_matrix((arrays[f"{name}__data"], arrays[f"{name}__indices"],
                                       arrays[f"{name}__indptr"]),
                                      shape=tuple(arrays[f"{name}__shape"])))
        elif name == "y" and "Y" in arrays:
            mats.append(arrays["Y"])
        else:
            break
    if not mats:
        raise ValueError(f"{path}: no array named X (or X__data/X__indices/X__indptr/X__shape) "
                         f"in the file; it has {sorted(arrays)}")
    return mats


def _parse_extra(extra: list[str], opts: Any) -> dict[str, Any]:
    """``--name value`` pairs -> validated option values (errors name the option)."""
    from bidlab.learn.options import OptionError

    values: dict[str, Any] = {}
    i = 0
    while i < len(extra):
        tok = extra[i]
        if not tok.startswith("--"):
            raise OptionError(f"unexpected argument {tok!r}: options are --name value")
        name, _, inline = tok[2:].partition("=")
        name = name.replace("-", "_")
        if name not in opts.specs:
            raise OptionError(opts._unknown(name))
        spec = opts.specs[name]
        if inline:
            text = inline
        elif spec.type is bool and (i + 1 >= len(extra) or extra[i + 1].startswith("--")):
            text = "true"
        else:
            if i + 1 >= len(extra):
                raise OptionError(f"option --{name} needs a value ({spec.allowed()})")
            i += 1
            text = extra[i]
        values[name] = spec.parse(text)
        i += 1
    return values


def _wanted_mixins(extra: list[str]) -> list[Any]:
    from bidlab.learn.mixins import MIXINS

    names = {t[2:].partition("=")[0].replace("-", "_") for t in extra if t.startswith("--")}
    return [cls() for key, cls in MIXINS.items() if key in names]


def run(args: argparse.Namespace) -> int:
    """Train; exit 0 when done, 1 on a training error, 2 on bad input, 130 on Ctrl-C."""
    import bidlab.learn  # noqa: F401  (registers the built-in models)
    from bidlab.learn.learner import Learner
    from bidlab.learn.model import MODELS
    from bidlab.learn.options import OptionError
    from bidlab.learn.shards import ShardError
    from bidlab.learn.updaters import UPDATERS

    _load_model_plugins()
    err = sys.stderr
    factory = MODELS.get(args.model)
    if factory is None:
        print(f"bidlab train: unknown model {args.model!r}; known models: "
              f"{', '.join(sorted(MODELS)) or 'none'}", file=err)
        return 2
    upd_name = args.updater or getattr(factory, "default_updater", "adagrad")
    if upd_name not in UPDATERS:
        print(f"bidlab train: unknown updater {upd_name!r}; known: {', '.join(UPDATERS)}",
              file=err)
        return 2
    extra = list(getattr(args, "extra", []))
    try:
        model = factory()
        updater = UPDATERS[upd_name]()
        mixins = _wanted_mixins(extra)
        if args.help:
            print(_help_text(args.model, model, updater, mixins))
            return 0
        if not args.data:
            print("bidlab train: --data is required (a shard folder, .npz or svmlight file)",
                  file=err)
            return 2
        source = load_data(args.data, args.batch_size, args.shuffle, args.device)
        learner = Learner(model, source, updater, mixins, name=args.model)
        resumed = False
        if args.checkpoint and os.path.exists(args.checkpoint) and not args.restart:
            learner.load(args.checkpoint)
            resumed = True
        learner.set(**_parse_extra(extra, learner.opts))
        if args.checkpoint:
            learner.set(checkpoint=args.checkpoint)
    except (OptionError, ShardError, ValueError, TypeError, FileNotFoundError) as exc:
        print(f"bidlab train: {exc}", file=err)
        return 2
    if resumed:
        print(f"resuming from {args.checkpoint} at pass {learner.metrics['pass'] + 1}, "
              f"step {learner.step}", file=err)
    try:
        learner.fit(progress=None if args.progress == "none" else args.progress)
    except KeyboardInterrupt:
        print("\ninterrupted: the learner stopped cleanly"
              + (f"; checkpoint in {args.checkpoint}" if args.checkpoint else ""), file=err)
        return 130
    except Exception as exc:
        print(f"bidlab train: training failed: {type(exc).__name__}: {exc}\n"
              f"{learner.traceback or ''}", file=err)
        return 1
    finally:
        source.close()
    m = learner.metrics
    print(f"done: {learner.step} minibatches, {learner.samples} samples, "
          f"train {m['pass_train_score']:.6g}, val {m['pass_val_score']:.6g} "
          f"({model.score_name})" + (f"; checkpoint {args.checkpoint}" if args.checkpoint
                                     else ""))
    return 0


def _load_model_plugins() -> None:
    """Import bidlab.models so models of later issues can register themselves."""
    try:
        import bidlab.models  # noqa: F401
    except Exception:  # a broken optional model must not break `bidlab train lsq`
        pass


def _help_text(name: str, model: Any, updater: Any, mixins: list[Any]) -> str:
    from bidlab.learn.learner import Learner
    from bidlab.learn.options import Options

    opts = Options()
    for comp in (Learner, model, updater, *mixins):
        table = comp.option_table() if isinstance(comp, type) else comp.opts.specs.values()
        for spec in table:
            opts.declare(spec)
    lines = [f"usage: bidlab train {name} --data PATH [--batch-size N] [--updater NAME] "
             "[--shuffle] [--checkpoint PATH] [--OPTION VALUE ...]", "",
             f"options of {type(model).__name__} with {type(updater).__name__} "
             "(--name value; dashes or underscores; vectors as 0.1,0.2):"]
    lines += ["  " + ln for ln in opts.what().splitlines()]
    return "\n".join(lines)
