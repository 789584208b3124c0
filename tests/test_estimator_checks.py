"""scikit-learn's own estimator checks, run on every normaliser and reranker."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from skqbnorm import (
    CSLS,
    Centering,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    HingeReranker,
    InvertedSoftmax,
    PointwiseReranker,
    PreferenceStrengthReranker,
    RandomWalkReranker,
)

# check_estimator feeds small random matrices (down to 1 column, 1 row), so CSLS
# runs with k=1: with its default k=10 it rightly refuses galleries of fewer than
# 10 items. Every other estimator runs with its defaults. No check is skipped
# (scikit-learn's check_array_api_input skips itself unless SCIPY_ARRAY_API=1).
ESTIMATORS = [
    InvertedSoftmax(),
    InvertedSoftmax(output="probability", beta=1.0),
    DynamicInvertedSoftmax(),
    DynamicInvertedSoftmax(k=2),
    CSLS(k=1),
    GloballyCorrected(),
    Centering(),
    HingeReranker(),
    PreferenceStrengthReranker(),
    PointwiseReranker(),
    RandomWalkReranker(),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible(estimator, check):
    check(estimator)
