"""skqbnorm: hubness-aware cross-modal retrieval for scikit-learn.

Querybank normalisers (transformers over query-by-gallery similarity matrices) and
Bayesian rerankers (estimators that refine an initial ranking by visual consistency).
"""

from .normalisers import (
    CSLS,
    Centering,
    DualDynamicInvertedSoftmax,
    DualInvertedSoftmax,
    DualSoftmax,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    InvertedSoftmax,
    MutualProximity,
    NearestNeighborNormalization,
    QueryBankZNorm,
    SinkhornNormalisation,
)
from .rerankers import (
    HingeReranker,
    PointwiseReranker,
    PreferenceStrengthReranker,
    RandomWalkReranker,
)

__version__ = "0.1.0"

__all__ = [
    "CSLS",
    "Centering",
    "DualDynamicInvertedSoftmax",
    "DualInvertedSoftmax",
    "DualSoftmax",
    "DynamicInvertedSoftmax",
    "GloballyCorrected",
    "HingeReranker",
    "InvertedSoftmax",
    "MutualProximity",
    "NearestNeighborNormalization",
    "PointwiseReranker",
    "PreferenceStrengthReranker",
    "QueryBankZNorm",
    "RandomWalkReranker",
    "SinkhornNormalisation",
    "__version__",
]
