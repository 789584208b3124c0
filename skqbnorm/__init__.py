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
    DiffusionReranker,
    HingeReranker,
    KReciprocalReranker,
    PointwiseReranker,
    PreferenceStrengthReranker,
    QueryExpansionReranker,
    RandomWalkReranker,
    RerankerCV,
)

__version__ = "0.1.0"

from ._compare import compare  # after the estimators: it reads the catalogue of them

__all__ = [
    "CSLS",
    "Centering",
    "DiffusionReranker",
    "DualBankSinkhornNormalisation",
    "DualDynamicInvertedSoftmax",
    "DualInvertedSoftmax",
    "DualSoftmax",
    "DynamicInvertedSoftmax",
    "GloballyCorrected",
    "HingeReranker",
    "InvertedSoftmax",
    "KReciprocalReranker",
    "MutualProximity",
    "NearestNeighborNormalization",
    "PointwiseReranker",
    "PreferenceStrengthReranker",
    "QueryBankGate",
    "QueryBankZNorm",
    "QueryExpansionReranker",
    "RandomWalkReranker",
    "RerankerCV",
    "SinkhornNormalisation",
    "__version__",
    "compare",
]
