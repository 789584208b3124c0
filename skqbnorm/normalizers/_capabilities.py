"""What a normaliser is: its declared capabilities, read by the base class, the
index, the gate and the catalogue instead of detecting overridden methods."""

from dataclasses import dataclass

#: The gallery-bank inputs a dual-bank normaliser's fit may take (None: it takes none).
GALLERY_BANK_INPUTS = (None, "gallery_bank", "querybank_to_gallery_bank")
#: How :class:`~skqbnorm.index.NormalizedIndex` serves a normaliser (None: refused).
INDEX_SERVING = ("bias", "rerank", None)
#: How a new gallery item's bias follows from its similarities to the bank, for an
#: attacker who models it (None: not modelled).
ITEM_BIAS_FORMS = (None, "log_sum_exp", "top_k_mean")


@dataclass(frozen=True)
class Capabilities:
    """The declared contract of a querybank normaliser class (its ``capabilities``).

    Every normaliser class declares one as a class attribute; the shared fit, the
    serving code (``transform``, ``top_k``), :class:`~skqbnorm.index.NormalizedIndex`,
    :class:`~skqbnorm.QueryBankGate` and :mod:`skqbnorm.catalogue` read it. A frozen
    dataclass rather than scikit-learn tags: these are facts about the method (fixed
    for the class, never a function of the parameters), which tags, recomputed per
    instance and validated by scikit-learn's own schema, do not carry.

    Parameters
    ----------
    bias_form : bool, default=False
        A normalised row ranks as ``s(q, g) - bias_g``: the class defines
        ``_gallery_bias()`` and offers ``gallery_bias()``; its augmented vectors come
        from :func:`~skqbnorm.normalizers.index_serving`.
    whole_rows : bool, default=False
        Its scores need a reduction over a query's whole row (``_row_state``), so a
        gallery streamed in column chunks is read twice.
    gated : bool, default=False
        Bias form applied only to the rows whose raw top-1 opens a gate
        (``_gated_biases()``: one bias per row form); implies ``bias_form``.
    gallery_bank : {None, "gallery_bank", "querybank_to_gallery_bank"}, default=None
        The gallery-bank input its fit needs in precomputed mode: the gallery bank's
        similarities to the gallery (``gallery_bank=``), or the querybank's to the
        gallery bank (``querybank_to_gallery_bank=``); None: it refuses a gallery bank.
        A dual-bank class defines ``_learn_gallery_bank(gallery_bank)``.
    bank_passes : bool, default=False
        Its fit reads the querybank several times: it defines
        ``_learn_passes(reducers, bank, gallery_bank)`` in place of ``_learn``, where
        ``bank.read(make_reducers)`` runs one more pass over the bank.
    transductive : bool, default=False
        It may sensibly be fitted on the test queries themselves (DSL).
    index : {"bias", "rerank", None}, default="rerank"
        How :class:`~skqbnorm.index.NormalizedIndex` (through
        :func:`~skqbnorm.normalizers.index_serving`) serves it: by the augmented
        inner-product search (needs ``bias_form``), by reranking raw candidates with
        its exact scores, or not at all.
    mergeable : bool, default=False
        Its bank statistic is a reduction that merges over any split of the bank
        rows, so that ``partial_fit`` appends rows in any number of calls and gives
        what one ``fit`` on all of them gives. Its ``_reducers`` (and, for a
        dual-bank class, ``_gallery_bank_reducers``) must not depend on the number
        of bank rows; incompatible with ``bank_passes``. Classes without it refuse
        ``partial_fit`` (``hasattr`` is False on them).
    item_bias : {None, "log_sum_exp", "top_k_mean"}, default=None
        How the bias of a new gallery item ``h`` follows from its similarities
        ``s(b, h)`` to the bank rows ``b``, so that
        :func:`~skqbnorm.attacks.adaptive_hubs` can model it (needs ``bias_form``;
        a gated class declares the bias of its normalised rows). The class defines
        ``_item_bias_parameters()``, which gives the form's parameters from the
        fitted normaliser: ``"log_sum_exp"``, ``logsumexp_b(beta s(b, h)) / beta -
        offset``, from ``{"beta", "offset"}``; ``"top_k_mean"``, ``scale`` times
        the mean of the ``k`` largest ``s(b, h)``, from ``{"k", "scale"}``. None:
        an adaptive attack refuses it.
    array_api : bool, default=False
        With scikit-learn's ``array_api_dispatch=True``, ``fit``, ``transform``,
        ``similarities`` and ``top_k`` run on the namespace and device of array API
        inputs (torch, CuPy, array-api-strict), and return arrays of that namespace
        (the class's ``array_api_support`` tag). Classes without it refuse such
        inputs under dispatch with a ValueError.

    Examples
    --------
    >>> from skqbnorm import CSLS, GloballyCorrected
    >>> CSLS.capabilities.bias_form, CSLS.capabilities.whole_rows, CSLS.capabilities.index
    (True, True, 'bias')
    >>> GloballyCorrected.capabilities.index
    'rerank'
    >>> CSLS.capabilities.mergeable, GloballyCorrected.capabilities.mergeable
    (True, False)
    >>> CSLS.capabilities.item_bias, GloballyCorrected.capabilities.item_bias is None
    ('top_k_mean', True)
    """

    bias_form: bool = False
    whole_rows: bool = False
    gated: bool = False
    gallery_bank: str = None
    bank_passes: bool = False
    transductive: bool = False
    index: str = "rerank"
    mergeable: bool = False
    item_bias: str = None
    array_api: bool = False

    def __post_init__(self):
        if self.gallery_bank not in GALLERY_BANK_INPUTS:
            raise ValueError(f"gallery_bank must be one of {GALLERY_BANK_INPUTS}; got {self.gallery_bank!r}.")
        if self.index not in INDEX_SERVING:
            raise ValueError(f"index must be one of {INDEX_SERVING}; got {self.index!r}.")
        if (self.gated or self.index == "bias") and not self.bias_form:
            raise ValueError("gated=True and index='bias' need bias_form=True.")
        if self.mergeable and self.bank_passes:
            raise ValueError("mergeable=True needs a single pass over the bank: not with bank_passes=True.")
        if self.item_bias not in ITEM_BIAS_FORMS:
            raise ValueError(f"item_bias must be one of {ITEM_BIAS_FORMS}; got {self.item_bias!r}.")
        if self.item_bias is not None and not self.bias_form:
            raise ValueError(f"item_bias={self.item_bias!r} needs bias_form=True: it models "
                             "the bias s(q, g) - bias_g subtracts.")
