"""MovieLens 1M / 10M ``::`` files, the LDA docstring's Attributes section, ``start()`` on a
learner with nothing left to train, and what the intertopic map says an edit did."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

from bidlab.cli import main
from bidlab.datasets import load_movielens, read_ratings_csv
from bidlab.datasets.sniff import load, sniff
from bidlab.learn import Learner
from bidlab.learn.updaters import Grad
from bidlab.models import LDA
from bidlab.models.lsq import LeastSquares

ML1M_RATINGS = ("1::1193::5::978300760\n1::661::3::978302109\n2::1193::4::978298413\n"
                "2::3408::4::978299000\n3::661::2::978297039\n")
# ML-1M's movies.dat is Latin-1 (a title with an e-acute, as "Cité des enfants perdus")
ML1M_MOVIES = ("1193::One Flew Over the Cuckoo's Nest (1975)::Drama\n"
               "661::James and the Giant Peach (1996)::Animation|Children's|Musical\n"
               "3408::Cité des enfants perdus, La (1995)::Adventure|Sci-Fi\n"
               ).encode("latin-1")


# ------------------------------------------------------------ MovieLens '::' files
def test_movielens_dat_ratings_are_read_and_sniffed(tmp_path) -> None:
    path = tmp_path / "ratings.dat"
    path.write_text(ML1M_RATINGS)
    r = read_ratings_csv(path)
    assert r.user_ids.tolist() == [1, 2, 3] and r.item_ids.tolist() == [661, 1193, 3408]
    assert r.X.toarray().tolist() == [[3, 5, 0], [0, 4, 4], [2, 0, 0]]
    assert r.times is not None and r.times.max() == 978302109
    assert sniff(path).format == "ratings"
    assert load(path).X.nnz == 5


def test_movielens_dat_errors_name_the_line(tmp_path) -> None:
    short = tmp_path / "short.dat"
    short.write_text("1::2::5::9\n1::3::4\n")
    with pytest.raises(ValueError, match=r"from 4 to 3 at line 2, '1::3::4'"):
        read_ratings_csv(short)
    bad = tmp_path / "bad.dat"
    bad.write_text("1::2::5::9\n\n2::3::x::5\n")
    with pytest.raises(ValueError, match=r"row 3 holds '2::3::x::5'"):
        read_ratings_csv(bad)


def test_comma_and_tab_files_keep_their_separators(tmp_path) -> None:
    csv_ids = tmp_path / "r.csv"  # text ids holding '::' stay whole in a CSV
    csv_ids.write_text("user,item,rating\na::1,x,4\nb,y::2,3\n")
    r = read_ratings_csv(csv_ids)
    assert r.user_ids.tolist() == ["a::1", "b"] and r.item_ids.tolist() == ["x", "y::2"]
    tsv = tmp_path / "r.tsv"
    tsv.write_text("1\t2\t3.5\n2\t2\t4\n")
    assert read_ratings_csv(tsv).X.sum() == pytest.approx(7.5)


def test_bidlab_train_sfa_reads_a_movielens_dat_file(tmp_path, capsys) -> None:
    rng = np.random.default_rng(0)
    users, items = rng.integers(1, 31, 300), rng.integers(1, 21, 300)
    lines = {(int(u), int(i)): f"{u}::{i}::{rng.integers(1, 6)}::{978300000 + n}\n"
             for n, (u, i) in enumerate(zip(users, items, strict=True))}
    path = tmp_path / "ratings.dat"
    path.write_text("".join(lines.values()))
    assert main(["train", "sfa", "--data", str(path), "--progress", "none",
                 "--n_components", "2", "--max_iter", "2"]) == 0
    assert "ratings, 30 x 20" in capsys.readouterr().err


def test_a_movielens_1m_folder_loads_with_latin1_titles(tmp_path) -> None:
    folder = tmp_path / "ml-1m"
    folder.mkdir()
    (folder / "ratings.dat").write_text(ML1M_RATINGS)
    (folder / "movies.dat").write_bytes(ML1M_MOVIES)
    ml = load_movielens(tmp_path, folder="ml-1m")
    assert ml.X.shape == (3, 3)
    assert ml.titles[ml.item_column(3408)] == "Cité des enfants perdus, La (1995)"
    assert ml.titles[ml.item_column(661)] == "James and the Giant Peach (1996)"


# ------------------------------------------------------------ the LDA docstring
def test_lda_docstring_has_one_well_formed_attributes_section() -> None:
    from sphinx.ext.napoleon import Config
    from sphinx.ext.napoleon.docstring import NumpyDocstring

    doc = inspect.getdoc(LDA)
    assert doc.count("Attributes\n----------") == 1
    rst = str(NumpyDocstring(doc, Config(napoleon_use_ivar=False)))
    assert ":param Attributes" not in rst  # the section was read as a parameter
    for name in ("components_", "model_", "n_features_in_", "n_empty_docs_", "n_batches_",
                 "n_passes_done_"):
        assert f".. attribute:: {name}" in rst, name
    notes = doc.split("Notes\n-----")[1].split("Examples\n--------")[0] if "Notes\n-----" in \
        doc else ""
    assert "n_passes_done_" not in notes


# ------------------------------------------------------------ start() when finished
def _learner(**options: object) -> Learner:
    rng = np.random.default_rng(0)
    X = rng.random((200, 3)).astype(np.float32)
    return Learner(LeastSquares(), (X, X @ np.ones(3, np.float32)), Grad(lrate=0.1),
                   batch_size=50, **options)


def test_start_after_the_last_pass_warns_how_to_continue() -> None:
    lr = _learner(n_passes=2)
    lr.fit(progress=None)
    steps = lr.step
    with pytest.warns(UserWarning, match=r"has made 2 passes \(n_passes=2\).*"
                      r"learner\.set\(n_passes=4\) trains 2 more"):
        lr.start()
    assert lr.join(10) and lr.state == "done" and lr.step == steps
    lr.set(n_passes=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # something left to train: no warning
        lr.start()
    assert lr.join(10) and lr.step == 2 * steps


def test_start_after_max_steps_warns_how_to_continue() -> None:
    lr = _learner(n_passes=10, max_steps=3)
    lr.start()
    assert lr.join(10) and lr.step == 3
    with pytest.warns(UserWarning, match=r"max_steps=3.*learner\.set\(max_steps=6\)"):
        lr.start()
    assert lr.join(10) and lr.step == 3


def test_a_warning_made_an_error_leaves_the_learner_startable() -> None:
    lr = _learner(n_passes=1)
    lr.fit(progress=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="n_passes"):
            lr.start()
    assert lr.state == "done"
    lr.set(n_passes=2)
    lr.start()
    assert lr.join(10) and lr.state == "done"


# ------------------------------------------------------------ the intertopic map's status
@pytest.fixture
def topic_learner():
    pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
    pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")
    from bidlab.datasets.synthetic_corpus import block_diagonal_corpus
    from bidlab.models import LDAGibbs

    corpus = block_diagonal_corpus(k=4, words_per_topic=10, n_docs=400, doc_len=30, seed=1)
    lr = LDAGibbs(n_components=4, random_state=0).learner(corpus, n_passes=1, batch_size=50)
    lr.fit(progress=None)
    return lr, corpus


def test_an_edit_on_an_idle_learner_is_reported_as_applied(topic_learner) -> None:
    from bidlab.widgets import IntertopicMap

    lr, corpus = topic_learner
    view = IntertopicMap(lr, corpus.vocab)
    try:
        view.select([0, 1])
        ticket = view.edit("merge")
        assert ticket.done and lr.model.opts.n_components == 3
        assert "applied (now 3 topics)" in view.status.value
        assert "next minibatch" not in view.status.value
    finally:
        view.close()


def test_an_edit_on_a_paused_learner_waits_for_the_resume(topic_learner) -> None:
    from bidlab.widgets import IntertopicMap

    lr, corpus = topic_learner
    lr.set(n_passes=10_000)
    view = IntertopicMap(lr, corpus.vocab)
    lr.start()
    try:
        lr.pause(wait=True)
        assert lr.state == "paused"
        view.select([2])
        ticket = view.edit("delete")
        assert not ticket.done and "applied when the learner resumes" in view.status.value
        lr.resume()
        assert ticket.wait(10)["k_after"] == 3
    finally:
        lr.stop()
        view.close()
