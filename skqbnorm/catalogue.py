"""The catalogue: every method skqbnorm offers, with its one label.

The command line's ``--method`` names, the demo's rows and their labels are read
from :data:`METHODS`; a method is one entry here. A new normaliser is one class
(declaring its :class:`~skqbnorm.normalizers.Capabilities`) and one
:func:`register` call::

    from skqbnorm.catalogue import Method, register

    register("mine", Method("Mine", "my normaliser", MyNormaliser, ("k",)))

after which the command line, ``compare``, the index (through the class's declared
capabilities) and the tests that read :func:`normalizers` pick it up. Names are
looked up case-insensitively (:func:`get_method`). A new reranker is one class and
one call, ``register("mine", MyReranker)``; it is listed in :data:`RERANKERS` and by
:func:`rerankers`. The entries skqbnorm ships are registered by the same
:func:`register`, so they pass the same checks as yours.
"""

import inspect
import re
from collections import namedtuple
from dataclasses import fields
from typing import NamedTuple

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
from .normalizers._capabilities import GALLERY_BANK_INPUTS, INDEX_SERVING, ITEM_BIAS_FORMS
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
Settings.__doc__ = """The hyperparameter settings of the command line, one field a parameter.

Each is given to the normalisers that name it in their method's ``options``;
None keeps the class default.

Parameters
----------
beta, k, alpha, beta1, beta2, tau, n_iter, temperature : float, int or None, default=None
    The same-named parameter of the normaliser.

Examples
--------
>>> from skqbnorm.catalogue import Settings, make_normalizer
>>> make_normalizer("DIS", Settings(beta=5, k=3))
DynamicInvertedSoftmax(beta=5, k=3)
"""
DEFAULTS = Settings()


class Method(NamedTuple):
    """A normaliser the command line offers: one entry of :data:`METHODS`.

    Parameters
    ----------
    label : str
        The name shown in tables, followed by its settings.
    summary : str
        What the method is, in a few words, for ``--help``.
    normalizer : type, default=None
        The normaliser class; None for the raw similarities.
    options : tuple of str, default=()
        Its parameters set by the same-named :class:`Settings` (and shown in the label).
    fixed : tuple of (str, object) pairs, default=()
        Parameters its name fixes.
    data : str, default="querybank"
        What it is fitted on: "querybank", "gated querybank", "both banks" (the
        querybank and a gallery bank), "test queries" (transductive: the rows of
        ``--sims`` themselves) or "nothing".
    single_bank : str, default=None
        The method it equals without a gallery bank.
    gallery_bank_input : str, default="gallery_bank"
        Which gallery-bank input a "both banks" method's fit takes (a key of
        :data:`GALLERY_BANK_OPTIONS`).
    iterative : bool, default=False
        Whether its fit iterates to a tolerance ``tol``, reports ``n_iter_`` and
        ``marginal_error_``, and converges further with a larger ``n_iter`` or ``tau``.

    Examples
    --------
    >>> from skqbnorm.catalogue import get_method
    >>> method = get_method("DIS")
    >>> method.label, method.options, method.data
    ('DIS', ('beta', 'k'), 'querybank')
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


#: The methods skqbnorm ships, registered below through :func:`register`.
_SHIPPED_METHODS = {
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
#: The rerankers skqbnorm ships, registered below through :func:`register`.
_SHIPPED_RERANKERS = {
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
#: The registered methods, by lower-case name, in registration order.
METHODS = {}
#: The registered rerankers, by lower-case name (estimators of
#: ``fit_predict(features, initial_scores, groups)``), in registration order.
RERANKERS = {}
#: The names skqbnorm ships: :func:`unregister` and ``replace=True`` leave them alone
#: (empty while the shipped entries register).
BUILT_IN = frozenset()
#: What a method list can select: a letter or digit, then letters, digits, ``_ . + -``.
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.+-]*")
#: The values :func:`normalizers` can match, by capability (the booleans: True, False).
CAPABILITY_VALUES = {"gallery_bank": GALLERY_BANK_INPUTS, "index": INDEX_SERVING, "item_bias": ITEM_BIAS_FORMS}


def register(name, method, *, replace=False):
    """Add a method to :data:`METHODS`, or a reranker to :data:`RERANKERS`, under ``name``.

    The name is stored lower-case; methods and rerankers share one set of names.

    Parameters
    ----------
    name : str
        The name, as ``--method`` and ``compare(methods=...)`` take a method's (any
        case): a letter or digit, then letters, digits and ``_ . + -``; not ``"all"``.
    method : Method or type
        A normaliser's entry, or a reranker class. ``method.normalizer`` must be a
        class with ``fit`` and ``transform`` that declares its
        :class:`~skqbnorm.normalizers.Capabilities`; a dual-bank class
        (``capabilities.gallery_bank``) needs ``data="both banks"``, the matching
        ``gallery_bank_input`` and a registered ``single_bank``. Only a method without
        a normaliser (raw similarities) has ``data="nothing"``. A reranker class is a
        scikit-learn estimator with ``fit(X, y, groups)`` and ``fit_predict(X, y,
        groups)`` whose parameters all have defaults.
    replace : bool, default=False
        Whether ``name`` may replace an entry registered earlier. The entries
        skqbnorm ships cannot be replaced.

    Returns
    -------
    method : Method or type
        The registered entry.

    Examples
    --------
    >>> from skqbnorm import Centering, KReciprocalReranker
    >>> from skqbnorm.catalogue import Method, get_method, register, rerankers, unregister
    >>> entry = register("Quarter", Method("quarter", "a quarter of the mean", Centering,
    ...                                    fixed=(("alpha", 0.25),)))
    >>> get_method("QUARTER") is entry
    True
    >>> unregister("quarter").label
    'quarter'
    >>> class MyReranker(KReciprocalReranker):
    ...     pass
    >>> register("mine", MyReranker) in rerankers()
    True
    >>> unregister("mine").__name__
    'MyReranker'
    """
    key = _check_name(name)
    table = _table_for(method)
    if not isinstance(replace, bool):
        raise ValueError(f"replace must be True or False; got replace={replace!r}.")  # noqa: TRY004
    if key in BUILT_IN:
        raise ValueError(f"name {key!r} is a {_kind(key)} skqbnorm ships; it cannot be "
                         "replaced. Register yours under another name.")
    if key in _other_table(table):
        raise ValueError(f"name {key!r} is registered already as a {_kind(key)}; methods and "
                         "rerankers share one set of names.")
    if key in table and not replace:
        raise ValueError(f"name {key!r} is registered already; pass replace=True to replace it.")
    _check_entry(method)
    table[key] = method
    return method


def _table_for(entry):
    """The table an entry registers in, or a TypeError for an entry of neither kind."""
    if isinstance(entry, Method):
        return METHODS
    if isinstance(entry, type) and not isinstance(getattr(entry, "capabilities", None),
                                                  Capabilities):
        return RERANKERS
    raise TypeError(
        "method must be a catalogue.Method (a normaliser's entry: Method(label, summary, "
        f"cls)) or a reranker class; got {entry!r}.")


def _other_table(table):
    return RERANKERS if table is METHODS else METHODS


def _kind(key):
    return "reranker" if key in RERANKERS else "method"


def _check_entry(entry):
    """The checks of a normaliser's entry or of a reranker class: one error on the first
    field that no evaluation could use."""
    if isinstance(entry, Method):
        _check_fields(entry)
        if entry.normalizer is not None:
            _check_normalizer(entry)
    else:
        _check_reranker(entry)


def _check_name(name):
    """``name`` lower-cased, or a ValueError saying what a method list could not select."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name.lower()):
        raise ValueError(
            f"name must be a string of letters, digits and '_ . + -', starting with a letter "
            f"or digit, so that a method list can select it; got name={name!r}.")
    key = name.lower()
    if key == "all":
        raise ValueError(f"name {name!r} is reserved: a method list reads it as every method.")
    return key


def _check_fields(method):
    """A ValueError naming the first field of ``method`` of the wrong kind (a ValueError,
    as scikit-learn's parameter checks refuse a value of the wrong type)."""
    if not isinstance(method.label, str) or not method.label.strip():
        raise ValueError(f"Method.label must be a non-empty string; got {method.label!r}.")
    if not isinstance(method.summary, str):
        raise ValueError(  # noqa: TRY004
            f"Method.summary must be a string; got summary={method.summary!r}.")
    for field in ("options", "fixed"):
        value = getattr(method, field)
        if isinstance(value, str) or not isinstance(value, (tuple, list)):
            raise ValueError(  # noqa: TRY004
                f"Method.{field} must be a tuple; got {field}={value!r}.")
    if not all(isinstance(option, str) for option in method.options):
        raise ValueError(f"Method.options must be setting names; got {method.options!r}.")
    if not all(isinstance(pair, (tuple, list)) and len(pair) == 2 and isinstance(pair[0], str)
               for pair in method.fixed):
        raise ValueError(f"Method.fixed must be (parameter name, value) pairs; got "
                         f"{method.fixed!r}.")
    if not isinstance(method.data, str) or method.data not in DATA:
        raise ValueError(f"Method.data must be one of {DATA}; got {method.data!r}.")
    if (method.normalizer is None) != (method.data == "nothing"):
        raise ValueError(
            f"Method.data='nothing' is for a method without a normaliser, and such a method "
            f"has data='nothing' (its rows are the similarities as given); got "
            f"normalizer={method.normalizer!r} and data={method.data!r}.")
    if not isinstance(method.iterative, bool):
        raise ValueError(  # noqa: TRY004
            f"Method.iterative must be True or False; got {method.iterative!r}.")


def _check_normalizer(method):
    """A ValueError (a TypeError for a class of the wrong kind) on a normaliser ``method``
    cannot fit, score or set as its entry says."""
    cls = method.normalizer
    capabilities = _capabilities(cls)
    missing = [name for name in ("fit", "transform") if not callable(getattr(cls, name, None))]
    if missing:
        raise TypeError(f"Method.normalizer {cls.__name__} has no {' or '.join(missing)}; a "
                        "normaliser is a scikit-learn transformer.")
    takes_bank = capabilities.gallery_bank is not None
    if takes_bank != (method.data == "both banks") or (
        takes_bank and method.gallery_bank_input != capabilities.gallery_bank
    ):
        raise ValueError(
            f"{cls.__name__} declares gallery_bank={capabilities.gallery_bank!r}, "
            f"but the method has data={method.data!r} and gallery_bank_input="
            f"{method.gallery_bank_input!r}: a dual-bank normaliser has data='both banks' "
            "and its declared input."
        )
    if takes_bank and (not isinstance(method.single_bank, str)
                       or method.single_bank.lower() not in METHODS):
        raise ValueError(
            f"Method.single_bank must name the registered method a dual-bank method equals "
            f"without a gallery bank; got single_bank={method.single_bank!r}.")
    parameters = inspect.signature(cls).parameters
    unknown = [n for n in (*method.options, *dict(method.fixed)) if n not in parameters]
    if unknown:
        raise ValueError(f"{cls.__name__} has no parameters {unknown}.")
    unknown = [n for n in method.options if n not in Settings._fields]
    if unknown:
        raise ValueError(f"Method.options must be among the settings {Settings._fields}; got {unknown}.")
    if method.iterative and "tol" not in parameters:
        raise ValueError(f"Method.iterative is for a normaliser iterating to a tolerance tol; "
                         f"{cls.__name__} has no parameter tol.")


def _check_reranker(cls):
    """A TypeError for a class that is no reranker; a ValueError for one the estimator
    checks and a comparison cannot build from its defaults."""
    missing = [name for name in ("fit", "fit_predict", "get_params")
               if not callable(getattr(cls, name, None))]
    if missing:
        raise TypeError(f"The reranker {cls.__name__} has no {' or '.join(missing)}; a reranker "
                        "is a scikit-learn estimator with fit(X, y, groups) and fit_predict.")
    for method in ("fit", "fit_predict"):
        if "groups" not in inspect.signature(getattr(cls, method)).parameters:
            raise ValueError(f"The reranker {cls.__name__}.{method} takes no groups; a reranker "
                             "reranks each list (group) of items apart.")
    required = [name for name, parameter in inspect.signature(cls).parameters.items()
                if parameter.default is inspect.Parameter.empty
                and parameter.kind not in (inspect.Parameter.VAR_POSITIONAL,
                                           inspect.Parameter.VAR_KEYWORD)]
    if required:
        raise ValueError(f"The reranker {cls.__name__} has parameters without a default "
                         f"{required}; a registered reranker is built from its defaults.")


def unregister(name):
    """Remove a method or a reranker registered with :func:`register`.

    The entries skqbnorm ships are not removed (raw similarities are every
    comparison's baseline): choose the methods to compare with ``methods=`` instead.

    Parameters
    ----------
    name : str
        The method's or reranker's name, in any case.

    Returns
    -------
    method : Method or type
        The removed entry.

    Examples
    --------
    >>> from skqbnorm import Centering
    >>> from skqbnorm.catalogue import Method, register, unregister
    >>> entry = register("tenth", Method("tenth", "a tenth of the mean", Centering,
    ...                                  fixed=(("alpha", 0.1),)))
    >>> unregister("TENTH") is entry
    True
    >>> unregister("raw")
    Traceback (most recent call last):
    ...
    ValueError: name 'raw' is a method skqbnorm ships and cannot be unregistered; leave it out of a comparison with methods=.
    """
    key = _key(name, RERANKERS)
    if key in BUILT_IN:
        raise ValueError(f"name {key!r} is a {_kind(key)} skqbnorm ships and cannot be "
                         "unregistered; leave it out of a comparison with methods=.")
    if key in RERANKERS:
        return RERANKERS.pop(key)
    users = [other for other, method in METHODS.items()
             if isinstance(method.single_bank, str) and method.single_bank.lower() == key]
    if users:
        raise ValueError(f"name {key!r} is the single_bank of {', '.join(users)}; unregister "
                         "those first.")
    return METHODS.pop(key)


def get_method(name):
    """Look up the :class:`Method` registered under ``name``, in any case.

    Parameters
    ----------
    name : str
        A registered method name, e.g. ``"CSLS"`` or ``"csls"``.

    Returns
    -------
    method : Method
        Its entry.

    Raises
    ------
    ValueError
        When no method is registered under ``name``; the message lists those that are.

    Examples
    --------
    >>> from skqbnorm.catalogue import get_method
    >>> get_method("CSLS").normalizer.__name__
    'CSLS'
    """
    return METHODS[_key(name)]


def method_names():
    """List the registered method names, in registration order.

    Returns
    -------
    names : list of str
        The keys of :data:`METHODS`, lower-case.

    Examples
    --------
    >>> from skqbnorm.catalogue import method_names
    >>> method_names()[:3]
    ['raw', 'is', 'dis']
    """
    return list(METHODS)


def normalizers(**capabilities):
    """The normaliser classes of the registered methods whose capabilities match.

    Parameters
    ----------
    **capabilities
        Fields of :class:`~skqbnorm.normalizers.Capabilities` and the values
        wanted, e.g. ``normalizers(bias_form=True)`` or ``normalizers(index=None)``;
        a value the field cannot take is refused.

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
    for name, value in capabilities.items():
        _check_capability_value(name, value)
    found = []
    for method in METHODS.values():
        cls = method.normalizer
        if cls is None or cls in found:
            continue
        declared = _capabilities(cls)
        if all(getattr(declared, name) == value for name, value in capabilities.items()):
            found.append(cls)
    return found


def _check_capability_value(name, value):
    allowed = CAPABILITY_VALUES.get(name, (True, False))
    if name in CAPABILITY_VALUES:
        fits = (value is None or isinstance(value, str)) and value in allowed
    else:
        fits = isinstance(value, bool)
    if not fits:
        raise ValueError(f"The capability {name} is one of {allowed}; got {name}={value!r}.")


def rerankers():
    """List the registered reranker classes, in registration order.

    Returns
    -------
    classes : list of type
        Each reranker class once (a class registered under two names is listed
        once).

    Examples
    --------
    >>> from skqbnorm.catalogue import rerankers
    >>> "KReciprocalReranker" in [cls.__name__ for cls in rerankers()]
    True
    """
    return list(dict.fromkeys(RERANKERS.values()))


def _key(name, rerankers=None):
    """``name`` lower-cased, or a ValueError listing the registered methods (and the
    rerankers, when ``rerankers`` is given, the table to look in besides)."""
    listed = f"the methods are {', '.join(METHODS)}"
    if rerankers is not None:
        listed += f"; the rerankers {', '.join(rerankers)}"
    if not isinstance(name, str):
        raise ValueError(  # noqa: TRY004
            f"name must be a method name (a string); got name={name!r}. {listed[0].upper()}"
            f"{listed[1:]}.")
    key = name.lower()
    if key not in METHODS and (rerankers is None or key not in rerankers):
        raise ValueError(f"No method named {name!r}: name {name!r} is not registered; "
                         f"{listed}.")
    return key


def _capabilities(cls):
    declared = getattr(cls, "capabilities", None)
    if not isinstance(cls, type) or not isinstance(declared, Capabilities):
        raise TypeError(
            "Method.normalizer must be a normaliser class that declares its capabilities "
            f"(a class attribute capabilities = Capabilities(...)); got {cls!r}."
        )
    return declared


#: The bank column of a method that uses no querybank, in the demo's table.
NO_BANK = {"nothing": "(none)", "test queries": "(test queries)"}


def make_normalizer(method, settings=DEFAULTS):
    """Make the normaliser a method name stands for (None for raw similarities).

    Parameters
    ----------
    method : str
        A registered method name, in any case.
    settings : Settings, default=DEFAULTS
        Hyperparameters for the method's ``options``; a setting left at None keeps
        the class default.

    Returns
    -------
    normalizer : estimator or None
        An unfitted normaliser, or None for ``"raw"``.

    Examples
    --------
    >>> from skqbnorm.catalogue import Settings, make_normalizer
    >>> make_normalizer("IS", Settings(beta=5))
    InvertedSoftmax(beta=5)
    """
    spec = METHODS[_key(method)]
    if not isinstance(settings, Settings):
        raise ValueError(  # noqa: TRY004
            f"settings must be a catalogue.Settings; got settings={settings!r}.")
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


# The shipped entries pass through register() as a plug-in does; then their names are
# protected from replace=True and unregister().
for _name, _entry in {**_SHIPPED_METHODS, **_SHIPPED_RERANKERS}.items():
    register(_name, _entry)
BUILT_IN = frozenset(METHODS) | frozenset(RERANKERS)
del _name, _entry
