"""KMeans passes every scikit-learn estimator check, for both algorithms."""

from __future__ import annotations

from sklearn.utils.estimator_checks import parametrize_with_checks

from bidlab.models.kmeans import KMeans


@parametrize_with_checks([KMeans(), KMeans(algorithm="minibatch", batch_size=16, max_iter=20)])
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)
