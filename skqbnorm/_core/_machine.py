"""The machine's caches and CPUs, read once, and the block sizes that follow from them.

Only sizes that trade speed alone come from here: a block that should stay in cache
(a part of a search, a gather of values) or a gallery beyond which a product streams
from memory. Every result is bitwise the same for any of these sizes (as for any
``working_memory``); sizes that fix a rounding order or that the user guide states
stay fixed where they are defined.
"""

import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

#: Where Linux describes the caches of the first CPU, one ``index*`` folder a cache.
SYSFS_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")

#: The last-level cache taken where the system says nothing: 32 MiB shared by all the
#: machine's CPUs.
FALLBACK_LAST_LEVEL_BYTES = 32 * 2**20

_SIZE = re.compile(r"(\d+)\s*([KMG]?)B?", re.IGNORECASE)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


@dataclass(frozen=True)
class Cache:
    """One data (or unified) cache: its size in bytes and how many CPUs share it."""

    size: int
    n_cpus: int


@dataclass(frozen=True)
class Machine:
    """The caches found, by level (data and unified ones, from the L2 up; at least
    one)."""

    caches: dict

    @property
    def last_level(self):
        """The last-level cache."""
        return self.caches[max(self.caches)]

    @property
    def last_level_share(self):
        """Bytes of the last-level cache per CPU that shares it."""
        return self.last_level.size // max(1, self.last_level.n_cpus)


def read_caches(root=SYSFS_CACHES):
    """The data and unified caches that ``root`` (a sysfs ``cache`` folder) describes,
    ``{level: Cache}``; a cache whose level or size cannot be read is left out, as is
    any instruction cache. ``{}`` where ``root`` does not exist."""
    caches = {}
    for folder in sorted(Path(root).glob("index*")):
        try:
            if _read(folder, "type").lower() == "instruction":
                continue
            level, size = int(_read(folder, "level")), parse_size(_read(folder, "size"))
        except (OSError, ValueError):
            continue
        try:
            sharing = count_cpus(_read(folder, "shared_cpu_list"))
        except (OSError, ValueError):
            sharing = 0  # not known
        if size > 0 and (level not in caches or size > caches[level].size):
            caches[level] = Cache(size, sharing)
    return caches


def _read(folder, name):
    return (folder / name).read_text().strip()


def parse_size(text):
    """Bytes of a sysfs cache size: ``"48K"``, ``"1M"``, ``"32768K"``, ``"512"``."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a cache size: {text!r}")
    return int(match[1]) * _UNITS[match[2].upper()]


def count_cpus(cpu_list):
    """CPUs in a sysfs CPU list such as ``"0-7,128-135"``."""
    ranges = [part.split("-") for part in cpu_list.split(",") if part]
    if not ranges:
        raise ValueError(f"not a CPU list: {cpu_list!r}")
    return sum(int(bounds[-1]) - int(bounds[0]) + 1 for bounds in ranges)


def sysconf_caches():
    """``{level: size}`` of the L2 to L4 caches that ``os.sysconf`` knows (glibc)."""
    sizes = {}
    for level in (2, 3, 4):
        try:
            size = os.sysconf(f"SC_LEVEL{level}_CACHE_SIZE")
        except (ValueError, OSError, AttributeError):
            continue
        if size > 0:
            sizes[level] = size
    return sizes


def describe_machine(caches, n_cpus):
    """The ``Machine`` of the caches read (``read_caches``; a level they lack from
    ``sysconf_caches``; none at all: the fallback). A cache whose sharing is not known
    is taken as shared by all ``n_cpus`` (the machine's) above the L2."""
    n_cpus = max(1, n_cpus or 0)
    known = {level: Cache(size, 0) for level, size in sysconf_caches().items()}
    known.update({level: cache for level, cache in caches.items() if level >= 2})
    if not known:
        known = {3: Cache(FALLBACK_LAST_LEVEL_BYTES, 0)}
    known = {level: cache if cache.n_cpus else Cache(cache.size, 1 if level == 2 else n_cpus)
             for level, cache in known.items()}
    return Machine(known)


@cache
def machine():
    """This machine, read once: sysfs on Linux, else ``os.sysconf``, else the fallback;
    a cache of unknown sharing shared by all the machine's CPUs."""
    return describe_machine(read_caches(), os.cpu_count())


def power_of_two_within(size, low, high):
    """``size`` rounded down to a power of two, within ``[low, high]``."""
    return min(high, max(low, 1 << (max(int(size), 1).bit_length() - 1)))


def search_part_bytes(machine):
    """Bytes of a block's rows that a search ranks at a time: a quarter of a CPU's
    share of the last-level cache, so that a part stays there through its passes
    (4 to 16 MiB: never below the fixed size it replaced, chosen by timings)."""
    return power_of_two_within(machine.last_level_share // 4, 2**22, 2**24)


def spread_bytes(machine):
    """The gallery size from which a search of a few queries spreads its products over
    the threads: half the last-level cache, beyond which they stream from memory (16
    to 64 MiB: never below the fixed size it replaced, below which timings found that
    a dispatch to the threads costs more than it saves)."""
    return power_of_two_within(machine.last_level.size // 2, 2**24, 2**26)


def gathered_values(machine):
    """float64 values gathered at once, pair by pair: half a CPU's share of the
    last-level cache, so that a block stays there from the gather to its use (2^20
    to 2^22: never below the fixed size it replaced, chosen by timings)."""
    return power_of_two_within(machine.last_level_share // 2 // 8, 2**20, 2**22)
