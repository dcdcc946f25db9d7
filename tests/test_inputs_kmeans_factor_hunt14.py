"""NMF and SFA fed inputs users pass: starts that are all zeros, pandas frames with
nullable columns, complex data."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from bidlab.models import NMF, SFA


@pytest.fixture
def X():
    return np.random.default_rng(0).random((20, 4))


@pytest.mark.parametrize("zero", ["W", "H"])
def test_nmf_custom_start_all_zero_is_refused(X, zero):
    """An all-zero W or H never leaves zero under multiplicative updates: the fit
    returned all-zero components silently; scikit-learn refuses such a start too."""
    W = np.zeros((20, 2)) if zero == "W" else np.ones((20, 2))
    H = np.zeros((2, 4)) if zero == "H" else np.ones((2, 4))
    with pytest.raises(ValueError, match=f"initial {zero} is all zeros"):
        NMF(2, init="custom", solver="mu", random_state=0).fit(X, W=W, H=H)
    with pytest.raises(ValueError, match=f"initial {zero} is all zeros"):
        NMF(2, init="custom", random_state=0).partial_fit(X, W=W, H=H)


def test_nmf_init_array_all_zero_is_refused(X):
    with pytest.raises(ValueError, match="all zeros"):
        NMF(2, init=np.zeros((2, 4)), solver="mu", random_state=0).fit(X)
    H = np.zeros((2, 4))
    H[0, 0] = 1.0  # one positive entry is a start
    assert NMF(2, init=H, solver="mu", max_iter=5, random_state=0).fit(X).components_.any()


def _ratings():
    rng = np.random.default_rng(0)
    R = np.ceil(rng.random((15, 8)) * 5)
    R[rng.random((15, 8)) < 0.4] = np.nan
    R[np.arange(15), np.arange(15) % 8] = 3.0  # every user has a rating
    return R


def test_sfa_nullable_frame_reads_na_as_missing():
    """A pandas frame of nullable Float64 columns (``convert_dtypes()``, a pivot of such
    ratings) marks missing ratings with pd.NA: SFA raised TypeError (float() of NAType)
    where NMF reads them as missing."""
    R = _ratings()
    frame = pd.DataFrame(R).astype("Float64")
    assert frame.isna().to_numpy().sum() == np.isnan(R).sum() > 0
    got = SFA(2, max_iter=3, random_state=0).fit(frame)
    want = SFA(2, max_iter=3, random_state=0).fit(R)
    np.testing.assert_allclose(got.user_factors_, want.user_factors_)
    assert got.score(frame) == pytest.approx(want.score(R))
    new = pd.DataFrame(R[:2]).astype("Float64")
    assert got.partial_fit_users(new).tolist() == [15, 16]


@pytest.mark.parametrize("form", ["dense", "csr", "list"])
def test_sfa_complex_ratings_are_refused(form):
    """Complex ratings lost their imaginary part with only a ComplexWarning; KMeans and
    NMF refuse them, as scikit-learn does."""
    R = np.nan_to_num(_ratings()) + 1j
    X = {"dense": R, "csr": sp.csr_matrix(R), "list": R.tolist()}[form]
    with pytest.raises(ValueError, match="complex"):
        SFA(2, max_iter=2, random_state=0).fit(X)
