"""KMeans on the learner: fit, partial_fit and learner run one engine; checkpoints,
weights, dtypes, pickling, saving and the command line."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from bidlab.datasets import blobs
from bidlab.models.kmeans import KMeans


# --------------------------------------------------------------------------- one engine
def _init(X, k, seed=0):
    return X[np.random.default_rng(seed).choice(len(X), k, replace=False)].copy()


def test_fit_trains_the_model_with_a_learner_and_stops_when_converged():
    from bidlab.models.kmeans.model import KMeansModel

    X, labels, _ = blobs(3000, 5, 4, spread=0.3, seed=8)
    km = KMeans(4, random_state=0, max_iter=50).fit(X)
    assert isinstance(km.model_, KMeansModel)
    assert km.model_.converged and 1 <= km.n_iter_ < 50  # the labels stopped changing
    assert adjusted_rand_score(labels, km.labels_) == 1.0
    assert km.cluster_centers_ is not km.model_.centers.data  # a read-only view
    assert not km.cluster_centers_.flags.writeable


@pytest.mark.parametrize("algorithm", ["lloyd", "minibatch"])
def test_learner_runs_the_same_engine_as_fit(algorithm):
    X, _, _ = blobs(2000, 4, 5, spread=1.5, seed=9)
    X = X.astype(np.float64)
    params = dict(n_clusters=5, random_state=3, algorithm=algorithm, batch_size=256, tol=0,
                  max_iter=4)
    fitted = KMeans(**params).fit(X)
    est = KMeans(**params)
    lrn = est.learner(X, None)
    assert lrn.model is est.model_ and lrn.opts.n_passes == 4 and lrn.opts.val_every == 0
    lrn.fit(progress=None)
    np.testing.assert_array_equal(est.cluster_centers_, fitted.cluster_centers_)
    np.testing.assert_array_equal(est.predict(X), fitted.labels_)
    assert not hasattr(est, "labels_")  # a live learner's labels belong to no single pass


def test_learner_takes_cli_options_and_lloyd_keeps_every_row():
    X, _, _ = blobs(1000, 3, 3, spread=0.5, seed=10)
    est = KMeans(3, random_state=0, algorithm="minibatch", max_no_improvement=None)
    lrn = est.learner(X, None, n_passes=2, batch_size=100, val_every=5)
    assert lrn.source.batch_size == 100 and lrn.opts.val_every == 5
    lrn.fit(progress=None)
    assert lrn.step == 20 and lrn.state == "done"
    lloyd = KMeans(3, random_state=0)
    with pytest.raises(ValueError, match="val_every must stay 0"):
        lloyd.learner(X, val_every=3)
    lrn = lloyd.learner(X, batch_size=128)
    with pytest.raises(ValueError, match="val_every must stay 0"):
        lrn.set(val_every=2)


def _uninterrupted_lloyd(n_passes):
    """Blobs, a start, and a Lloyd learner trained ``n_passes`` without a stop: what a
    resumed run must reproduce."""
    X, _, _ = blobs(3000, 6, 8, spread=3.0, seed=11)
    X = X.astype(np.float64)
    init = _init(X, 8)
    whole = KMeans(8, init=init, tol=0).learner(X, n_passes=n_passes, batch_size=500)
    whole.fit(progress=None)
    return X, init, whole


def test_lloyd_checkpoint_resumes_to_the_same_centres(tmp_path):
    X, init, whole = _uninterrupted_lloyd(7)
    assert not whole.model.converged  # all 7 passes ran
    path = str(tmp_path / "km.ckpt")
    first = KMeans(8, init=init, tol=0)
    lrn = first.learner(X, n_passes=3, batch_size=500, checkpoint=path)
    lrn.fit(progress=None)
    lrn.set(n_passes=5, checkpoint=None)
    lrn.fit(progress=None)  # the live model moves past the checkpoint, then reloads it
    lrn.load(path)
    lrn.set(n_passes=7, checkpoint=None)
    lrn.fit(progress=None)
    np.testing.assert_allclose(first.cluster_centers_, whole.model.centers.data, rtol=1e-12)
    again = KMeans(8, init=init, tol=0)
    lrn = again.learner(X, batch_size=500)
    lrn.load(path)
    lrn.set(n_passes=7, checkpoint=None)  # load restores the saved options
    assert lrn.metrics["pass"] == 3
    lrn.fit(progress=None)
    np.testing.assert_allclose(again.cluster_centers_, whole.model.centers.data, rtol=1e-12)


def test_lloyd_resumes_mid_pass_to_the_same_centres(tmp_path):
    X, init, whole = _uninterrupted_lloyd(4)
    path = str(tmp_path / "km.ckpt")
    first = KMeans(8, init=init, tol=0)
    lrn = first.learner(X, n_passes=4, batch_size=500, checkpoint=path)
    lrn.opts.max_steps = 8  # stops at block 2 of pass 1 and saves the checkpoint there
    lrn.fit(progress=None)
    assert lrn.metrics["pass"] == 1 and lrn.metrics["index"] == 2
    lrn.set(checkpoint=None)
    lrn.opts.max_steps = None
    lrn.fit(progress=None)  # the live model goes on with the pass's sums it holds
    np.testing.assert_allclose(first.cluster_centers_, whole.model.centers.data, rtol=1e-12)
    again = KMeans(8, init=init, tol=0)
    lrn = again.learner(X, batch_size=500)
    lrn.load(path)  # a new model: the pass's sums so far come from the checkpoint
    lrn.set(checkpoint=None)
    lrn.opts.max_steps = None
    lrn.fit(progress=None)
    np.testing.assert_allclose(again.cluster_centers_, whole.model.centers.data, rtol=1e-12)
    redo = KMeans(8, init=init, tol=0)
    lrn = redo.learner(X, batch_size=500)
    lrn.load(path)
    redo.model_._pending = None  # a checkpoint without them: the resumed pass is redone
    lrn.set(checkpoint=None, n_passes=5)
    lrn.opts.max_steps = None
    lrn.fit(progress=None)
    # 1 before the checkpoint (its counters keep it), then passes 2-4: pass 1 made none
    assert redo.model_.n_updates == 4
    np.testing.assert_allclose(redo.cluster_centers_, whole.model.centers.data, rtol=1e-12)


def test_minibatch_steps_allocate_nothing_after_the_first():
    import tracemalloc

    X, _, _ = blobs(8192, 8, 64, spread=1.0, seed=12)
    lrn = KMeans(64, algorithm="minibatch", random_state=0).learner(
        X, batch_size=4096, n_passes=1, reassign_every=0)
    lrn.opts.max_steps = 2
    lrn.fit(progress=None)  # first steps: buffers are made
    lrn.opts.max_steps = 20
    lrn.opts.n_passes = 10
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    lrn.fit(progress=None)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    assert lrn.step == 20
    assert peak < 64 * 4096 * 4 // 2, peak  # well below one k x batch one-hot matrix


def test_minibatch_reseeds_a_starved_centre():
    X, labels, _ = blobs(6000, 3, 4, spread=0.3, seed=13)
    init = np.vstack([_init(X, 3), np.full((1, 3), 1e4, np.float32)])
    km = KMeans(4, init=init, algorithm="minibatch", batch_size=300, max_iter=3,
                random_state=0).fit(X)  # seeded: an unseeded run's row order varies
    assert np.abs(km.cluster_centers_).max() < 1e3
    assert adjusted_rand_score(labels, km.labels_) == 1.0


def test_partial_fit_streams_chunks():
    X, labels, _ = blobs(6000, 4, 5, spread=0.3, seed=14)
    km = KMeans(5, random_state=0, batch_size=500)
    for chunk in np.array_split(X, 6):
        km.partial_fit(chunk)
    assert km.n_steps_ == 12 and km.labels_.shape == (1000,)
    assert adjusted_rand_score(labels, km.predict(X)) == 1.0
    with pytest.raises(ValueError, match="X has 3 features, but KMeans is expecting 4"):
        km.partial_fit(X[:100, :3])
    fitted = KMeans(5, random_state=0).fit(X)
    before = fitted.cluster_centers_.copy()
    fitted.partial_fit(X[:500])  # continues from fit's centres and cluster weights
    assert np.abs(fitted.cluster_centers_ - before).max() < 0.05


def test_sample_weight_counts_like_repeated_rows():
    X, _, _ = blobs(400, 3, 4, spread=1.0, seed=15)
    X = X.astype(np.float64)
    w = np.random.default_rng(0).integers(0, 4, len(X))
    weighted = KMeans(4, random_state=2).fit(X, sample_weight=w)
    repeated = KMeans(4, random_state=2).fit(np.repeat(X, w, axis=0))
    np.testing.assert_allclose(weighted.cluster_centers_, repeated.cluster_centers_,
                               rtol=1e-10)
    assert weighted.inertia_ == pytest.approx(repeated.inertia_, rel=1e-10)
    assert weighted.score(X, sample_weight=w) == pytest.approx(-weighted.inertia_, rel=1e-10)
    np.testing.assert_array_equal(weighted.predict(X, sample_weight=w), weighted.labels_)
    with pytest.raises(ValueError, match="expected \\(400,\\)"):
        KMeans(4).fit(X, sample_weight=w[:10])


def test_dtype_follows_the_input_and_dataframes_keep_names():
    pd = pytest.importorskip("pandas")
    from sklearn.exceptions import NotFittedError

    X, _, _ = blobs(500, 3, 3, spread=0.5, seed=16)
    for dt in (np.float32, np.float64):
        km = KMeans(3, random_state=0).fit(X.astype(dt))
        assert km.cluster_centers_.dtype == dt and km.transform(X[:5]).dtype == dt
    assert KMeans(3, random_state=0).fit(X.astype(np.int64)).cluster_centers_.dtype == np.float64
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    km = KMeans(3, random_state=0).fit(df)
    assert list(km.feature_names_in_) == ["a", "b", "c"] and km.n_features_in_ == 3
    assert list(km.get_feature_names_out()) == ["kmeans0", "kmeans1", "kmeans2"]
    for method in ("predict", "transform", "score"):
        with pytest.raises(NotFittedError):
            getattr(KMeans(3), method)(X)


@pytest.mark.parametrize("algorithm", ["lloyd", "minibatch"])
def test_pickle_joblib_and_save_round_trips(tmp_path, algorithm):
    import pickle

    import joblib

    X, _, _ = blobs(800, 4, 4, spread=1.0, seed=17)
    km = KMeans(4, random_state=0, algorithm=algorithm, batch_size=100).fit(X)
    km.learner(X)  # a live learner on the model: its threads and locks stay out of the state
    want_p, want_t = km.predict(X), km.transform(X)
    joblib.dump(km, tmp_path / "km.joblib")
    path = km.save(tmp_path / "km.bidlab")
    for back in (pickle.loads(pickle.dumps(km)), joblib.load(tmp_path / "km.joblib"),
                 KMeans.load(path)):
        assert type(back) is KMeans and back.get_params()["n_clusters"] == 4
        np.testing.assert_array_equal(back.predict(X), want_p)
        np.testing.assert_array_equal(back.transform(X), want_t)
        back.partial_fit(X[:200])  # and it trains on


def test_registered_for_bidlab_train():
    from bidlab.learn.model import MODELS

    assert MODELS["kmeans"] is KMeans
    assert {o.name for o in KMeans.PARAMS} == set(KMeans().get_params())


def test_partial_fit_after_a_learner_does_not_inherit_its_options(tmp_path):
    from bidlab.models.kmeans.minibatch import MinibatchKMeansModel

    X, _, _ = blobs(600, 3, 3, spread=0.5, seed=18)
    est = KMeans(3, random_state=0)
    est.learner(X, checkpoint=str(tmp_path / "ck"), n_passes=2).fit(progress=None)
    (tmp_path / "ck").unlink()
    est.partial_fit(X[:200])
    assert not (tmp_path / "ck").exists()
    assert isinstance(est.model_, MinibatchKMeansModel) and "checkpoint" not in est.model_.opts


def test_a_converged_lloyd_learner_stops_before_n_passes():
    X, _, _ = blobs(2000, 3, 3, spread=0.3, seed=19)
    lrn = KMeans(3, random_state=0).learner(X, n_passes=50, batch_size=500)
    lrn.fit(progress=None)
    assert lrn.model.converged and lrn.state == "done"
    assert len(lrn.summaries) == lrn.model.n_updates + 1 < 50  # one pass finds no change


def test_values_whose_squares_overflow_the_dtype_are_refused():
    X = np.random.default_rng(0).random((100, 3)).astype(np.float32) * 1e19
    with pytest.raises(ValueError, match=r"squared distances overflow float32.*float64"):
        KMeans(n_clusters=2, dtype=np.float32).fit(X)
    labels = KMeans(n_clusters=2, random_state=0).fit(X.astype(np.float64)).labels_
    assert labels.shape == (100,)


# -- scikit-learn's names and habits ------------------------------------------------------
def test_n_clusters_warm_start_verbose_and_summary(capsys):
    X, _, _ = blobs(600, 3, 4, seed=2)
    params = KMeans(n_clusters=4, n_jobs=1, verbose=2).get_params()
    assert params["n_clusters"] == 4 and "k" not in params and params["n_jobs"] == 1
    with pytest.raises(TypeError):
        KMeans(k=4)
    km = KMeans(n_clusters=4, max_iter=2, tol=0, random_state=0, warm_start=True,
                bounds=False).fit(X)
    first, centres = km.n_iter_, km.cluster_centers_.copy()
    assert capsys.readouterr() == ("", "")
    km.set_params(verbose=2).fit(X)  # continues from the fitted centres
    out, err = capsys.readouterr()
    assert out == "" and "pass " in err and "\r" not in err
    assert km.n_iter_ > first
    again = KMeans(n_clusters=4, init=centres, n_init=1, max_iter=2, tol=0,
                   bounds=False).fit(X)
    np.testing.assert_allclose(km.cluster_centers_, again.cluster_centers_, rtol=1e-6)
    text = km.summary()
    assert text.splitlines()[0].startswith("KMeans(") and "n_clusters=4" in text
    assert "cluster_centers_  4 x 3" in text and "inertia_" in text


@pytest.mark.parametrize("name", ["kmeans_k2_v0.bidlab", "kmeans_k2_v0.pkl"])
def test_files_written_with_the_old_name_k_still_load(name):
    """Written by the code before the rename, as KMeans(2, random_state=0)."""
    import pickle
    from pathlib import Path

    fixtures = Path(__file__).parent / "fixtures"
    inputs = np.load(fixtures / "sknames_v0_inputs.npz")
    if name.endswith(".pkl"):
        with open(fixtures / name, "rb") as fh:
            km = pickle.load(fh)
    else:
        km = KMeans.load(fixtures / name)
    params = km.get_params()
    assert params["n_clusters"] == 2 and "k" not in params and params["warm_start"] is False
    np.testing.assert_array_equal(km.predict(inputs["Xk"]), inputs["km_labels"])


def test_the_training_score_is_the_inertia_with_or_without_hamerly_bounds():
    """Each block's score measures its rows' distances (the bounds only bound them): the
    same scores with bounds as without, never rising from pass to pass."""
    from bidlab.datasets import blobs as make_blobs

    X = make_blobs(6000, 8, 12, spread=2.5, seed=3).X
    scores = {}
    for bounds in (True, False):
        km = KMeans(12, random_state=0, bounds=bounds, tol=0.0, max_iter=12)
        lrn = km.learner(X, batch_size=6000)
        lrn.fit(progress=None)
        scores[bounds] = lrn.history(as_frame=True)["score"].to_numpy()
        assert scores[bounds][-1] == pytest.approx(km.score(X) / X.shape[0], rel=1e-5)
    np.testing.assert_allclose(scores[True], scores[False], rtol=1e-5)
    assert np.all(np.diff(scores[True]) >= -1e-6 * np.abs(scores[True][:-1]))
