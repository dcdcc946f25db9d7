"""``bidlab demo``: train LDA on real documents, print the topics, their coherence and the
held-out perplexity, and write a bubble chart.

The corpus, by default: UCI KOS (3,430 blog posts of the 2004 US election season) when the
shared data folder holds it (:mod:`bidlab.datasets.paths`), else the docstrings of the
running Python's standard library, read from its source files
(:func:`bidlab.datasets.docstrings.load_stdlib_docstrings`): real text, offline, nothing
downloaded. ``--data`` takes a UCI bag-of-words folder or docword file, or a folder / tar
archive of text files. 10% of the documents are held out; the held-out score is
document-completion perplexity (each held-out document's second half of tokens predicted
from its first: see ``LDA.perplexity`` for how it compares with scikit-learn's and
gensim's figures), beside a uniform model's (the vocabulary size). Each topic's UMass
coherence (:func:`bidlab.models.lda.coherence.coherence` with ``"u_mass"``, gensim's
values, over the training documents) is printed beside its words. The chart is a
standalone HTML file (bokeh, resources inlined; the ``demo`` extra): one column per topic,
one bubble per top word, bubble area proportional to the word's probability in the topic.
"""

from __future__ import annotations

import argparse
import html
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

METHODS = ("online", "batch", "gibbs")

#: The formats ``--data`` may hold: documents x words counts with their words.
CORPUS_FORMATS = ("uci-bow", "text-folder", "text-archive")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``bidlab demo``'s arguments."""
    from bidlab.cli.aliases import add_deprecated_aliases
    from bidlab.cli.word_bounds import add_word_bounds

    parser.add_argument("--data", default=None, metavar="PATH",
                        help="a UCI bag-of-words folder or docword file, or a folder / tar of "
                             "text files (default: UCI KOS from the shared data folder, else "
                             "the Python standard library's docstrings)")
    parser.add_argument("--method", choices=METHODS, default="online",
                        help="online or batch variational Bayes, or SAME Gibbs sampling")
    parser.add_argument("--n_components", type=int, default=None,
                        help="number of topics (default: 12 on the docstrings, else 20)")
    parser.add_argument("--n_passes", type=int, default=None,
                        help="passes over the data (default: 10 online, 30 batch, 4 gibbs)")
    add_word_bounds(parser, "text files only")
    parser.add_argument("--top", type=int, default=8, help="top words shown per topic")
    parser.add_argument("--out", default="lda_topics.html",
                        help="where to write the HTML bubble chart (default: %(default)s)")
    parser.add_argument("--random_state", type=int, default=0, help="random seed")
    parser.add_argument("--progress", choices=("auto", "text", "lines", "none"),
                        default="auto", help="on stderr, as for bidlab train: a bar and pass "
                        "lines (auto, text), pass lines only (lines), or none")
    add_deprecated_aliases(parser, n_passes=int, random_state=int)


def default_corpus() -> tuple[Any, str]:
    """(corpus, why it was chosen): UCI KOS when the shared data holds it, else the
    standard library's docstrings."""
    import os

    from bidlab.datasets.docstrings import load_stdlib_docstrings
    from bidlab.datasets.paths import ENV_VAR, find_shared_data_dir
    from bidlab.datasets.uci import load_kos

    shared = find_shared_data_dir()
    if shared is not None and (shared / "uci-kos").is_dir():
        return load_kos(shared), f"UCI KOS blog posts, from {shared / 'uci-kos'}"
    if shared is not None:
        missing = f"{shared} has no uci-kos folder"
    elif os.environ.get(ENV_VAR):
        missing = (f"${ENV_VAR} is set to {os.environ[ENV_VAR]!r}, which is not a folder: "
                   "point it at the folder that holds uci-kos/, or unset it")
    else:
        missing = f"the shared data folder with UCI KOS was not found (${ENV_VAR} names it)"
    return load_stdlib_docstrings(), (
        f"the docstrings of this Python's standard library ({missing}; --data PATH takes "
        "your own documents)")


def load_data(path: str | None, min_df: int | float | None = None,
              max_df: int | float | None = None) -> Any:
    """The demo's corpus: the default one (see :func:`default_corpus`), else ``path``
    read by its content; ValueError naming the problem for data that is not documents.
    ``min_df`` and ``max_df`` (None: the loader's defaults) bound the words kept from
    text files, as in :func:`bidlab.datasets.load_text_folder`."""
    from bidlab.datasets import Corpus, load_text_folder
    from bidlab.datasets.sniff import FORMATS, load, sniff

    if path is None:
        return default_corpus()[0]
    found = sniff(path)  # FileNotFoundError / DataFormatError (a ValueError) say why
    if found.format not in CORPUS_FORMATS:
        raise ValueError(
            f"--data {path} holds {FORMATS[found.format]}, not documents: the demo trains "
            "topics on word counts, so give a UCI bag-of-words folder or docword file, or a "
            "folder / tar archive of text files (`bidlab train --help` trains the other "
            "models on such data)")
    if found.format in ("text-folder", "text-archive"):
        bounds = {k: v for k, v in (("min_df", min_df), ("max_df", max_df)) if v is not None}
        return load_text_folder(found.path, name=Path(path).name, **bounds)
    data = load(found)
    vocab = data.vocab or [f"w{j}" for j in range(data.X.shape[1])]
    return Corpus(data.X, list(vocab), name=Path(path).name)


def make_model(method: str, k: int, passes: int | None, seed: int) -> Any:
    from bidlab.models import LDA, LDAGibbs

    if method == "gibbs":
        return LDAGibbs(k, 100, n_passes=passes or 4, random_state=seed)
    if method == "batch":
        return LDA(k, "batch", n_passes=passes or 30, random_state=seed)
    return LDA(k, "online", n_passes=passes or 10, random_state=seed)


def split(X: Any, seed: int, frac: float = 0.1) -> tuple[Any, Any]:
    """(train, test) rows: ``frac`` of the non-empty documents held out at random."""
    import scipy.sparse as sp

    X = sp.csr_matrix(X)
    keep = np.flatnonzero(np.diff(X.indptr) > 0)
    rng = np.random.default_rng(seed)
    n_test = max(1, int(round(frac * keep.shape[0])))
    test = np.sort(rng.choice(keep, size=n_test, replace=False))
    return X[np.setdiff1d(np.arange(X.shape[0]), test)], X[test]


def check_top(top: int, k: int, n_words: int) -> None:
    """ValueError naming a smaller ``--top`` when scoring the coherence of ``top`` words in
    each of ``k`` topics over ``n_words`` would exceed the coherence's memory budget
    (:data:`bidlab.models.lda.coherence.MEMORY_BUDGET`, with every top word distinct: the
    most it can need): checked before training, not after."""
    from bidlab.models.lda import coherence as coh

    def fits(t: int) -> bool:
        n = min(max(2, t), n_words)
        return coh._working_bytes(k, n, min(k * n, n_words), "u_mass",
                                  "gensim") <= coh.MEMORY_BUDGET

    if fits(top):
        return
    lo, hi = 1, top
    while lo < hi:  # the largest --top that fits
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    raise ValueError(f"--top {top}: scoring the coherence of {top} words in each of {k} topics "
                     f"would need more than {coh.MEMORY_BUDGET / 2**30:.1f} GiB of memory; "
                     f"give --top {lo} or fewer (a few tens is plenty to read a topic)")


def bubble_chart_html(components: np.ndarray, vocab: list[str], top: int, title: str) -> str:
    """A standalone HTML bubble chart of the topics' top words (bokeh, inline resources)."""
    from bokeh.embed import file_html
    from bokeh.models import ColumnDataSource, HoverTool, LabelSet
    from bokeh.plotting import figure
    from bokeh.resources import INLINE

    k = components.shape[0]
    best = np.argsort(-components, axis=1)[:, :top]
    xs, ys, words, probs, radius = [], [], [], [], []
    peak = float(components[np.arange(k)[:, None], best].max())
    for t in range(k):
        for r, w in enumerate(best[t]):
            p = float(components[t, w])
            xs.append(t)
            ys.append(-r)
            words.append(vocab[w])
            probs.append(p)
            radius.append(0.45 * math.sqrt(p / peak))  # bubble area ~ probability
    src = ColumnDataSource({"x": xs, "y": ys, "word": words, "p": probs, "r": radius,
                            "topic": [f"topic {x}" for x in xs]})
    fig = figure(title=title, width=max(600, 95 * k), height=90 + 62 * top,
                 x_range=(-0.6, k - 0.4), y_range=(-top + 0.4, 0.6),
                 tools="pan,wheel_zoom,reset,save", toolbar_location="above")
    fig.circle(x="x", y="y", radius="r", source=src, fill_alpha=0.35, line_alpha=0.6)
    fig.add_layout(LabelSet(x="x", y="y", text="word", source=src, text_align="center",
                            text_baseline="middle", text_font_size="9pt"))
    fig.add_tools(HoverTool(tooltips=[("topic", "@topic"), ("word", "@word"),
                                      ("p(word | topic)", "@p{0.0000}")]))
    fig.xaxis.ticker = list(range(k))
    fig.xaxis.axis_label = "topic"
    fig.yaxis.axis_label = "rank of the word in its topic"
    fig.yaxis.ticker = [-r for r in range(top)]
    fig.yaxis.major_label_overrides = {-r: str(r + 1) for r in range(top)}
    return file_html(fig, INLINE, html.escape(title))


def run(args: argparse.Namespace) -> int:
    """Train, print the topics with their coherence and the held-out perplexity, write the
    chart; 0 on success, 2 on bad input."""
    from bidlab.learn.checkpoint import atomic_write_bytes
    from bidlab.learn.save_target import SaveTargetError, check_writable
    from bidlab.models.lda.coherence import coherence as topic_coherence
    from bidlab.models.lda.common import heldout_loglik

    for flag in ("n_components", "n_passes", "top"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            print(f"bidlab demo: --{flag} must be >= 1; got {value}", file=sys.stderr)
            return 2
    try:
        check_writable(args.out)  # before training, not after
    except SaveTargetError as exc:
        print(f"bidlab demo: --out: {exc}", file=sys.stderr)
        return 2
    try:  # the model's own checks of --random_state, --n_passes, ..., before the data loads
        make_model(args.method, args.n_components or 1, args.n_passes,
                   args.random_state)._validate_params()
    except ValueError as exc:
        print(f"bidlab demo: {exc}", file=sys.stderr)
        return 2
    try:
        if args.data is None:
            corpus, why = default_corpus()
            print(f"corpus: {why}")
        else:
            corpus = load_data(args.data, args.min_df, args.max_df)
    except BrokenPipeError:  # stdout's reader went: bidlab.cli.main ends quietly
        raise
    except (FileNotFoundError, ValueError, OSError) as exc:
        print(f"bidlab demo: {exc}", file=sys.stderr)
        return 2
    seed = args.random_state
    small = corpus.X.shape[0] < 2000
    k = args.n_components if args.n_components is not None else (12 if small else 20)
    try:
        check_top(args.top, k, corpus.X.shape[1])
    except ValueError as exc:
        print(f"bidlab demo: {exc}", file=sys.stderr)
        return 2
    Xtr, Xte = split(corpus.X, seed)
    name = corpus.name or "corpus"
    print(f"{name}: {Xtr.shape[0]} training + {Xte.shape[0]} held-out documents, "
          f"vocabulary {corpus.X.shape[1]}, {int(corpus.X.sum())} tokens; "
          f"LDA n_components={k}, method={args.method}")
    model = make_model(args.method, k, args.n_passes, seed)
    t0 = time.perf_counter()
    learner = model.learner(Xtr, val_every=0, name="demo")
    learner.fit(progress=None if args.progress == "none" else args.progress, file=sys.stderr)
    seconds = time.perf_counter() - t0
    comp = model.components_
    vocab = list(corpus.vocab)
    coherence = topic_coherence(comp, Xtr, "u_mass", top_n=max(2, args.top), per_topic=True)
    print(f"\ntrained in {seconds:.1f} s; top words per topic, each with its UMass coherence "
          "(0 at best; more negative: the words share fewer documents):")
    order = np.argsort(-coherence, kind="stable")
    words = model.top_words(args.top, vocab)
    for t in order:
        print(f"  topic {t:2d}  {coherence[t]:6.2f}  {' '.join(words[t])}")
    ll = heldout_loglik(comp, Xte, model.alpha)
    print(f"\nmean coherence {coherence.mean():.2f}; held-out perplexity "
          f"{math.exp(-ll):.1f} (document completion on {Xte.shape[0]} documents; a uniform "
          f"model: {Xtr.shape[1]}; log-likelihood per word {ll:.4f})")
    try:
        page = bubble_chart_html(comp, vocab, args.top,
                                 f"LDA ({args.method}, n_components={k}) on {name}")
    except ImportError as exc:
        print(f"bidlab demo: no chart: it needs bokeh ({exc}): pip install 'bidlab[demo]'",
              file=sys.stderr)
        return 0
    out = atomic_write_bytes(args.out, lambda f: f.write(page.encode("utf-8")))
    print(f"bubble chart: {Path(out).resolve()}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m bidlab.demo``: the same as ``bidlab demo``."""
    parser = argparse.ArgumentParser(prog="bidlab demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
