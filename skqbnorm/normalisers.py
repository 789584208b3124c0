"""Deprecated: the subpackage is spelt :mod:`skqbnorm.normalizers` since skqbnorm 1.0.

Importing this module warns once; its names are those of :mod:`skqbnorm.normalizers`
(the old spellings of renamed classes included, with a warning of their own). It will be
removed in 1.1.
"""

import warnings

from . import normalizers as _normalizers

warnings.warn("skqbnorm.normalisers was renamed skqbnorm.normalizers in skqbnorm 1.0; the old "
              "name will be removed in 1.1.", FutureWarning, stacklevel=2)

__all__ = []


def __getattr__(name):
    return getattr(_normalizers, name)
