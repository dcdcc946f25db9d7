"""LDA estimators used the scikit-learn way: parameters set between fits reach the model
that ``partial_fit`` / ``fit(warm_start=True)`` continue, and ``transform`` rows sum to 1."""

from __future__ import annotations

import numpy as np
import pytest

from bidlab.models import LDA, LDAGibbs

MAKERS = {"vb": LDA, "gibbs": LDAGibbs}


@pytest.fixture(scope="module")
def counts() -> np.ndarray:
    return np.random.default_rng(0).poisson(0.5, size=(120, 30))


@pytest.mark.parametrize("kind", list(MAKERS))
def test_warm_start_fit_uses_the_parameters_set_since(counts, kind) -> None:
    est = MAKERS[kind](n_components=3, n_passes=1, warm_start=True, random_state=0).fit(counts)
    est.set_params(alpha=0.7, beta=0.3, e_iters=2, kappa=0.9, tau0=3.0)
    est.fit(counts)
    opts = est.model_.opts
    assert (opts.alpha, opts.beta, opts.e_iters) == (0.7, 0.3, 2)
    assert float(est.model_.alpha_m.data.ravel()[0]) == pytest.approx(0.7)
    assert (est.updater_.opts.kappa, est.updater_.opts.tau0) == (0.9, 3.0)
    assert est.n_passes_done_ == 2  # still the continued model


@pytest.mark.parametrize("kind", list(MAKERS))
def test_partial_fit_uses_the_parameters_set_since(counts, kind) -> None:
    est = MAKERS[kind](n_components=3, random_state=0).partial_fit(counts)
    est.set_params(alpha=0.4, kappa=0.8)
    est.partial_fit(counts)
    assert est.model_.opts.alpha == 0.4 and est.updater_.opts.kappa == 0.8
    assert est.get_params()["alpha"] == est.model_.opts.alpha


@pytest.mark.parametrize("change", [{"n_components": 4}, {"method": "batch"},
                                    {"dtype": np.float64}])
def test_a_continued_model_refuses_a_parameter_it_cannot_follow(counts, change) -> None:
    est = LDA(n_components=3, n_passes=1, warm_start=True, random_state=0).fit(counts)
    est.set_params(**change)
    name = next(iter(change))
    with pytest.raises(ValueError, match=f"{name} .*changed since the model was fitted"):
        est.fit(counts)
    with pytest.raises(ValueError, match="warm_start=False"):
        est.partial_fit(counts)
    est.set_params(warm_start=False).fit(counts)  # a new model takes it
    assert est.components_.shape[0] == est.n_components


def test_an_equal_value_of_another_type_is_no_change(counts) -> None:
    est = LDA(n_components=3, n_passes=1, warm_start=True, random_state=0).fit(counts)
    est.set_params(n_components=np.int64(3), alpha=0.1).fit(counts)
    assert est.n_passes_done_ == 2


@pytest.mark.parametrize("kind", list(MAKERS))
@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_transform_rows_sum_to_one_to_the_output_precision(counts, kind, dtype) -> None:
    est = MAKERS[kind](n_components=5, n_passes=2, random_state=0).fit(counts)
    theta = est.transform(counts.astype(dtype))
    assert theta.dtype == np.float64
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-12)
    theta32 = est.transform(counts.astype(np.float32))
    np.testing.assert_allclose(theta32.sum(axis=1), 1.0, rtol=1e-6)


@pytest.mark.parametrize("kind", list(MAKERS))
def test_a_value_tuned_on_the_running_learner_stays_when_training_continues(counts,
                                                                          kind) -> None:
    est = MAKERS[kind](n_components=3, random_state=0).partial_fit(counts)
    lr = est.learner(counts, n_passes=1)
    lr.set(alpha=0.33)  # what a dashboard slider does
    lr.fit(progress=None)
    est.partial_fit(counts)
    assert est.model_.opts.alpha == pytest.approx(0.33)  # not reset to the parameter
    est.set_params(alpha=0.2).partial_fit(counts)  # a parameter set since: it wins
    assert est.model_.opts.alpha == pytest.approx(0.2)


def test_score_on_documents_too_short_to_complete_says_why(counts) -> None:
    est = LDA(n_components=3, n_passes=1, random_state=0).fit(counts)
    one_token = np.eye(1, counts.shape[1], dtype=int)
    for seed in range(8):  # the one token falls in the observed half for some seeds
        try:
            est.score(one_token, random_state=seed)
        except ValueError as exc:
            assert "needs documents of several tokens" in str(exc)
            break
    else:
        pytest.fail("no seed put the only token in the observed half")
