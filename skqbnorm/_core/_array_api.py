"""Array API dispatch: the namespace and device of the inputs, and what the standard lacks.

With scikit-learn's ``array_api_dispatch=True`` (``sklearn.set_config`` or
``sklearn.config_context``), the methods that support it compute on the namespace
and device of their inputs (torch, CuPy, ``array-api-strict``) through
``array-api-compat``, imported only then. Without dispatch, or with NumPy inputs,
:func:`namespace` returns NumPy and the caller keeps its NumPy path.
"""

import numpy as np
from sklearn import get_config

from ._memory import DEFAULT_WORKING_MEMORY

_MISSING_COMPAT = (
    "array_api_dispatch=True needs the array-api-compat package, which is not installed: "
    "pip install array-api-compat (scikit-learn's array API support needs it too)."
)


def dispatch_enabled():
    """Whether scikit-learn's ``array_api_dispatch`` is on."""
    return bool(get_config().get("array_api_dispatch", False))


def compat():
    """The ``array_api_compat`` module, or an ImportError that says how to install it."""
    try:
        import array_api_compat
    except ImportError as error:
        raise ImportError(_MISSING_COMPAT) from error
    return array_api_compat


def _is_device_array(array, array_api_compat):
    """An array of another namespace than NumPy (dask arrays keep their own path)."""
    if array is None or isinstance(array, np.ndarray) or type(array).__module__.startswith("dask"):
        return False
    return array_api_compat.is_array_api_obj(array)


def namespace(*arrays):
    """The namespace to compute in, and whether it is an array API path.

    Parameters
    ----------
    *arrays : array-like or None
        The inputs; None entries are ignored.

    Returns
    -------
    xp : module
        ``numpy`` when dispatch is off or no input is an array of another namespace
        (then the caller keeps its NumPy path); else the inputs' namespace, as
        ``array_api_compat.array_namespace`` wraps it.
    is_array_api : bool
        True when ``xp`` is the inputs' own namespace (torch, CuPy, array-api-strict).

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm._core._array_api import namespace
    >>> namespace(np.ones(3))
    (<module 'numpy' ...>, False)
    """
    if not dispatch_enabled():
        return np, False
    array_api_compat = compat()
    others = [array for array in arrays if _is_device_array(array, array_api_compat)]
    if not others:
        return np, False
    try:
        return array_api_compat.array_namespace(*others), True
    except TypeError as error:
        raise ValueError(f"The inputs must use the same namespace: {error}") from error


def device(array):
    """The device of ``array``."""
    return compat().device(array)


def namespace_name(xp):
    """The name of the array library behind ``xp`` ("torch", "cupy", "array_api_strict")."""
    return xp.__name__.removeprefix("array_api_compat.")


def max_float(xp, on_device):
    """float64 where the namespace and device support it, else float32."""
    if namespace_name(xp) == "numpy":
        return xp.float64
    floats = xp.__array_namespace_info__().dtypes(kind="real floating", device=on_device)
    return xp.float64 if "float64" in floats else xp.float32


def float_of(xp, array, on_device):
    """``array`` as a float array: float dtypes kept, integers and booleans cast to
    the widest float of the device; a ValueError for anything else."""
    if xp.isdtype(array.dtype, "real floating"):
        return array
    if xp.isdtype(array.dtype, ("integral", "bool")):
        return xp.astype(array, max_float(xp, on_device))
    raise ValueError(f"Expected an array of real numbers; got dtype {array.dtype}.")


def to_numpy(array):
    """A NumPy copy (or view) of an array of any namespace, moved to the host."""
    if array is None or isinstance(array, np.ndarray):
        return array
    array_api_compat = compat()
    if array_api_compat.is_torch_array(array):
        return array.detach().cpu().numpy()
    if array_api_compat.is_cupy_array(array):
        return array.get()
    if namespace_name(array_api_compat.array_namespace(array)) == "array_api_strict":
        import array_api_strict

        array = array.to_device(array_api_strict.Device("CPU_DEVICE"))
    return np.asarray(array)


def to_namespace(array, xp, on_device):
    """``array`` (NumPy or of ``xp``) as an array of ``xp`` on ``on_device``."""
    return xp.asarray(array, device=on_device)


#: The ``working_memory`` default, in MiB, of namespaces that compute on the host CPU
#: (torch CPU tensors, array-api-strict): their blocks are products of the namespace's
#: own, each a call with its own overhead, so they take larger blocks than the NumPy path.
HOST_DEVICE_WORKING_MEMORY = 256

#: On an accelerator, the share of its free memory that the blocks may take by default,
#: and the most they take (MiB), whatever the device has free.
DEVICE_MEMORY_SHARE = 0.25
DEVICE_WORKING_MEMORY_CAP = 4096


def device_working_memory(xp, on_device, working_memory=None):
    """The memory budget, in MiB, of the blocks of a computation on ``on_device``.

    An explicit ``working_memory`` is returned unchanged. Otherwise, on a CUDA device
    of torch or CuPy: a quarter of the device's free memory (CuPy's pool counted as
    free), at most 4096 MiB and at least the host default; on anything else (torch
    CPU tensors, array-api-strict, devices whose free memory is not known): 256 MiB.

    Parameters
    ----------
    xp : module
        The namespace of the computation.
    on_device : device
        Its device.
    working_memory : float or None, default=None
        The estimator's ``working_memory``, in MiB.

    Returns
    -------
    budget : float
        MiB that the blocks of one computation may hold at once.

    Examples
    --------
    >>> import array_api_strict as xp
    >>> from skqbnorm._core._array_api import device_working_memory
    >>> device_working_memory(xp, xp.Device("CPU_DEVICE"))
    256
    >>> device_working_memory(xp, xp.Device("CPU_DEVICE"), working_memory=2)
    2
    """
    if working_memory is not None:
        return working_memory
    free = free_device_memory(xp, on_device)
    if free is None:
        return HOST_DEVICE_WORKING_MEMORY
    share = DEVICE_MEMORY_SHARE * free / 2**20
    return max(DEFAULT_WORKING_MEMORY, min(DEVICE_WORKING_MEMORY_CAP, share))


def free_device_memory(xp, on_device):
    """Bytes free on a CUDA device of torch or CuPy, or None (a CPU, or not known)."""
    name = namespace_name(xp)
    if name == "torch" and getattr(on_device, "type", None) == "cuda":
        import torch

        return torch.cuda.mem_get_info(on_device)[0]
    if name == "cupy":
        import cupy

        with cupy.cuda.Device(getattr(on_device, "id", on_device)):
            free = cupy.cuda.runtime.memGetInfo()[0]
            return free + cupy.get_default_memory_pool().free_bytes()
    return None


def top_k(xp, values, k, axis=-1):
    """The ``k`` largest entries along ``axis``, best first: ``(values, indices)``.

    The standard has no selection: ``torch.topk`` where the namespace is torch
    (its order among exact ties is torch's), else a stable descending sort, whose
    ties go to the lowest index as in the NumPy path.

    Parameters
    ----------
    xp : module
        The namespace of ``values``.
    values : array of shape (..., n)
        Real values, no NaN.
    k : int
        How many, ``1 <= k <= n``.
    axis : int, default=-1
        The axis to select along.

    Returns
    -------
    best : array
        The ``k`` largest values along ``axis``, in decreasing order.
    indices : array
        Their positions along ``axis``.

    Examples
    --------
    >>> import array_api_strict as xp
    >>> from skqbnorm._core._array_api import top_k
    >>> best, where = top_k(xp, xp.asarray([[0.1, 0.9, 0.5, 0.9]]), 2)
    >>> [float(value) for value in best[0, :]], [int(i) for i in where[0, :]]
    ([0.9, 0.9], [1, 3])
    """
    if namespace_name(xp) == "torch":
        import torch

        found = torch.topk(values, k, dim=axis, largest=True, sorted=True)
        return found.values, found.indices
    # Sorting the values as argsort orders them (take_along_axis needs the 2024.12
    # standard, which scikit-learn 1.6 does not ask array-api-strict for).
    first_k = xp.arange(k, device=device(values))
    order = xp.argsort(values, axis=axis, descending=True, stable=True)
    best = xp.sort(values, axis=axis, descending=True, stable=True)
    return xp.take(best, first_k, axis=axis), xp.take(order, first_k, axis=axis)


def check_matrix(xp, array, name):
    """A non-empty 2-D real array of ``xp`` as a float array (see :func:`float_of`)."""
    if array.ndim != 2 or array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(
            f"{name} must be a non-empty 2-D array of shape (n_rows, n_columns); "
            f"got shape {tuple(array.shape)}."
        )
    return float_of(xp, array, device(array))


def check_finite(xp, block, rows, name, **naming):
    """A ValueError naming the first NaN or infinity of ``block`` (rows ``rows``), as the
    NumPy path names it; the block goes to the host only when it holds one."""
    if not bool(xp.all(xp.isfinite(block))):
        from ._finite import check_finite_block

        check_finite_block(to_numpy(block), rows, name=name, **naming)


class FiniteFlag:
    """Whether every block seen so far is finite, kept on the device: adding a block
    queues a reduction without waiting for it, and ``bool(flag)`` waits once.

    Examples
    --------
    >>> import array_api_strict as xp
    >>> from skqbnorm._core._array_api import FiniteFlag
    >>> flag = FiniteFlag(xp, xp.Device("CPU_DEVICE"))
    >>> flag.add(xp.asarray([1.0, 2.0])); bool(flag)
    True
    >>> flag.add(xp.asarray([xp.nan])); bool(flag)
    False
    """

    def __init__(self, xp, on_device):
        self.xp = xp
        self.finite = xp.asarray(True, device=on_device)

    def add(self, block):
        self.finite = self.finite & self.xp.all(self.xp.isfinite(block))

    def __bool__(self):
        return bool(self.finite)
