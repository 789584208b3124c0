"""skqbnorm: hubness-aware cross-modal retrieval for scikit-learn.

Querybank normalisers (transformers over query-by-gallery similarity matrices) and
Bayesian rerankers (estimators that refine an initial ranking by visual consistency).
"""

from .normalisers import (
    CSLS,
    Centering,
    DualBankSinkhornNormalisation,
    DualDynamicInvertedSoftmax,
    DualInvertedSoftmax,
    DualSoftmax,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    InvertedSoftmax,
    MutualProximity,
    NearestNeighborNormalization,
    QueryBankGate,
    QueryBankZNorm,
    SinkhornNormalisation,
)
from .rerankers import (
    HingeReranker,
    PointwiseReranker,
    PreferenceStrengthReranker,
    RandomWalkReranker,
    RerankerCV,
)

__version__ = "0.1.0"

__all__ = [
    "CSLS",
    "Centering",
    "DualBankSinkhornNormalisation",
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
    "QueryBankGate",
    "QueryBankZNorm",
    "RandomWalkReranker",
    "RerankerCV",
    "SinkhornNormalisation",
    "__version__",
]
