"""GLM, LDA and LDAGibbs fed inputs users pass: huge values, text in a pandas Series, values
past the model dtype's range, NaN targets."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from bidlab.models import GLM, LDA, LDAGibbs


@pytest.fixture
def features():
    rng = np.random.default_rng(0)
    return rng.standard_normal((200, 6))


@pytest.fixture
def counts():
    return np.random.default_rng(0).poisson(0.5, (60, 20))


# ------------------------------------------------------------------------------------ LDA
@pytest.mark.parametrize("cls", [LDA, LDAGibbs])
def test_lda_scores_counts_beyond_int64(cls, counts):
    # document completion split counts of 1e30 through an int64 binomial: "n < 0"
    model = cls(n_components=3, n_passes=2, random_state=0).fit(counts)
    huge = model.score(counts * 1e30)
    assert np.isfinite(huge)
    assert huge == pytest.approx(model.score(counts * 1e18), abs=1e-6)
    assert np.isfinite(model.perplexity(sp.csr_matrix(counts * 1e30)))


@pytest.mark.parametrize("cls", [LDA, LDAGibbs])
def test_lda_refuses_a_series_of_texts_as_text(cls, counts):
    # df["text"] was told to reshape into a single document
    texts = pd.Series(["the cat sat", "a dog"], index=[10, 11])
    with pytest.raises(TypeError, match="holds text.*CountVectorizer"):
        cls(n_components=2).fit(texts)
    model = cls(n_components=2, n_passes=1, random_state=0).fit(counts)
    with pytest.raises(TypeError, match="transform_texts"):
        model.transform(texts)


# ------------------------------------------------------------------------------------ GLM
@pytest.mark.parametrize("sparse", [False, True])
def test_glm_standardizes_features_whose_squares_overflow(features, sparse):
    # their variance overflowed: scale 0, every feature zeroed, a constant model
    X = features * 1e160
    X = sp.csr_matrix(X) if sparse else X
    reg = GLM("linear", n_passes=3, random_state=0, standardize=True).fit(X, features[:, 0])
    clf = GLM("logistic", n_passes=3, random_state=0, standardize=True).fit(
        X, (features[:, 0] > 0).astype(int))
    assert reg.score(X, features[:, 0]) > 0.99
    assert clf.score(X, (features[:, 0] > 0).astype(int)) > 0.9


def test_glm_linear_targets_whose_squares_overflow(features):
    # the target's spread overflowed to inf: every prediction NaN
    y = features[:, 0] * 1e160
    reg = GLM("linear", n_passes=3, random_state=0).fit(features, y)
    pred = reg.predict(features)
    assert np.isfinite(pred).all()
    np.testing.assert_allclose(pred / 1e160, features[:, 0], atol=0.05)


def test_glm_names_values_past_the_float32_range(features):
    y = (features[:, 0] > 0).astype(int)
    # a finite float64 value past float32's range was called "NaN or infinity"
    with pytest.raises(ValueError, match=r"beyond the range of the model's float32.*"
                                         "dtype='float64'"):
        GLM(dtype=np.float32).fit(features * 1e300, y)
    clf = GLM(n_passes=2, random_state=0).fit(features.astype(np.float32), y)
    with pytest.raises(ValueError, match=r"X holds 1\.2\d*e\+299 \(row 0, column 0\)"):
        clf.predict(sp.csr_matrix(features[:3] * 1e300))
    with pytest.raises(ValueError, match="X contains NaN or infinity"):
        clf.predict(np.where(features > 2, np.inf, features).astype(np.float32))


def test_glm_nan_target_names_the_fix(features):
    y = np.where(np.arange(200) == 3, np.nan, features[:, 0])
    with pytest.raises(ValueError, match=r"row 3, column 0\): drop those rows or impute"):
        GLM("linear").fit(features, y)
    with pytest.raises(ValueError, match="drop those rows or impute"):
        GLM().fit(features, pd.Series((features[:, 0] > 0).astype(int), dtype="Int64")
                  .mask(np.arange(200) == 3))


@pytest.mark.parametrize("dtype", [object, "string"])
def test_glm_missing_labels_are_named(features, dtype):
    # a label column read with gaps failed inside np.unique: "'<' not supported between
    # instances of 'float' and 'str'" / "boolean value of NA is ambiguous"
    labels = pd.Series(np.where(features[:, 0] > 0, "yes", "no"), dtype=dtype)
    labels = labels.mask(np.arange(200) == 4)
    with pytest.raises(ValueError, match=r"missing label .*row 4, column 0\): drop those "
                                         "rows or fill"):
        GLM(n_passes=2).fit(features, labels)
    clf = GLM(n_passes=2, random_state=0).fit(features[5:], labels[5:])
    assert clf.score(features[5:], labels[5:]) > 0.9


def test_prediction_methods_name_a_data_source(features, counts):
    # predict / transform / score on a DataSource failed in the conversion: "float()
    # argument must be a string or a real number, not 'MemorySource'"
    from bidlab.learn import MemorySource

    y = (features[:, 0] > 0).astype(int)
    clf = GLM(n_passes=2, random_state=0).fit(features, y)
    lda = LDA(n_components=2, n_passes=1, random_state=0).fit(counts)
    gibbs = LDAGibbs(n_components=2, n_passes=1, random_state=0).fit(counts)
    calls = [(clf.predict, features), (clf.predict_proba, features),
             (lambda s: clf.score(s, y), features), (lda.transform, counts),
             (lda.score, counts), (gibbs.transform, counts)]
    for call, X in calls:
        with pytest.raises(TypeError, match="reads X in memory.*not a MemorySource: read "
                                            "the source's rows into memory"):
            call(MemorySource(X))
