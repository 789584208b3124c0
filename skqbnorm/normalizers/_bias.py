"""Bias form: normalisers whose rows rank as ``s(q, g) - bias_g``, served by inner products.

For such a normaliser and dot-product similarities (cosine: unit rows), a row ranks
as ``<[q, 1], [g, -bias_g]>``: a maximum-inner-product search over augmented gallery
vectors, which any inner-product engine serves (FAISS, a vector database).

Gated normalisers (the DIS, the dynamic DBNorm) apply a bias only to queries whose
raw top-1 gallery item opens a gate, and the dynamic DBNorm has one bias per
combination of open gates. Their augmented gallery carries one bias column per
such *form*, ``[g, -bias_1, ..., -bias_F]``, and a query selects its form with a
one-hot tail, ``[q, e_f]`` (all zeros for a query left raw): one index serves every
row, and the raw search for the gate is the search with ``[q, 0]``.
"""


import numpy as np
from sklearn.utils import gen_batches
from sklearn.utils.validation import check_is_fitted

from .._core import SEARCH_PRODUCT_ROWS, query_products, row_top1


def _floating(dtype, default):
    """The dtype of augmented vectors: ``default`` for None, else a floating dtype."""
    dtype = default if dtype is None else np.dtype(dtype)
    if not np.issubdtype(dtype, np.floating):
        raise ValueError(
            f"dtype must be a floating dtype (the vectors hold unit rows and biases, which "
            f"an integer dtype would truncate to zeros); got dtype={dtype}."
        )
    return dtype


class BiasFormMixin:
    """Per-gallery bias and augmented vectors of a bias-form normaliser.

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
        whose every gate is open; see :meth:`row_forms` for the others.

        Returns
        -------
        bias : ndarray of shape (n_gallery,)
            In similarity units, float64.
        """
        check_is_fitted(self)
        return np.array(self._gallery_bias(), dtype=np.float64)

    def gallery_biases(self):
        """The bias of every row form: one row per form (a single one unless gated).

        Returns
        -------
        biases : ndarray of shape (n_forms, n_gallery)
            Float64; row ``f`` is the bias of the queries whose :meth:`row_forms`
            is ``f``.
        """
        check_is_fitted(self)
        return np.array([bias for bias, _ in self._gated_biases()], dtype=np.float64)

    def row_forms(self, top1):
        """Which bias each query takes, given the index of its raw top-1 gallery item.

        Parameters
        ----------
        top1 : array-like of shape (n_queries,)
            Each query's raw top-1 gallery index (``argmax_g s(q, g)``, the lowest
            index among ties), e.g. from a raw inner-product search.

        Returns
        -------
        forms : ndarray of shape (n_queries,)
            The row of :meth:`gallery_biases` each query takes, or -1 for a query
            left raw (no gate open). All 0 for an ungated normaliser.
        """
        check_is_fitted(self)
        top1 = np.asarray(top1)
        n_gallery = self.n_features_in_
        if top1.ndim != 1 or not np.issubdtype(top1.dtype, np.integer):
            raise ValueError(f"top1 must be a 1-D array of gallery indices; got shape {top1.shape}, "
                             f"dtype {top1.dtype}.")
        if top1.size and not (0 <= top1.min() and top1.max() < n_gallery):
            raise ValueError(f"top1 holds gallery indices outside [0, {n_gallery}): "
                             f"[{top1.min()}, {top1.max()}].")
        return self._row_forms(top1)

    def _row_forms(self, top1):
        """``row_forms`` of valid gallery indices, unchecked."""
        forms = np.full(len(top1), -1, dtype=np.intp)
        for form, (_, gate) in enumerate(self._gated_biases()):
            forms[slice(None) if gate is None else gate[top1]] = form
        return forms

    def normalized_rows(self, top1):
        """Whether each query's row is normalised (any gate open), given its raw top-1.

        Parameters
        ----------
        top1 : array-like of shape (n_queries,)
            Each query's raw top-1 gallery index.

        Returns
        -------
        normalised : ndarray of shape (n_queries,), dtype=bool
            False for the rows a gated normaliser leaves raw; all True if ungated.
        """
        return self.row_forms(top1) >= 0

    def augmented_gallery(self, dtype=None):
        """Gallery vectors ``[g, -bias_g]`` for a maximum-inner-product search.

        Parameters
        ----------
        dtype : numpy floating dtype, default=None
            Of the result; None keeps the gallery embeddings' (FAISS takes float32).
            An integer dtype is refused: it would truncate the unit rows to zeros.

        Returns
        -------
        vectors : ndarray of shape (n_gallery, n_dims + n_forms)
            The prepared gallery embeddings (unit rows under cosine) and, per row
            form (one unless gated, see :meth:`gallery_biases`), the negated bias.
        """
        gallery = self._fitted_gallery()
        dtype = _floating(dtype, gallery.dtype)
        out = np.empty((gallery.shape[0], gallery.shape[1] + len(self._gated_biases())), dtype=dtype)
        out[:, : gallery.shape[1]] = gallery
        out[:, gallery.shape[1] :] = -self.gallery_biases().T
        return out

    def augmented_queries(self, queries, top1=None, dtype=None):
        """Build the query vectors ``[q, 1]`` that pair with :meth:`augmented_gallery`.

        Their inner products with it are ``s(q, g) - bias_g``, each row ranked as
        the normaliser ranks it.

        Parameters
        ----------
        queries : array-like of shape (n_queries, n_dims)
            Query embeddings, prepared under the fitted ``metric`` here.
        top1 : array-like of shape (n_queries,), default=None
            Gated normalisers only: each query's raw top-1 gallery index, which
            selects its bias (a query left raw gets a zero tail, so its inner
            products are its raw similarities). None computes it exactly from the
            query's similarities to the whole gallery; pass the top-1 of a raw
            search (queries ``[q, 0]``) to avoid that.
        dtype : numpy dtype, default=None
            Of the result; None keeps the queries'.

        Returns
        -------
        vectors : ndarray of shape (n_queries, n_dims + n_forms)
            The prepared query, then a one-hot tail selecting its row form.

        Examples
        --------
        >>> import numpy as np
        >>> from skqbnorm import DynamicInvertedSoftmax
        >>> rng = np.random.default_rng(0)
        >>> bank, gallery = rng.normal(size=(50, 4)), rng.normal(size=(20, 4))
        >>> queries = rng.normal(size=(3, 4))
        >>> dis = DynamicInvertedSoftmax(k=1).fit(bank, gallery=gallery)
        >>> products = dis.augmented_queries(queries) @ dis.augmented_gallery().T
        >>> bool(np.allclose(products, dis.transform(dis.similarities(queries))))
        True
        """
        check_is_fitted(self)
        prepared = self.prepare_queries(queries)
        if top1 is None:
            top1 = self._exact_top1(prepared) if self.capabilities.gated else np.zeros(len(prepared), np.intp)
        elif len(top1) != len(prepared):
            raise ValueError(f"top1 has {len(top1)} entries for {len(prepared)} queries.")
        forms = self.row_forms(top1)
        dtype = _floating(dtype, prepared.dtype)
        n_dims, n_forms = prepared.shape[1], len(self._gated_biases())
        out = np.zeros((len(prepared), n_dims + n_forms), dtype=dtype)
        out[:, :n_dims] = prepared
        normalized = forms >= 0
        out[np.flatnonzero(normalized), n_dims + forms[normalized]] = 1
        return out

    def _exact_top1(self, prepared):
        """Each prepared query's raw top-1 gallery index (ties: the lowest index), from
        the products that ``similarities`` multiplies: the gate then picks the row
        form that ``transform(similarities(queries))`` picks, bitwise."""
        gallery, gallery_norm = self._gallery_in(prepared.dtype)
        top1 = np.empty(len(prepared), dtype=np.intp)
        # Blocks of the most rows of a search's part bound the memory and split no part.
        for rows in gen_batches(len(prepared), SEARCH_PRODUCT_ROWS):
            products = query_products(prepared[rows], gallery.T, self.metric, gallery_norm=gallery_norm)
            top1[rows] = row_top1(products)[1]
        return top1

    def _fitted_gallery(self):
        check_is_fitted(self)
        if self.gallery_embeddings_ is None:
            raise ValueError(
                f"{type(self).__name__} was fitted on precomputed similarities, so it holds "
                "no gallery embeddings to augment; fit it with gallery=... (embedding mode), "
                "or build [g, -bias_g] from gallery_bias() and your own embeddings."
            )
        return self.gallery_embeddings_
