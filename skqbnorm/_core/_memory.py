"""Memory budgets: how many rows a block may take, and the fixed sizes of products."""

#: Default bound, in MiB, on the temporary memory one block may take. A few MiB keeps
#: blocks cache-friendly and avoids page-fault costs on large fresh allocations. Fixed,
#: not from the machine: it is the documented default of a public parameter.
DEFAULT_WORKING_MEMORY = 16

#: Bank rows per matrix product in embedding mode, and the memory those products may
#: take whatever ``working_memory`` says (see ``ProbeMatrix.blocks``): shapes for
#: BLAS's speed, fixed so that the products do not depend on the machine.
MIN_PRODUCT_ROWS = 2048
PRODUCT_MEMORY = 256


def rows_per_chunk(n_columns, itemsize, working_memory=None, n_buffers=2):
    """Number of rows such that ``n_buffers`` blocks of ``n_columns`` fit the budget."""
    budget = (DEFAULT_WORKING_MEMORY if working_memory is None else working_memory) * 2**20
    return max(1, int(budget // (max(n_columns, 1) * itemsize * n_buffers)))


def power_of_two_rows(n_columns, itemsize, memory, most):
    """The most rows of ``n_columns`` items of ``itemsize`` bytes that fit ``memory``
    MiB, at most ``most``, rounded down to a power of two (at least one row)."""
    affordable = rows_per_chunk(n_columns, itemsize, memory, n_buffers=1)
    return 1 << (min(most, affordable).bit_length() - 1)
