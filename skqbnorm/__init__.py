"""skqbnorm: hubness-aware cross-modal retrieval for scikit-learn.

Querybank normalisers (transformers over query-by-gallery similarity matrices) and
Bayesian rerankers (estimators that refine an initial ranking by visual consistency).
"""

from .normalizers import (
    CSLS,
    Centering,
    DualBankSinkhornNormalization,
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
    SinkhornNormalization,
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

__version__ = "1.0.0"

from ._bank_search import QueryBankSearchCV
from ._compare import compare  # after the estimators: it reads the catalogue of them
from ._live import LiveQueryBank

__all__ = [
    "CSLS",
    "Centering",
    "DiffusionReranker",
    "DualBankSinkhornNormalization",
    "DualDynamicInvertedSoftmax",
    "DualInvertedSoftmax",
    "DualSoftmax",
    "DynamicInvertedSoftmax",
    "GloballyCorrected",
    "HingeReranker",
    "InvertedSoftmax",
    "KReciprocalReranker",
    "LiveQueryBank",
    "MutualProximity",
    "NearestNeighborNormalization",
    "PointwiseReranker",
    "PreferenceStrengthReranker",
    "QueryBankGate",
    "QueryBankSearchCV",
    "QueryBankZNorm",
    "QueryExpansionReranker",
    "RandomWalkReranker",
    "RerankerCV",
    "SinkhornNormalization",
    "__version__",
    "compare",
]
