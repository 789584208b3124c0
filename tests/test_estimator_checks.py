"""scikit-learn's own estimator checks, run on every normaliser and reranker."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from skqbnorm import (
    CSLS,
    Centering,
    DualBankSinkhornNormalisation,
    DualDynamicInvertedSoftmax,
    DualInvertedSoftmax,
    DualSoftmax,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    HingeReranker,
    InvertedSoftmax,
    MutualProximity,
    NearestNeighborNormalization,
    PointwiseReranker,
    PreferenceStrengthReranker,
    QueryBankZNorm,
    RandomWalkReranker,
    SinkhornNormalisation,
)

pytestmark = pytest.mark.slow  # scikit-learn's checks, about 1,200 of them: not in the quick loop

# check_estimator feeds small random matrices (down to 1 column, 1 row), so CSLS and
# NNN run with k=1: with their default k they rightly refuse galleries or banks that
# small. The dual-bank normalisers are checked without a gallery bank (the checks
# pass none), where they equal IS and DIS. Every other estimator runs with its
# defaults. No check is skipped (scikit-learn's check_array_api_input skips itself
# unless SCIPY_ARRAY_API=1).
ESTIMATORS = [
    InvertedSoftmax(),
    InvertedSoftmax(output="probability", beta=1.0),
    DynamicInvertedSoftmax(),
    DynamicInvertedSoftmax(k=2),
    CSLS(k=1),
    GloballyCorrected(),
    Centering(),
    Centering(weight=0.5),
    NearestNeighborNormalization(k=1),
    NearestNeighborNormalization(k=1, alpha=0.75),
    QueryBankZNorm(),
    MutualProximity(),
    MutualProximity(method="empiric"),
    DualInvertedSoftmax(),
    DualDynamicInvertedSoftmax(),
    DualDynamicInvertedSoftmax(k=2),
    SinkhornNormalisation(),
    SinkhornNormalisation(tau=1.0, n_iter=3),
    DualBankSinkhornNormalisation(),
    DualBankSinkhornNormalisation(tau=1.0, n_iter=3),
    DualSoftmax(),
    DualSoftmax(temperature=1.0),
    HingeReranker(),
    PreferenceStrengthReranker(),
    PointwiseReranker(),
    RandomWalkReranker(),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible(estimator, check):
    check(estimator)
