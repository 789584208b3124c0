"""The probe matrix ``P``: row blocks of bank-by-gallery similarities, given or computed.

A normaliser's fit reads ``P`` (M x N) once, as blocks of bank rows whose size is
bounded by a memory budget. ``P`` is either given (an array or an ``np.memmap``,
read block by block) or computed block by block from bank and gallery embeddings.
"""

import numpy as np
from sklearn.preprocessing import normalize

from ._finite import check_finite_block, check_finite_embeddings, embedding_products, largest_norm
from ._memory import MIN_PRODUCT_ROWS, PRODUCT_MEMORY, power_of_two_rows, rows_per_chunk


def prepare_embeddings(embeddings, metric):
    """Embeddings ready for a dot product under ``metric`` (unit rows for cosine).

    For cosine, every row is first scaled by a power of two (exact) to a largest
    magnitude in [0.5, 1), so that its norm neither overflows nor underflows,
    whatever the embeddings' scale (1e200 or 1e-170 alike). The unit rows are
    C-ordered whatever the input's layout, so that their norms sum in one order.
    """
    if metric == "cosine":
        _, exponent = np.frexp(np.abs(embeddings).max(axis=1, initial=0))
        scaled = np.ldexp(embeddings, -exponent[:, None].astype(np.int32), order="C")
        return normalize(scaled, norm="l2", copy=False)
    return embeddings


def product_rows(n_columns, itemsize, align=1):
    """``ProbeMatrix.product_rows`` of a gallery of ``n_columns`` items of ``itemsize`` bytes."""
    return max(align, power_of_two_rows(n_columns, itemsize, PRODUCT_MEMORY, MIN_PRODUCT_ROWS))


class ProbeMatrix:
    """Row blocks of the probe matrix ``P``, precomputed or from embeddings.

    Parameters
    ----------
    bank : ndarray of shape (M, N) or (M, d)
        The precomputed similarities (``gallery_t`` is None) or the bank embeddings.
    gallery_t : ndarray of shape (d, N) or None
        Prepared, transposed gallery embeddings.
    metric : str
        Used to prepare each block of bank embeddings.
    dtype : numpy dtype
        The dtype of every block.
    name : str
        What error messages (NaN, overflow) call the bank's rows.
    """

    def __init__(self, bank, gallery_t=None, metric="dot", dtype=np.float64, name="querybank"):
        self.bank = bank
        self.gallery_t = gallery_t
        self.metric = metric
        self.dtype = np.dtype(dtype)
        self.name = name
        self._gallery_norm = None

    @property
    def gallery_norm(self):
        """The largest norm of the gallery embeddings (embedding mode), computed once."""
        if self._gallery_norm is None and self.gallery_t is not None:
            self._gallery_norm = largest_norm(self.gallery_t, axis=0)
        return self._gallery_norm

    @property
    def shape(self):
        n_columns = self.bank.shape[1] if self.gallery_t is None else self.gallery_t.shape[1]
        return self.bank.shape[0], n_columns

    def rows(self, rows):
        """The probe matrix restricted to a range of bank rows."""
        part = type(self)(self.bank[rows], self.gallery_t, self.metric, self.dtype, self.name)
        part._gallery_norm = self.gallery_norm
        return part

    def block(self, rows, first_row=0, out=None):
        """The block ``P[rows]`` as an in-memory array of ``self.dtype``.

        Non-float input (e.g. an int16 memmap) is cast here, one block at a time.
        Products are checked for overflow (``first_row`` numbers the rows in error
        messages), and ``out`` (C-contiguous, of the block's shape) receives them;
        given similarities are checked by ``blocks``.
        """
        if self.gallery_t is None:
            return np.asarray(self.bank[rows], dtype=self.dtype)
        first = slice(first_row + rows.start, first_row + rows.stop)
        return embedding_products(self.prepared(rows, first), self.gallery_t, first, self.name,
                                  self.metric, gallery_norm=self.gallery_norm, out=out)

    def prepared(self, rows, numbered):
        """The bank embeddings ``rows`` prepared for the metric (``prepare_embeddings``);
        a NaN or an infinity among them (a dask bank's, unchecked) is named, its row
        numbered by ``numbered``."""
        embeddings = np.asarray(self.bank[rows], dtype=self.dtype)
        try:
            return prepare_embeddings(embeddings, self.metric)
        except ValueError:  # scikit-learn's normalize refuses NaN and infinity unnamed
            check_finite_embeddings(embeddings, numbered, self.name)
            raise

    def entries(self, rows, columns):
        """The precomputed similarities ``P[rows, columns]`` (index arrays, broadcast) as ``self.dtype``."""
        if self.gallery_t is not None:
            raise NotImplementedError("entries of a probe matrix computed from embeddings")
        bank = self.bank
        rows, columns = np.broadcast_arrays(rows, columns)
        if isinstance(bank, np.ndarray) and bank.flags.c_contiguous:
            flat = rows * bank.shape[1]
            flat += columns
            values = np.take(bank, flat)  # flat indices: a faster gather
        else:
            values = bank[rows, columns]
        return np.asarray(values, dtype=self.dtype)

    def product_rows(self, align=1):
        """Bank rows per matrix product in embedding mode: a power of two, at least ``align``.

        Up to ``MIN_PRODUCT_ROWS`` rows within ``PRODUCT_MEMORY`` MiB (smaller products
        waste the matrix product's packing of the gallery), whatever the budget: BLAS
        may round a row differently in products of other sizes, so the products are
        fixed groups of rows, aligned to absolute row numbers.
        """
        return product_rows(self.shape[1], self.dtype.itemsize, align)

    def alignment(self, align=1):
        """Rows per group that blocks and jobs must keep whole (see ``blocks``)."""
        return align if self.gallery_t is None else self.product_rows(align)

    def blocks(self, working_memory=None, n_buffers=3, first_row=0, align=1, reuse=False):
        """Checked row blocks within the memory budget, with their rows numbered from ``first_row``.

        Blocks hold whole groups of ``align`` rows (the leaves of the reduction
        trees, see ``ColumnTree``), so a tiny budget still reads one group at a time.
        In embedding mode the similarities are computed in products of
        ``product_rows`` bank rows, then handed on in budget-sized slices; with
        ``reuse``, every product is written into one buffer (fresh pages for every
        product cost about a tenth of the product), so a block is valid only until
        the next is asked for. ``first_row`` is a multiple of ``alignment(align)``.
        """
        n_rows, n_columns = self.shape
        step = rows_per_chunk(n_columns, self.dtype.itemsize, working_memory, n_buffers)
        step = max(align, step - step % align)
        if self.gallery_t is None:
            for start in range(0, n_rows, step):
                block = self.block(slice(start, min(start + step, n_rows)))
                rows = slice(first_row + start, first_row + start + len(block))
                self.check(block, rows)
                yield rows, block
            return
        product_step = self.product_rows(align)
        buffer = np.empty((min(product_step, n_rows), n_columns), self.dtype) if reuse else None
        for start in range(0, n_rows, product_step):
            rows = slice(start, min(start + product_step, n_rows))
            out = None if buffer is None else buffer[: rows.stop - rows.start]
            product = self.block(rows, first_row, out=out)
            for offset in range(0, len(product), step):
                block = product[offset : offset + step]
                yield slice(first_row + start + offset, first_row + start + offset + len(block)), block

    @property
    def bounded_products(self):
        """Whether the similarities are cosines of embeddings: bounded by 1, none overflows."""
        return self.gallery_t is not None and self.metric == "cosine"

    def prepared_bank(self):
        """The prepared bank embeddings as a probe of their own (embedding mode).

        ``reduce_rows`` reads them instead of the products for reducers that offer
        ``for_bank_rows`` (a column mean, the moments, the top k of cosines).
        """
        return _PreparedRows(self.bank, None, self.metric, self.dtype, self.name)

    def check(self, block, rows):
        """An error naming the first NaN/inf of a block of the rows numbered ``rows``."""
        check_finite_block(block, rows, self.name)


class _PreparedRows(ProbeMatrix):
    """Blocks of prepared bank embeddings (unit rows for cosine), checked as they are prepared."""

    def block(self, rows, first_row=0, out=None):
        return self.prepared(rows, slice(first_row + rows.start, first_row + rows.stop))

    def check(self, block, rows):
        """Nothing to check: a NumPy bank's embeddings were checked whole
        (``check_embeddings``), and ``prepared`` names a dask bank's bad embedding."""
