"""KMeans passes every scikit-learn estimator check, for both algorithms."""

from __future__ import annotations

from typing import Any

from sklearn.utils.estimator_checks import parametrize_with_checks

from bidlab.models.kmeans import KMeans

_WEIGHT_CHECKS = ("check_sample_weight_equivalence_on_dense_data",
                  "check_sample_weight_equivalence_on_sparse_data")


def _expected_failures(est: Any) -> dict[str, str]:
    # Minibatch steps that stop early stop at another step on repeated rows than on the
    # weighted ones (the smoothing follows the row count), as scikit-learn's
    # MiniBatchKMeans does; without the early stop the two agree.
    if est.algorithm == "minibatch" and est.max_no_improvement is not None:
        return dict.fromkeys(_WEIGHT_CHECKS, "an early stop is not weight-equivalent")
    return {}


@parametrize_with_checks(
    [KMeans(), KMeans(algorithm="minibatch", batch_size=16, max_iter=20),
     KMeans(algorithm="minibatch", batch_size=16, max_iter=20, max_no_improvement=None)],
    expected_failed_checks=_expected_failures)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)
