"""Saving, resuming and the ``bidlab`` command line on awkward paths: a Bayesian network
resumed from its checkpoint, ``--checkpoint`` and ``--save`` naming one file, a saved
model given as ``--checkpoint``, and ``bidlab demo`` given model options out of range."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from bidlab.cli import main
from bidlab.models import BayesNet
from bidlab.models.bayesnet import Network


def _svmlight(tmp_path) -> str:
    rng = np.random.default_rng(0)
    X = rng.random((60, 4))
    path = tmp_path / "d.svm"
    dump_svmlight_file(X, (X[:, 0] > 0.5).astype(int), str(path))
    return str(path)


def _rain() -> Network:
    return Network(["rain", "wet", "slip"], [["no", "yes"]] * 3, [[], [0], [1]],
                   [np.array([[0.8, 0.2]]), np.array([[0.9, 0.1], [0.2, 0.8]]),
                    np.array([[0.7, 0.3], [0.4, 0.6]])])


# ------------------------------------------------------------- BayesNet, resumed learning
def test_a_resumed_bayesnet_samples_and_reports_the_checkpoints_tables(tmp_path) -> None:
    """Learner.load wrote the learned tables into the model matrix but left the network
    (what the chains sample from, and what ``network_`` reports and ``save`` writes) at
    the tables the run started from."""
    net = _rain()
    rows = BayesNet(net).sample(200, random_state=1).astype(float)
    rows[np.random.default_rng(0).random(rows.shape) < 0.4] = np.nan
    ck = str(tmp_path / "bn.ck")
    first = BayesNet(net, n_chains=10, random_state=2)
    lrn = first.learner(rows, n_passes=2, checkpoint=ck)
    lrn.fit(progress=None)
    learned = first.network_.flat_tables()[0]
    assert not np.allclose(learned, net.flat_tables()[0])

    again = BayesNet(net, n_chains=10, random_state=2)
    lrn2 = again.learner(rows, n_passes=2)
    lrn2.load(ck)
    np.testing.assert_array_equal(again.network_.flat_tables()[0], learned)
    np.testing.assert_array_equal(lrn2.model.chains.t.cpt, learned)
    saved = again.save(tmp_path / "bn.saved")
    np.testing.assert_array_equal(BayesNet.load(saved).network_.flat_tables()[0], learned)


# --------------------------------------------------- bidlab train: --checkpoint and --save
@pytest.mark.parametrize("save", ["same", "./same", "sub/../same"])
def test_checkpoint_and_save_naming_one_file_are_refused(tmp_path, capsys, monkeypatch,
                                                         save) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    code = main(["train", "kmeans", "--data", _svmlight(tmp_path), "--n_clusters", "2",
                 "--max_iter", "2", "--progress", "none", "--checkpoint", "same",
                 "--save", save])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--checkpoint and --save name one file" in err and "Traceback" not in err
    assert not (tmp_path / "same").exists()  # refused before training


def test_a_saved_model_given_as_checkpoint_is_named_and_not_offered_for_restart(
        tmp_path, capsys) -> None:
    data = _svmlight(tmp_path)
    saved = tmp_path / "km.saved"
    common = ["train", "kmeans", "--data", data, "--n_clusters", "2", "--max_iter", "2",
              "--progress", "none"]
    assert main([*common, "--save", str(saved)]) == 0
    before = saved.read_bytes()
    capsys.readouterr()
    assert main([*common, "--checkpoint", str(saved)]) == 2
    err = capsys.readouterr().err
    assert "is a saved KMeans" in err and "not a learner's checkpoint" in err, err
    assert "None model" not in err and "--restart" not in err, err
    assert saved.read_bytes() == before


# ------------------------------------------------------------------------- bidlab demo
@pytest.mark.parametrize("flag, value", [("--random_state", "-1"),
                                         ("--n_passes", "1000000000000")])
def test_demo_refuses_a_model_option_out_of_range_in_one_line(tmp_path, capsys, flag,
                                                              value) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(6):
        (docs / f"d{i}.txt").write_text(f"apple banana cherry word{i % 2} fig grape\n")
    out = tmp_path / "chart.html"
    code = main(["demo", "--data", str(docs), "--min_df", "1", "--max_df", "1.0",
                 "--progress", "none", "--out", str(out), flag, value])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("bidlab demo: The ") and flag.lstrip("-") in err, err
    assert not out.exists()


# ------------------------------------------------------------- bidlab train, a divergence
def test_a_diverged_run_is_one_line_naming_the_fix_without_a_traceback(tmp_path,
                                                                      capsys) -> None:
    code = main(["train", "glm", "--data", _svmlight(tmp_path), "--link", "linear",
                 "--lrate", "1e30", "--updater", "grad", "--n_passes", "3", "--progress",
                 "none"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "training failed: DivergedError" in err and "Lower the learning rate" in err
    assert "Traceback" not in err and err.count("the model diverged") == 1, err


def test_nmf_on_a_wide_ratings_matrix_names_the_default_and_the_flag(tmp_path, capsys):
    rows = [f"{u},{i},{1 + (u * i) % 5}" for u in range(1, 6) for i in range(1, 13)]
    data = tmp_path / "ratings.csv"
    data.write_text("userId,movieId,rating\n" + "\n".join(rows) + "\n")
    assert main(["train", "nmf", "--data", str(data), "--progress", "none"]) == 2
    err = capsys.readouterr().err
    assert "the default n_components (None: the 12 features)" in err
    assert "--n_components 5" in err
    assert main(["train", "nmf", "--data", str(data), "--progress", "none",
                 "--n_components", "3", "--max_iter", "5"]) == 0


def test_bidlab_train_kmeans_saves_what_fit_reports(tmp_path, capsys):
    from bidlab.models import KMeans

    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(c, 0.3, (60, 2)) for c in ((0, 0), (5, 5), (0, 5))])
    np.savez(tmp_path / "blobs.npz", X=X)
    out = tmp_path / "km.bidlab"
    assert main(["train", "kmeans", "--data", str(tmp_path / "blobs.npz"), "--n_clusters",
                 "3", "--random_state", "0", "--holdout", "0", "--progress", "none",
                 "--save", str(out)]) == 0
    capsys.readouterr()
    got = KMeans.load(out)
    np.testing.assert_array_equal(got.labels_, got.predict(X))
    assert got.inertia_ == pytest.approx(-got.score(X), rel=1e-9)
    assert got.n_iter_ >= 1 and got.n_steps_ >= got.n_iter_
    fit = KMeans(3, random_state=0).fit(X)
    assert got.inertia_ == pytest.approx(fit.inertia_, rel=1e-6)
