"""The namespaces and devices the array API tests run on: array-api-strict always (its
default device and a second one, standing in for an accelerator), torch CPU tensors
where torch is installed (the ``torch`` marker; never in CI)."""

import numpy as np
import pytest

NAMESPACES = [
    pytest.param(("array_api_strict", "CPU_DEVICE"), id="strict-cpu"),
    pytest.param(("array_api_strict", "device1"), id="strict-device1"),
    pytest.param(("torch", "cpu"), id="torch-cpu", marks=pytest.mark.torch),
]


def namespace_and_device(case):
    """``(xp, device)`` of a case of ``NAMESPACES``; skips where the library is missing."""
    name, device_name = case
    module = pytest.importorskip(name)
    pytest.importorskip("array_api_compat")
    if name == "array_api_strict":
        return module, module.Device(device_name)
    return module, module.device(device_name)


def host(array):
    """A NumPy copy of an array of any of the cases' namespaces."""
    from skqbnorm._core._array_api import to_numpy

    return to_numpy(array)


def put(xp, device, array):
    """A NumPy array as an array of ``xp`` on ``device``."""
    return xp.asarray(np.asarray(array), device=device)
