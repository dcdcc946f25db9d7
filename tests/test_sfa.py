"""SFA (ALS by conjugate gradient): the CG kernels against numpy.linalg.solve, a trained
model at the closed-form ALS fixed point, fold-in, the estimator's surface and bad inputs."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab import backend
from bidlab.kern import als
from bidlab.learn import Learner, MemorySource
from bidlab.models import SFA, load
from bidlab.models.sfa.model import SFAModel


def _ratings(n=60, d=40, k=3, density=0.3, seed=0):
    rng = np.random.default_rng(seed)
    full = rng.standard_normal((n, k)) @ rng.standard_normal((k, d)) + 3.0
    mask = rng.random((n, d)) < density
    mask[np.arange(n), rng.integers(0, d, n)] = True  # every user rated something
    rows, cols = np.nonzero(mask)
    return sp.csr_matrix((full[rows, cols], (rows, cols)), shape=(n, d))


def _counts(seed=0):
    R = _ratings(seed=seed)
    R.data = np.abs(np.round(R.data))
    R.data[R.data == 0] = 1.0
    return R


def _closed_form(S, O, l2, alpha, mu, bias):
    """Each row's normal equations solved by numpy.linalg.solve."""
    f = O.shape[1]
    Z = O.copy()
    if bias:
        Z[:, -1] = 1.0
    out = np.zeros((S.shape[0], f))
    for u in range(S.shape[0]):
        js = S.indices[S.indptr[u]: S.indptr[u + 1]]
        v = S.data[S.indptr[u]: S.indptr[u + 1]]
        if bias:
            A = Z[js].T @ Z[js] + l2 * np.eye(f)
            b = Z[js].T @ (v - mu - O[js, -1])
        else:
            A = O.T @ O + l2 * np.eye(f) + (Z[js].T * (alpha * v)) @ Z[js]
            b = Z[js].T @ (1.0 + alpha * v)
        out[u] = np.linalg.solve(A, b)
    return out


@pytest.mark.parametrize("bias", [True, False])
def test_cg_kernels_match_the_reference_and_reach_the_solve(bias):
    S = _counts(1)
    rng = np.random.default_rng(2)
    f = 4 + bias
    O = rng.standard_normal((S.shape[1], f))
    gram = None if bias else O.T @ O + 0.5 * np.eye(f)
    X0 = rng.standard_normal((S.shape[0], f)) * 0.1
    X1, X2 = X0.copy(), X0.copy()
    kw = dict(gram=gram, l2=0.5, alpha=2.0, mu=3.0, bias=bias)
    sc1, sc2 = (als.Scratch.new(S.shape[0], f, np.float64) for _ in range(2))
    als.solve_rows(S, O, X1, sc1, steps=2, **kw)
    als.solve_rows_reference(S, O, X2, sc2, steps=2, **kw)
    np.testing.assert_allclose(X1, X2, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sc1.err, sc2.err, rtol=1e-10)
    assert not np.allclose(X1, X0)
    als.solve_rows(S, O, X1, sc1, steps=3 * f, **kw)
    np.testing.assert_allclose(X1, _closed_form(S, O, 0.5, 2.0, 3.0, bias), atol=1e-8)


def test_cg_kernel_gives_the_same_bits_on_one_thread_and_on_all():
    """Blocks of rows go to whichever thread is idle; each row's result must not depend
    on which thread took it (users sorted by activity, the heaviest first)."""
    from bidlab.kern import adaptive

    rng = np.random.default_rng(3)
    n, d, f = 5 * als.BLOCK + 7, 50, 8
    counts = np.maximum(1, (d / np.arange(1, n + 1) ** 0.9).astype(int))
    rows = np.repeat(np.arange(n), counts)
    cols = np.concatenate([rng.choice(d, c, replace=False) for c in counts])
    S = sp.csr_matrix((rng.integers(1, 5, rows.size).astype(np.float32), (rows, cols)),
                      shape=(n, d))
    O = rng.standard_normal((d, f)).astype(np.float32)
    gram = O.T @ O + np.float32(0.1) * np.eye(f, dtype=np.float32)
    X0 = (rng.standard_normal((n, f)) * 0.1).astype(np.float32)
    out = []
    for policy in ("serial", "parallel", "parallel"):
        X = X0.copy()
        sc = als.Scratch.new(n, f, np.float32)
        with adaptive.policy(policy):
            als.solve_rows(S, O, X, sc, steps=3, gram=gram, alpha=1.0)
        out.append((X, sc.err.copy()))
    for X, err in out[1:]:
        np.testing.assert_array_equal(X, out[0][0])
        np.testing.assert_array_equal(err, out[0][1])
    ref = X0.copy()
    als.solve_rows_reference(S, O, ref, als.Scratch.new(n, f, np.float32), steps=3,
                             gram=gram, alpha=1.0)
    np.testing.assert_allclose(out[0][0], ref, rtol=1e-3, atol=1e-4)
    assert not np.allclose(out[0][0], X0)


def test_cg_steps_in_the_gram_eigenbasis_are_the_same_steps():
    """CG commutes with an orthogonal change of basis: the steps with O and X rotated
    into the eigenvectors of O'O + l2 I (a diagonal Gram matrix), rotated back, are the
    steps of the plain kernel; the kernel and the reference agree on the rotated form."""
    S = _counts(5)
    rng = np.random.default_rng(6)
    f = 6
    O = rng.standard_normal((S.shape[1], f))
    gram = O.T @ O + 0.5 * np.eye(f)
    lam, Q = als.rotation(gram)
    assert lam.shape == (1, f)
    np.testing.assert_allclose(Q @ Q.T, np.eye(f), atol=1e-12)
    np.testing.assert_allclose((Q * lam) @ Q.T, gram, atol=1e-10)
    X0 = rng.standard_normal((S.shape[0], f)) * 0.1
    plain, rot, ref = X0.copy(), X0 @ Q, X0 @ Q
    scs = [als.Scratch.new(S.shape[0], f, np.float64) for _ in range(3)]
    als.solve_rows(S, O, plain, scs[0], steps=3, gram=gram, alpha=2.0)
    als.solve_rows(S, O @ Q, rot, scs[1], steps=3, gram=lam, alpha=2.0, diagonal=True)
    als.solve_rows_reference(S, O @ Q, ref, scs[2], steps=3, gram=lam, alpha=2.0,
                             diagonal=True)
    np.testing.assert_allclose(rot @ Q.T, plain, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(ref, rot, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(scs[1].err, scs[0].err, rtol=1e-9)
    assert not np.allclose(plain, X0)


def test_rotated_sweeps_train_the_same_model(monkeypatch):
    """From ROTATE_MIN_F factors on, implicit sweeps run rotated (CPU): the factors match
    the unrotated sweeps', and a minibatch sweep still allocates nothing after warm-up."""
    import bidlab.models.sfa.model as sfa_model

    R = sp.csr_matrix(sp.vstack([_counts()] * 5))
    fits = {}
    for rmf in (4, 10_000):
        monkeypatch.setattr(sfa_model, "ROTATE_MIN_F", rmf)
        est = SFA(8, feedback="implicit", l2=0.5, max_iter=4, random_state=0,
                  batch_size=100).fit(R)
        assert est.model_.rotates == (rmf == 4)
        fits[rmf] = est
    a, b = fits[4], fits[10_000]
    np.testing.assert_allclose(a.user_factors_, b.user_factors_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(a.item_factors_, b.item_factors_, rtol=1e-8, atol=1e-10)
    monkeypatch.setattr(sfa_model, "ROTATE_MIN_F", 4)
    lrn = SFA(8, feedback="implicit", random_state=0, batch_size=100).learner(R, n_passes=2)
    lrn.fit(progress=None)
    lrn.set(n_passes=4)
    before = backend.allocations.snapshot()
    lrn.fit(progress=None)
    assert backend.allocations.snapshot() == before, "a rotated sweep allocated"


@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
def test_cg_als_equals_closed_form_als_sweep_by_sweep(feedback):
    """With n_cg = f steps CG solves each f x f system exactly, so the learner's sweeps are
    closed-form ALS sweeps (numpy.linalg.solve per row, users then items)."""
    R = _ratings() if feedback == "explicit" else _counts()
    bias = feedback == "explicit"
    f = 3 + bias
    V = np.random.default_rng(4).standard_normal((R.shape[1], f)) * 0.3
    mu = float(R.data.mean()) if bias else 0.0
    model = SFAModel(V, mu=mu, k=3, feedback=feedback, l2=0.5, alpha=2.0, n_cg=f)
    Learner(model, MemorySource(R, batch_size=R.shape[0]), n_passes=6).fit(progress=None)
    Rt = sp.csr_matrix(R.T)
    for _ in range(6):
        U = _closed_form(R, V, 0.5, 2.0, mu, bias)
        V = _closed_form(Rt, U, 0.5, 2.0, mu, bias)
    np.testing.assert_allclose(model.user_factors(), U, atol=1e-7)
    np.testing.assert_allclose(model.item_factors(), V, atol=1e-7)
    assert model.rmse[-1] < model.rmse[0]


@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
def test_fold_in_equals_solving_that_row(feedback):
    R = _ratings() if feedback == "explicit" else _counts()
    est = SFA(3, feedback=feedback, l2=0.5, alpha=2.0, max_iter=10, random_state=0).fit(R)
    m = est.model_
    V = m.item_factors()
    new = R[[4, 7]]
    ids = est.partial_fit_users(new)
    assert list(ids) == [R.shape[0], R.shape[0] + 1]
    want = _closed_form(sp.csr_matrix(new), V, 0.5, 2.0, m.mu, m.bias)
    np.testing.assert_allclose(m.user_factors()[ids], want, atol=1e-8)
    assert est.recommend(int(ids[0]), n=3)[0].shape == (3,)
    U = m.user_factors()
    cols = R[:, [1, 2]]
    item_ids = est.partial_fit_items(sp.vstack([cols, cols[[4, 7]]]).tocsr())
    want = _closed_form(sp.csr_matrix(sp.vstack([cols, cols[[4, 7]]]).T), U, 0.5, 2.0,
                        m.mu, m.bias)
    np.testing.assert_allclose(m.item_factors()[item_ids], want, atol=1e-8)


def test_predict_recommend_and_similar_items():
    R = _ratings()
    est = SFA(3, l2=0.5, max_iter=20, random_state=0).fit(R)
    users = np.repeat(np.arange(R.shape[0]), np.diff(R.indptr))
    pred = est.predict(users, R.indices)
    assert np.sqrt(np.mean((pred - R.data) ** 2)) == pytest.approx(-est.score(R))
    assert -est.score(R) < 0.5 * np.std(R.data)
    items, scores = est.recommend(0, n=5)
    assert not set(items) & set(R[0].indices)
    assert np.all(np.diff(scores) <= 0)
    full = est.predict(np.zeros(R.shape[1], int), np.arange(R.shape[1]))
    unseen = np.setdiff1d(np.arange(R.shape[1]), R[0].indices)
    assert set(items) == set(unseen[np.argsort(-full[unseen])[:5]])
    seen_too, _ = est.recommend(0, n=R.shape[1], filter_seen=False)
    assert len(seen_too) == R.shape[1]
    sim, cos = est.similar_items(3, n=4)
    assert 3 not in sim and np.all(cos <= 1 + 1e-9)
    V = est.item_factors_
    c = V @ V[3] / (np.linalg.norm(V, axis=1) * np.linalg.norm(V[3]))
    c[3] = -np.inf
    assert list(sim) == list(np.argsort(-c)[:4])


def test_bad_inputs_get_clear_errors():
    R = _ratings()
    est = SFA(3, max_iter=2, random_state=0).fit(R)
    with pytest.raises(ValueError, match="user id 60 is out of range"):
        est.predict([60], [0])
    with pytest.raises(ValueError, match="item id -1 is out of range"):
        est.predict([0], [-1])
    with pytest.raises(ValueError, match="user id 99 is out of range"):
        est.recommend(99)
    with pytest.raises(ValueError, match="n=41 items"):
        est.recommend(0, n=41, filter_seen=False)
    with pytest.raises(ValueError, match="n_components=61 is larger"):
        SFA(61).fit(R)
    empty = R.tolil()
    empty[5, :] = 0
    empty = sp.csr_matrix(empty)
    empty.eliminate_zeros()
    with pytest.raises(ValueError, match="no observed entry .* row 5"):
        SFA(3).fit(empty)
    dense = R.toarray()
    dense[dense == 0] = np.nan
    dense[2] = np.nan
    with pytest.raises(ValueError, match="first is row 2"):
        SFA(3).fit(dense)
    dup = sp.csr_matrix((np.array([4.0, 5.0, 3.0]), np.array([1, 1, 0]),
                         np.array([0, 2, 3])), shape=(2, 3))
    with pytest.raises(ValueError, match="duplicate"):
        SFA(1).fit(dup)
    with pytest.raises(ValueError, match="implicit feedback needs counts >= 0"):
        SFA(3, feedback="implicit").fit(R - sp.csr_matrix((np.full(R.nnz, 10.0), R.indices,
                                                             R.indptr), shape=R.shape))
    with pytest.raises(ValueError, match="'n_cg' parameter of SFA"):
        SFA(3, n_cg=0).fit(R)


def test_dense_nan_input_equals_the_sparse_one():
    R = _ratings()
    dense = np.full(R.shape, np.nan)
    rows = np.repeat(np.arange(R.shape[0]), np.diff(R.indptr))
    dense[rows, R.indices] = R.data
    a = SFA(3, max_iter=5, random_state=0).fit(R)
    b = SFA(3, max_iter=5, random_state=0).fit(dense)
    np.testing.assert_allclose(a.user_factors_, b.user_factors_)


def test_pickle_and_safe_save_load(tmp_path):
    R = _counts()
    est = SFA(3, feedback="implicit", max_iter=5, random_state=0).fit(R)
    back = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(back.recommend(2)[0], est.recommend(2)[0])
    path = est.save(tmp_path / "sfa.bidlab")
    again = load(path)
    assert isinstance(again, SFA)
    np.testing.assert_array_equal(again.item_factors_, est.item_factors_)
    np.testing.assert_array_equal(again.user_factors_, est.user_factors_)
    np.testing.assert_array_equal(again.recommend(2)[0], est.recommend(2)[0])


def test_live_learner_takes_l2_and_n_cg():
    R = _ratings()
    est = SFA(3, l2=0.5, random_state=0)
    lrn = est.learner(R, n_passes=3)
    lrn.fit(progress=None)
    before = est.user_factors_.copy()
    lrn.set(n_passes=6, l2=50.0, n_cg=1)
    lrn.fit(progress=None)
    assert est.model_.opts.l2 == 50.0 and est.model_.opts.n_cg == 1
    assert np.linalg.norm(est.user_factors_) < np.linalg.norm(before)
    assert len(est.rmse_) == 6


def test_minibatches_give_the_one_batch_sweep():
    R = _ratings()
    a = SFA(3, max_iter=4, random_state=0).fit(R)
    b = SFA(3, max_iter=4, batch_size=16, random_state=0).fit(R)
    np.testing.assert_allclose(a.user_factors_, b.user_factors_, atol=1e-12)
    np.testing.assert_allclose(a.item_factors_, b.item_factors_, atol=1e-12)


@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
def test_two_ranks_each_with_half_the_users_train_the_model_of_one_process(feedback,
                                                                           train_together):
    """The item step sums its CG terms over the ranks (and the mean of the ratings is the
    ranks' weighted mean): two learners on halves of the users give one learner's items."""
    from bidlab.learn.comm import ThreadGroup

    R = _ratings() if feedback == "explicit" else _counts()
    kw = dict(n_components=3, feedback=feedback, max_iter=5, random_state=0)
    one = SFA(**kw).fit(R)
    group = ThreadGroup(2, timeout=60)
    halves = [SFA(**kw) for _ in range(2)]
    h = R.shape[0] // 2
    train_together([halves[0].learner(R[:h], comm=group.comm(0), batch_size=16),
                    halves[1].learner(R[h:], comm=group.comm(1), batch_size=16)])
    for part in halves:
        np.testing.assert_allclose(part.item_factors_, one.item_factors_, rtol=1e-9,
                                   atol=1e-12)
        assert part.model_.mu == pytest.approx(one.model_.mu, rel=1e-14)
    np.testing.assert_allclose(np.vstack([p.user_factors_ for p in halves]),
                               one.user_factors_, rtol=1e-9, atol=1e-12)


def test_sweeps_allocate_nothing_after_warm_up(traced_allocations):
    R = _counts()
    R = sp.csr_matrix(sp.vstack([R] * 40))  # 2,400 users
    est = SFA(32, feedback="implicit", random_state=0, batch_size=600)
    lrn = est.learner(R, n_passes=2)
    lrn.fit(progress=None)
    lrn.set(n_passes=5)
    before = backend.allocations.snapshot()
    with traced_allocations() as trace:
        lrn.fit(progress=None)
    assert backend.allocations.snapshot() == before, "a sweep allocated after warm-up"
    factors = 600 * 32 * 8  # one minibatch's user factors: 150 KB
    assert trace.peak_bytes < factors // 4, trace


def test_bidlab_train_sfa_reads_a_ratings_csv(tmp_path):
    import subprocess
    import sys

    R = _counts()  # positive ratings (NMF takes them too)
    rows = np.repeat(np.arange(R.shape[0]), np.diff(R.indptr))
    lines = ["userId,movieId,rating,timestamp"] + [
        f"{u + 1},{j * 10},{v:.3f},{1000 + p}" for p, (u, j, v) in
        enumerate(zip(rows, R.indices, R.data, strict=True))]
    data = tmp_path / "ratings.csv"
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "sfa.bidlab"
    run = subprocess.run([sys.executable, "-m", "bidlab.cli", "train", "sfa", "--data",
                          str(data), "--n_components", "3", "--max_iter", "4", "--save",
                          str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "ratings, 60 x 40" in run.stderr + run.stdout
    est = load(out)
    assert isinstance(est, SFA) and est.n_iter_ == 4 and est.n_users_ == 60
    nmf = subprocess.run([sys.executable, "-m", "bidlab.cli", "train", "nmf", "--data",
                          str(data), "--n_components", "3", "--max_iter", "2"],
                         capture_output=True, text=True, timeout=300)
    assert nmf.returncode == 0, nmf.stderr
    from bidlab.cli.train_data import ratings_mask
    from bidlab.datasets.sniff import load as load_data
    from bidlab.models import NMF

    loaded = load_data(data)
    assert ratings_mask(loaded, NMF()) and not ratings_mask(loaded, SFA())


@pytest.mark.gpu
def test_sfa_on_the_gpu_matches_the_cpu():
    from bidlab import backend

    if not backend.gpu_available():
        pytest.skip("no CuPy/CUDA device here: the SFA GPU path is not tested (install "
                    "bidlab[gpu])")
    for feedback, R in (("explicit", _ratings()), ("implicit", _counts())):
        kw = dict(feedback=feedback, l2=0.5, max_iter=5, random_state=0)
        cpu = SFA(3, **kw).fit(R)
        gpu = SFA(3, device="gpu", **kw).fit(R)
        np.testing.assert_allclose(gpu.item_factors_, cpu.item_factors_, atol=1e-6)
        np.testing.assert_allclose(gpu.user_factors_, cpu.user_factors_, atol=1e-6)
        assert list(gpu.recommend(0, n=5)[0]) == list(cpu.recommend(0, n=5)[0])


def test_similar_items_can_leave_out_rarely_rated_items():
    R = _ratings()
    est = SFA(3, max_iter=5, random_state=0).fit(R)
    counts = np.bincount(R.indices, minlength=R.shape[1])
    floor = int(np.median(counts))
    items, _ = est.similar_items(0, n=5, min_ratings=floor)
    assert np.all(counts[items] >= floor)
    everything, _ = est.similar_items(0, n=R.shape[1] - 1)
    kept = [j for j in everything if counts[j] >= floor][:5]
    assert list(items) == kept
    with pytest.raises(ValueError, match="can be returned"):
        est.similar_items(0, n=R.shape[1] - 1, min_ratings=floor)


def test_a_run_resumed_mid_pass_gathers_every_row_before_an_item_step():
    R = _ratings()
    part = SFAModel(None, mu=float(R.data.mean()), k=3, random_state=0)
    lrn = Learner(part, MemorySource(R, batch_size=20), n_passes=3, max_steps=4)
    lrn.fit(progress=None)  # one pass and a minibatch of the next
    part._gather, part._by_item = [], None  # what a model loaded from a checkpoint has
    before = part.item_factors()
    lrn.set(max_steps=6)
    lrn.fit(progress=None)  # the rest of pass 2: only 2 of its 3 minibatches gathered
    np.testing.assert_array_equal(part.item_factors(), before)
    lrn.set(max_steps=None)
    lrn.fit(progress=None)
    assert part.by_item() is not None
    assert part.by_item().nnz == R.nnz
    np.testing.assert_allclose(sp.csr_matrix(part.by_item().T).toarray(), R.toarray())
    assert not np.allclose(part.item_factors(), before)
