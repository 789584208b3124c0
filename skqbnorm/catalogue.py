"""The catalogue: every method skqbnorm offers, with its one label.

The command line's ``--method`` names, the demo's rows and their labels are read
from :data:`METHODS`; a method is one entry here. A new normaliser is one class
(declaring its :class:`~skqbnorm.normalizers.Capabilities`) and one
:func:`register` call::

    from skqbnorm.catalogue import Method, register

    register("mine", Method("Mine", "my normaliser", MyNormaliser, ("k",)))

after which the command line, ``compare``, the index (through the class's declared
capabilities) and the tests that read :func:`normalizers` pick it up. Names are
looked up case-insensitively (:func:`get_method`). The rerankers are listed
apart, in :data:`RERANKERS`.
"""

import inspect
from collections import namedtuple
from dataclasses import fields
from typing import NamedTuple

from ._validation import renamed_names
from .normalizers import (
    CSLS,
    Capabilities,
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
)

__all__ = [
    "METHODS",
    "RERANKERS",
    "Method",
    "Settings",
    "get_method",
    "make_normalizer",
    "method_names",
    "normalizers",
    "register",
    "rerankers",
    "unregister",
]

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
    input a "both banks" method's fit takes (a key of :data:`GALLERY_BANK_OPTIONS`);
    ``iterative``: its fit iterates to a tolerance ``tol``, reports ``n_iter_`` and
    ``marginal_error_``, and converges further with a larger ``n_iter`` or ``tau``.
    """

    label: str
    summary: str
    normalizer: type = None
    options: tuple = ()
    fixed: tuple = ()
    data: str = "querybank"
    single_bank: str = None
    gallery_bank_input: str = "gallery_bank"
    iterative: bool = False

    @property
    def gated(self):
        """Whether the method wraps its normaliser in a :class:`QueryBankGate`."""
        return self.data == "gated querybank"


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
                 fixed=(("alpha", 0.5),)),
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
    "sn": Method("SN", "Sinkhorn normalisation", SinkhornNormalization, ("tau", "n_iter"),
                 iterative=True),
    "dbsn": Method("DBSN", "dual-bank Sinkhorn normalisation, needs --bank-gallery-bank-sims",
                   DualBankSinkhornNormalization, ("tau", "n_iter"), data="both banks",
                   single_bank="sn", gallery_bank_input="querybank_to_gallery_bank",
                   iterative=True),
    "dsl": Method("DSL", "dual softmax over the querybank", DualSoftmax, ("temperature",)),
    "dsl-transductive": Method(
        "DSL (transductive)", "dual softmax over the test queries themselves (see below)",
        DualSoftmax, ("temperature",), data="test queries"),
}
#: The rerankers, by name (estimators of ``fit_predict(features, initial_scores)``).
RERANKERS = {
    "hinge": HingeReranker,
    "preference-strength": PreferenceStrengthReranker,
    "pointwise": PointwiseReranker,
    "random-walk": RandomWalkReranker,
    "k-reciprocal": KReciprocalReranker,
    "diffusion": DiffusionReranker,
    "query-expansion": QueryExpansionReranker,
}

#: The ``data`` a method's normaliser is fitted on (see :class:`Method`).
DATA = ("querybank", "both banks", "test queries", "nothing", "gated querybank")


def register(name, method, *, replace=False):
    """Add a method to :data:`METHODS` under ``name`` (stored lower-case).

    Parameters
    ----------
    name : str
        The method's name, as ``--method`` takes it (any case).
    method : Method
        Its entry. ``method.normalizer`` must be a class that declares its
        :class:`~skqbnorm.normalizers.Capabilities`; a dual-bank class
        (``capabilities.gallery_bank``) needs ``data="both banks"`` and the
        matching ``gallery_bank_input``.
    replace : bool, default=False
        Whether ``name`` may replace an entry.

    Returns
    -------
    method : Method
        The registered entry.

    Examples
    --------
    >>> from skqbnorm import Centering
    >>> from skqbnorm.catalogue import Method, get_method, register, unregister
    >>> entry = register("Quarter", Method("quarter", "a quarter of the mean", Centering,
    ...                                    fixed=(("alpha", 0.25),)))
    >>> get_method("QUARTER") is entry
    True
    >>> unregister("quarter").label
    'quarter'
    """
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(f"name must be a non-empty string without surrounding spaces; got {name!r}.")
    if not isinstance(method, Method):
        raise TypeError(f"method must be a catalogue.Method; got {type(method).__name__}.")
    key = name.lower()
    if key in METHODS and not replace:
        raise ValueError(f"A method named {key!r} is registered already; pass replace=True to replace it.")
    if method.data not in DATA:
        raise ValueError(f"Method.data must be one of {DATA}; got {method.data!r}.")
    if method.normalizer is None:
        if method.data != "nothing":
            raise ValueError(f"A method without a normaliser has data='nothing'; got {method.data!r}.")
    else:
        capabilities = _capabilities(method.normalizer)
        takes_bank = capabilities.gallery_bank is not None
        if takes_bank != (method.data == "both banks") or (
            takes_bank and method.gallery_bank_input != capabilities.gallery_bank
        ):
            raise ValueError(
                f"{method.normalizer.__name__} declares gallery_bank={capabilities.gallery_bank!r}, "
                f"but the method has data={method.data!r} and gallery_bank_input="
                f"{method.gallery_bank_input!r}: a dual-bank normaliser has data='both banks' "
                "and its declared input."
            )
        parameters = inspect.signature(method.normalizer).parameters
        unknown = [n for n in (*method.options, *dict(method.fixed)) if n not in parameters]
        if unknown:
            raise ValueError(f"{method.normalizer.__name__} has no parameters {unknown}.")
        unknown = [n for n in method.options if n not in Settings._fields]
        if unknown:
            raise ValueError(f"Method.options must be among the settings {Settings._fields}; got {unknown}.")
    METHODS[key] = method
    return method


def unregister(name):
    """Remove a method from :data:`METHODS` (any case); returns its entry."""
    return METHODS.pop(_key(name))


def get_method(name):
    """The :class:`Method` registered under ``name``, in any case.

    Raises a ValueError listing the registered names when there is none.

    Examples
    --------
    >>> from skqbnorm.catalogue import get_method
    >>> get_method("CSLS").normalizer.__name__
    'CSLS'
    """
    return METHODS[_key(name)]


def method_names():
    """The registered method names, in registration order."""
    return list(METHODS)


def normalizers(**capabilities):
    """The normaliser classes of the registered methods whose capabilities match.

    Parameters
    ----------
    **capabilities
        Fields of :class:`~skqbnorm.normalizers.Capabilities` and the values
        wanted, e.g. ``normalizers(bias_form=True)`` or ``normalizers(index=None)``.

    Returns
    -------
    classes : list of type
        Each class once, in registration order.

    Examples
    --------
    >>> from skqbnorm.catalogue import normalizers
    >>> [cls.__name__ for cls in normalizers(gallery_bank="querybank_to_gallery_bank")]
    ['DualBankSinkhornNormalization']
    >>> [cls.__name__ for cls in normalizers(transductive=True)]
    ['DualSoftmax']
    """
    known = {field.name for field in fields(Capabilities)}
    unknown = sorted(set(capabilities) - known)
    if unknown:
        raise ValueError(f"Unknown capabilities {unknown}; they are {sorted(known)}.")
    found = []
    for method in METHODS.values():
        cls = method.normalizer
        if cls is None or cls in found:
            continue
        declared = _capabilities(cls)
        if all(getattr(declared, name) == value for name, value in capabilities.items()):
            found.append(cls)
    return found


def rerankers():
    """The reranker classes, in :data:`RERANKERS`' order."""
    return list(RERANKERS.values())


def _key(name):
    key = name.lower() if isinstance(name, str) else name
    if key not in METHODS:
        raise ValueError(f"No method named {name!r}; the methods are {', '.join(METHODS)}.")
    return key


def _capabilities(cls):
    declared = getattr(cls, "capabilities", None)
    if not isinstance(cls, type) or not isinstance(declared, Capabilities):
        raise TypeError(
            f"{cls!r} is not a normaliser class that declares its capabilities "
            "(a class attribute capabilities = Capabilities(...))."
        )
    return declared


#: The bank column of a method that uses no querybank, in the demo's table.
NO_BANK = {"nothing": "(none)", "test queries": "(test queries)"}


def make_normalizer(method, settings=DEFAULTS):
    """The normaliser a method name stands for (None for raw similarities).

    A setting left at None keeps the class default.
    """
    spec = METHODS[method]
    if spec.normalizer is None:
        return None
    given = {name: getattr(settings, name) for name in spec.options
             if getattr(settings, name) is not None}
    normalizer = spec.normalizer(**dict(spec.fixed), **given)
    return QueryBankGate(normalizer) if spec.gated else normalizer


def inner_normalizer(method, normalizer):
    """The normaliser that a gated method's :class:`QueryBankGate` wraps, or the normaliser itself."""
    return normalizer.normalizer if METHODS[method].gated else normalizer


def describe(method, normalizer):
    """The method's label with the values of its settable parameters."""
    spec = METHODS[method]
    if normalizer is None or not spec.options:
        return spec.label
    params = inner_normalizer(method, normalizer).get_params()
    values = ", ".join(f"{n}={params[n]:g}" for n in spec.options)
    if spec.label.endswith(")"):  # "DBNorm (dynamic)" -> "DBNorm (dynamic; beta1=...)"
        return f"{spec.label[:-1]}; {values})"
    return f"{spec.label} ({values})"


def class_default(method, name):
    """The default of parameter ``name`` of the normaliser ``method`` stands for."""
    return inspect.signature(METHODS[method].normalizer).parameters[name].default

__getattr__ = renamed_names(__name__, {"normalisers": "normalizers",
                                       "make_normaliser": "make_normalizer"})
