"""Bias form: normalisers whose rows rank as ``s(q, g) - bias_g``, served by inner products.

For such a normaliser and dot-product similarities (cosine: unit rows), a row ranks
as ``<[q, 1], [g, -bias_g]>``: a maximum-inner-product search over augmented gallery
vectors, which any inner-product engine serves (FAISS, a vector database).

Gated normalisers (the DIS, the dynamic DBNorm) apply a bias only to queries whose
raw top-1 gallery item opens a gate, and the dynamic DBNorm has one bias per
combination of open gates. Their augmented gallery carries one bias column per
such *form*, ``[g, -bias_1, ..., -bias_F]``, and a query selects its form with a
one-hot tail, ``[q, e_f]`` (all zeros for a query left raw): one index serves every
row, and the raw search for the gate is the search with ``[q, 0]``. The augmented
vectors come from :func:`~skqbnorm.normalizers.index_serving`, the protocol of indexes.
"""

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._core._array_api import device, max_float
from ._array_api_path import fitted_namespace


class BiasFormMixin:
    """Per-gallery bias of a bias-form normaliser.

    A subclass defines ``_gallery_bias()``, the bias (in similarity units) of a
    normalised row, such that the row ranks as ``s(q, g) - bias_g``; a gated one
    also defines ``_gated_biases()``, a list of ``(bias, gate)`` pairs: a query
    whose raw top-1 gallery item ``t`` has ``gate[t]`` takes that ``bias`` (gates
    are disjoint), and a query that no gate admits keeps its raw row.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm import InvertedSoftmax
    >>> from skqbnorm.normalizers import BiasFormMixin
    >>> bank = np.array([[0.9, 0.1], [0.8, 0.2]])
    >>> model = InvertedSoftmax(beta=1).fit(bank)
    >>> isinstance(model, BiasFormMixin)
    True
    >>> query = np.array([[0.5, 0.4]])
    >>> bias = model.gallery_bias()
    >>> np.argsort(-(query - bias)), np.argsort(-model.transform(query))
    (array([[1, 0]]), array([[1, 0]]))
    """

    def _gated_biases(self):
        """``(bias, gate)`` per row form; ``gate`` None: every row, no gate."""
        return [(self._gallery_bias(), None)]

    def gallery_bias(self):
        """The per-gallery bias of a normalised row: it ranks as ``s(q, g) - bias_g``.

        For gated normalisers (the DIS, the dynamic DBNorm), the bias of a query
        whose every gate is open; the others take the bias of their row form (see
        :func:`~skqbnorm.normalizers.index_serving`).

        Returns
        -------
        bias : ndarray of shape (n_gallery,)
            In similarity units, float64. For a normaliser fitted on the array API
            path, an array of the namespace and device of its fitted statistics, in
            float64 where the device has it, else float32.
        """
        check_is_fitted(self)
        bias = self._gallery_bias()
        xp = fitted_namespace(self)
        if xp is not None:  # fitted on a device: a copy there
            return xp.astype(bias, max_float(xp, device(bias)), copy=True)
        return np.array(bias, dtype=np.float64)

    def _row_forms(self, top1):
        """Which bias (row form) each query takes, from valid indices of its raw top-1:
        -1 for a query that no gate admits."""
        forms = np.full(len(top1), -1, dtype=np.intp)
        for form, (_, gate) in enumerate(self._gated_biases()):
            forms[slice(None) if gate is None else gate[top1]] = form
        return forms
