"""``bidlab demo``: train LDA, print the topics and the held-out score, write a bubble chart.

By default it trains on a synthetic corpus with planted, legible topics (so it runs
anywhere, offline, in seconds); ``--data`` takes a UCI bag-of-words folder (or docword
file) or a folder / tar archive of text files. 10% of the documents are held out and
scored by document completion (held-out log-likelihood per word; a uniform model scores
-log(vocabulary)). The chart is a standalone HTML file (bokeh, resources inlined): one
column per topic, one bubble per top word, bubble area proportional to the word's
probability in the topic.

bokeh is imported only here, when the chart is written (the ``viz`` extra).
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``bidlab demo``'s arguments."""
    parser.add_argument("--data", default=None, metavar="PATH",
                        help="a UCI bag-of-words folder or docword file, or a folder / tar of "
                             "text files (default: a synthetic corpus with planted topics)")
    parser.add_argument("--method", choices=METHODS, default="online",
                        help="online or batch variational Bayes, or SAME Gibbs sampling")
    parser.add_argument("--n_components", type=int, default=None,
                        help="number of topics (default: 12 on the synthetic corpus, else 20)")
    parser.add_argument("--passes", type=int, default=None, help="passes over the data")
    parser.add_argument("--top", type=int, default=8, help="top words shown per topic")
    parser.add_argument("--out", default="lda_topics.html",
                        help="where to write the HTML bubble chart (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--progress", choices=("auto", "text", "none"), default="auto",
                        help="progress display")


def load_data(path: str | None, seed: int) -> Any:
    """The demo's corpus: synthetic by default, else a UCI folder or a text folder / tar."""
    from bidlab import datasets

    if path is None:
        return datasets.synthetic_lda_corpus(n_docs=3000, n_words=3000, k=12,
                                             doc_len=(60, 200), alpha=0.1, seed=seed)
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"--data {path}: no such file or folder")
    is_uci = p.is_file() and p.name.startswith("docword") or (
        p.is_dir() and any(c.name.startswith("docword.") for c in p.iterdir()))
    if is_uci:
        return datasets.load_uci_bow(p)
    return datasets.load_text_folder(p)


def make_model(method: str, k: int, passes: int | None, seed: int) -> Any:
    from bidlab.models import LDA, LDAGibbs

    if method == "gibbs":
        return LDAGibbs(k, 100, n_passes=passes or 4, random_state=seed)
    if method == "batch":
        return LDA(k, "batch", n_passes=passes or 30, random_state=seed)
    return LDA(k, "online", n_passes=passes or 5, random_state=seed)


def split(X: Any, seed: int, frac: float = 0.1) -> tuple[Any, Any]:
    """(train, test) rows: ``frac`` of the non-empty documents held out at random."""
    import scipy.sparse as sp

    X = sp.csr_matrix(X)
    keep = np.flatnonzero(np.diff(X.indptr) > 0)
    rng = np.random.default_rng(seed)
    n_test = max(1, int(round(frac * keep.shape[0])))
    test = np.sort(rng.choice(keep, size=n_test, replace=False))
    return X[np.setdiff1d(np.arange(X.shape[0]), test)], X[test]


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
    """Train, print topics and the held-out score, write the chart; 0 on success."""
    from bidlab.models.lda.common import heldout_loglik

    try:
        corpus = load_data(args.data, args.seed)
    except (FileNotFoundError, ValueError, OSError) as exc:
        print(f"bidlab demo: {exc}", file=sys.stderr)
        return 2
    k = args.n_components if args.n_components is not None else (12 if args.data is None else 20)
    if k < 1:
        print(f"bidlab demo: --n_components must be >= 1; got {k}", file=sys.stderr)
        return 2
    Xtr, Xte = split(corpus.X, args.seed)
    name = corpus.name or "corpus"
    print(f"{name}: {Xtr.shape[0]} training + {Xte.shape[0]} held-out documents, "
          f"vocabulary {corpus.X.shape[1]}, {int(corpus.X.sum())} tokens; "
          f"LDA n_components={k}, method={args.method}")
    model = make_model(args.method, k, args.passes, args.seed)
    t0 = time.perf_counter()
    learner = model.learner(Xtr, val_every=0, name="demo")
    learner.fit(progress=None if args.progress == "none" else args.progress)
    seconds = time.perf_counter() - t0
    comp = model.components_
    vocab = list(corpus.vocab)
    print(f"\ntrained in {seconds:.1f} s; top words per topic:")
    for t, words in enumerate(model.top_words(args.top, vocab)):
        print(f"  topic {t:2d}: {' '.join(words)}")
    ll = heldout_loglik(comp, Xte, model.alpha)
    print(f"\nheld-out log-likelihood per word: {ll:.4f} (uniform model: "
          f"{-math.log(Xtr.shape[1]):.4f}; perplexity {math.exp(-ll):.1f})")
    try:
        page = bubble_chart_html(comp, vocab, args.top,
                                 f"LDA ({args.method}, n_components={k}) on {name}")
    except ImportError as exc:
        print(f"bidlab demo: the chart needs bokeh ({exc}): pip install 'bidlab[viz]'",
              file=sys.stderr)
        return 1
    out = Path(args.out)
    out.write_text(page, encoding="utf-8")
    print(f"bubble chart: {out.resolve()}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m bidlab.demo``: the same as ``bidlab demo``."""
    parser = argparse.ArgumentParser(prog="bidlab demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
