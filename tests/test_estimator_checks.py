"""scikit-learn's own estimator checks, run on every normaliser and reranker of the catalogue."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from skqbnorm import (
    CSLS,
    DualBankSinkhornNormalization,
    DualDynamicInvertedSoftmax,
    DualSoftmax,
    DynamicInvertedSoftmax,
    InvertedSoftmax,
    KReciprocalReranker,
    NearestNeighborNormalization,
    QueryExpansionReranker,
    SinkhornNormalization,
)
from skqbnorm.catalogue import METHODS, rerankers

pytestmark = pytest.mark.slow  # scikit-learn's checks, about 1,200 of them: not in the quick loop

# check_estimator feeds small random matrices (down to 1 column, 1 row), so CSLS and
# NNN run with k=1: with their default k they rightly refuse galleries or banks that
# small. The dual-bank normalisers are checked without a gallery bank (the checks
# pass none), where they equal IS and DIS. Every other estimator runs with its
# defaults. No check is skipped (scikit-learn's check_array_api_input skips itself
# unless SCIPY_ARRAY_API=1). The k-reciprocal and query-expansion rerankers run with
# initial="minmax": the checks' targets are not cosines.
SMALL_DATA_PARAMS = {CSLS: {"k": 1}, NearestNeighborNormalization: {"k": 1},
                     KReciprocalReranker: {"initial": "minmax"},
                     QueryExpansionReranker: {"initial": "minmax"}}

# Settings beside the catalogue's own (each method's fixed parameters at their defaults).
MORE_SETTINGS = [
    InvertedSoftmax(output="probability", beta=1.0),
    DynamicInvertedSoftmax(k=2),
    NearestNeighborNormalization(k=1, alpha=0.75),
    DualDynamicInvertedSoftmax(k=2),
    SinkhornNormalization(tau=1.0, n_iter=3),
    DualBankSinkhornNormalization(tau=1.0, n_iter=3),
    DualSoftmax(temperature=1.0),
]


def catalogue_estimators():
    """One estimator per distinct (class, fixed parameters) of the catalogue, then the
    rerankers: a registered method is checked without editing this file."""
    seen, estimators = set(), []
    for method in METHODS.values():
        if method.normalizer is None:
            continue
        key = (method.normalizer, tuple(sorted(method.fixed)))
        if key in seen:
            continue
        seen.add(key)
        params = {**SMALL_DATA_PARAMS.get(method.normalizer, {}), **dict(method.fixed)}
        estimators.append(method.normalizer(**params))
    return estimators + MORE_SETTINGS + [
        reranker(**SMALL_DATA_PARAMS.get(reranker, {})) for reranker in rerankers()]


ESTIMATORS = catalogue_estimators()


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible(estimator, check):
    check(estimator)
