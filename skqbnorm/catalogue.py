"""The catalogue: every method skqbnorm offers, with its one label.

The command line's ``--method`` names, the demo's rows and their labels are read
from :data:`METHODS`; a method is one entry here.
"""

import inspect
from collections import namedtuple
from typing import NamedTuple

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

__all__ = ["METHODS", "Method", "describe", "make_normaliser"]

#: The hyperparameter settings of the command line, each a parameter of the normalisers
#: that name it in ``Method.options``; None keeps the class default.
Settings = namedtuple(
    "Settings", "beta k alpha beta1 beta2 tau n_iter temperature", defaults=(None,) * 8
)
DEFAULTS = Settings()


class Method(NamedTuple):
    """A normaliser the command line offers.

    ``options``: its parameters set by the same-named settings (and shown in the
    label); ``fixed``: parameters its name fixes; ``data``: what it is fitted on, one
    of "querybank", "both banks" (the querybank and a gallery bank), "test queries"
    (transductive: the rows of --sims themselves) and "nothing"; ``single_bank``: the
    method it equals without a gallery bank; ``gallery_bank_input``: which gallery-bank
    input a "both banks" method's fit takes (a key of :data:`GALLERY_BANK_OPTIONS`).
    """

    label: str
    summary: str
    normaliser: type = None
    options: tuple = ()
    fixed: tuple = ()
    data: str = "querybank"
    single_bank: str = None
    gallery_bank_input: str = "gallery_bank"


#: The gallery-bank inputs, each a keyword of the dual-bank normalisers' fit, and the
#: option of ``skqbnorm evaluate`` that gives it.
GALLERY_BANK_OPTIONS = {
    "gallery_bank": ("--gallery-bank-sims", "the gallery-bank x gallery similarities"),
    "querybank_to_gallery_bank": ("--bank-gallery-bank-sims",
                                  "the querybank x gallery-bank similarities"),
}


METHODS = {
    "raw": Method("raw similarities", "the similarities of --sims as given", data="nothing"),
    "is": Method("IS", "Inverted Softmax (QB-Norm)", InvertedSoftmax, ("beta",)),
    "dis": Method("DIS", "Dynamic Inverted Softmax (QB-Norm)", DynamicInvertedSoftmax,
                  ("beta", "k")),
    "csls": Method("CSLS", "cross-domain similarity local scaling", CSLS, ("k",)),
    "gc": Method("GC", "globally corrected ranks", GloballyCorrected),
    "cent": Method("CENT", "centering, less the querybank's mean similarity", Centering),
    "dn": Method("DN", "distribution normalisation, less half that mean", Centering,
                 fixed=(("weight", 0.5),)),
    "nnn": Method("NNN", "nearest neighbor normalization", NearestNeighborNormalization,
                  ("k", "alpha")),
    "dis-gated": Method("gated DIS", "DIS, left raw when the querybank looks out of "
                        "domain for --sims (QueryBankGate)", DynamicInvertedSoftmax,
                        ("beta", "k"), data="gated querybank"),
    "nnn-gated": Method("gated NNN", "NNN, left raw when the querybank looks out of "
                        "domain for --sims (QueryBankGate)", NearestNeighborNormalization,
                        ("k", "alpha"), data="gated querybank"),
    "znorm": Method("z-norm", "querybank z-norm", QueryBankZNorm),
    "mp": Method("MP (Gaussian)", "mutual proximity, Gaussian", MutualProximity,
                 fixed=(("method", "gaussian"),)),
    "mp-empiric": Method("MP (empiric)", "mutual proximity, empiric", MutualProximity,
                         fixed=(("method", "empiric"),)),
    "dbnorm": Method("DBNorm", "dual-bank normalisation, IS over the querybank and the "
                     "gallery bank, needs --gallery-bank-sims", DualInvertedSoftmax,
                     ("beta1", "beta2"), data="both banks", single_bank="is"),
    "dbnorm-dynamic": Method("DBNorm (dynamic)", "DBNorm with DIS's gate, needs "
                             "--gallery-bank-sims", DualDynamicInvertedSoftmax,
                             ("beta1", "beta2", "k"), data="both banks", single_bank="dis"),
    "sn": Method("SN", "Sinkhorn normalisation", SinkhornNormalisation, ("tau", "n_iter")),
    "dbsn": Method("DBSN", "dual-bank Sinkhorn normalisation, needs --bank-gallery-bank-sims",
                   DualBankSinkhornNormalisation, ("tau", "n_iter"), data="both banks",
                   single_bank="sn", gallery_bank_input="querybank_to_gallery_bank"),
    "dsl": Method("DSL", "dual softmax over the querybank", DualSoftmax, ("temperature",)),
    "dsl-transductive": Method(
        "DSL (transductive)", "dual softmax over the test queries themselves (see below)",
        DualSoftmax, ("temperature",), data="test queries"),
}
#: The bank column of a method that uses no querybank, in the demo's table.
NO_BANK = {"nothing": "(none)", "test queries": "(test queries)"}


def make_normaliser(method, settings=DEFAULTS):
    """The normaliser a method name stands for (None for raw similarities).

    A setting left at None keeps the class default.
    """
    spec = METHODS[method]
    if spec.normaliser is None:
        return None
    given = {name: getattr(settings, name) for name in spec.options
             if getattr(settings, name) is not None}
    normaliser = spec.normaliser(**dict(spec.fixed), **given)
    return QueryBankGate(normaliser) if spec.data == "gated querybank" else normaliser


def gated(normaliser):
    """The normaliser a :class:`QueryBankGate` wraps, or the normaliser itself."""
    return normaliser.normaliser if isinstance(normaliser, QueryBankGate) else normaliser


def describe(method, normaliser):
    """The method's label with the values of its settable parameters."""
    spec = METHODS[method]
    if normaliser is None or not spec.options:
        return spec.label
    params = gated(normaliser).get_params()
    values = ", ".join(f"{n}={params[n]:g}" for n in spec.options)
    if spec.label.endswith(")"):  # "DBNorm (dynamic)" -> "DBNorm (dynamic; beta1=...)"
        return f"{spec.label[:-1]}; {values})"
    return f"{spec.label} ({values})"


def class_default(method, name):
    """The default of parameter ``name`` of the normaliser ``method`` stands for."""
    return inspect.signature(METHODS[method].normaliser).parameters[name].default
