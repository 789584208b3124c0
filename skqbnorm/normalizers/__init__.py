"""Querybank normalisers: scikit-learn transformers that rescale query similarities."""

from ._base import BankPasses, QueryBankNormalizer
from ._bias import BiasFormMixin
from ._capabilities import Capabilities
from ._centering import Centering
from ._csls import CSLS
from ._dbnorm import DualDynamicInvertedSoftmax, DualInvertedSoftmax
from ._dual_softmax import DualSoftmax
from ._gc import GloballyCorrected
from ._index_serving import IndexServing, index_serving
from ._mutual_proximity import MutualProximity, QueryBankZNorm
from ._nnn import NearestNeighborNormalization
from ._querybank_gate import QueryBankGate
from ._sinkhorn import DualBankSinkhornNormalization, SinkhornNormalization
from ._softmax import DynamicInvertedSoftmax, InvertedSoftmax

__all__ = [
    "CSLS",
    "BankPasses",
    "BiasFormMixin",
    "Capabilities",
    "Centering",
    "DualBankSinkhornNormalization",
    "DualDynamicInvertedSoftmax",
    "DualInvertedSoftmax",
    "DualSoftmax",
    "DynamicInvertedSoftmax",
    "GloballyCorrected",
    "IndexServing",
    "InvertedSoftmax",
    "MutualProximity",
    "NearestNeighborNormalization",
    "QueryBankGate",
    "QueryBankNormalizer",
    "QueryBankZNorm",
    "SinkhornNormalization",
    "index_serving",
]
