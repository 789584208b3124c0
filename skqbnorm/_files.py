"""The command line's files: inputs checked before they are read, outputs that never touch an input.

Every problem is a :class:`CommandError`, which the command line reports in one line
with exit status 2. Inputs: the ``.npy`` header is checked against the file size (an
``.npz`` member's header against its uncompressed size) before anything is mapped or
decompressed, then the dtype, the shape and finite values. Outputs: a temporary file
beside the target, reserved before any work is done, replaces the target at the end,
and never an input (also through links), nor an existing file without ``--force``;
the temporary file is removed on any error, on Ctrl-C and on SIGTERM.
"""

import contextlib
import math
import os
import secrets
import shutil
import signal
import threading
import zipfile
import zlib
from collections import namedtuple
from pathlib import Path
from tokenize import TokenError

import numpy as np
from sklearn.utils import gen_batches

from ._core import all_finite, rows_per_chunk
from ._validation import check_relevance


class CommandError(Exception):
    """An error the command line reports in one line, with exit status 2."""


class Terminated(BaseException):
    """SIGTERM arrived while ``--save`` held its temporary file (exit status 143).

    A BaseException, as KeyboardInterrupt is, so that no ``except Exception`` on the
    way stops it before the temporary file is removed.
    """


# -- loading: headers checked before any mapping or decompression -----------------------

# What an input may hold: dtype kinds (float, signed/unsigned integer, bool) and ranks.
Expected = namedtuple("Expected", "kinds ndims what")
SIMILARITIES = Expected("fiu", (2,), "a similarity matrix (float or integer)")
TARGETS = Expected("iufb", (1, 2), "gallery indices (1-D integers) or a relevance matrix (2-D)")
HEADER_READERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}
NPY_MAGIC, ZIP_MAGIC = b"\x93NUMPY", b"PK"
# What parsing a corrupt header's dict text can raise (a tokenizer error, before Python
# 3.12, for an unclosed bracket; a recursion error for deeply nested ones).
HEADER_ERRORS = (ValueError, TypeError, SyntaxError, OverflowError, TokenError, RecursionError)


def checked_header(stream, size, where, expected):
    """Shape and dtype from the .npy header at ``stream``, whose data must fit in ``size`` bytes.

    Serves an .npy file (``size``: the file size) and an .npz member (``size``: the
    uncompressed size from the zip directory), so nothing is mapped or decompressed
    for a header that lies.
    """
    try:
        version = np.lib.format.read_magic(stream)
        if version not in HEADER_READERS:
            raise ValueError(f"unsupported .npy format version {version}")
        shape, _, dtype = HEADER_READERS[version](stream)
        if any(length < 0 for length in shape):
            raise ValueError(f"negative length in shape {shape}")
    except HEADER_ERRORS as error:
        raise CommandError(f"{where}: not a valid .npy file ({error}).") from error
    if dtype.kind not in expected.kinds or dtype.fields is not None or dtype.subdtype:
        raise CommandError(f"{where}: holds {dtype} values; expected {expected.what}.")
    if len(shape) not in expected.ndims:
        raise CommandError(f"{where}: has shape {shape}; expected {expected.what}.")
    needed = stream.tell() + math.prod(shape) * dtype.itemsize
    if needed > size:
        raise CommandError(
            f"{where}: truncated or corrupt: its header announces shape {shape} of {dtype} "
            f"({needed} bytes with the header) but it holds only {size} bytes."
        )
    return shape, dtype


def load_array(path, option, expected):
    """The array in ``path``: an .npy memory-mapped, or the chosen member of an .npz."""
    path = Path(path)
    where = f"{option} {path}"
    if path.is_dir():
        raise CommandError(f"{where}: is a folder, not a .npy or .npz file.")
    if not path.exists():
        raise CommandError(f"{where}: no such file.")
    if not path.is_file():
        raise CommandError(f"{where}: is not a regular file.")
    if path.suffix not in (".npy", ".npz"):
        raise CommandError(f"{where}: expected a .npy or .npz file.")
    try:
        with open(path, "rb") as stream:
            check_content(stream.read(len(NPY_MAGIC)), path.suffix, where)
            stream.seek(0)
            if path.suffix == ".npy":
                checked_header(stream, os.fstat(stream.fileno()).st_size, where, expected)
        if path.suffix == ".npy":
            return np.load(path, mmap_mode="r", allow_pickle=False)
        return load_npz_member(path, option.lstrip("-").replace("-", "_"), where, expected)
    except OSError as error:
        raise CommandError(f"{where}: cannot read it ({error.strerror or error}).") from error


def check_content(start, suffix, where):
    """Refuse a file whose first bytes do not match its suffix."""
    if not start:
        raise CommandError(f"{where}: is empty (0 bytes).")
    content = ".npy" if start == NPY_MAGIC else ".npz" if start.startswith(ZIP_MAGIC) else None
    if content is None:
        raise CommandError(f"{where}: is neither an .npy file nor an .npz archive.")
    if content != suffix:
        kind = "an .npy array" if content == ".npy" else "a zip archive (.npz)"
        raise CommandError(f"{where}: holds {kind} under a {suffix} name; rename it {content}.")


def load_npz_member(path, name, where, expected):
    """One array of an .npz: its header and size checked before its data is decompressed."""
    try:
        with zipfile.ZipFile(path) as archive:
            member = choose_member(archive, name, where)
            info = archive.getinfo(member)
            where = f"{where} [{member}]"
            with archive.open(info) as stream:
                shape, dtype = checked_header(stream, info.file_size, where, expected)
            check_fits_in_memory(math.prod(shape) * dtype.itemsize, where)
            with archive.open(info) as stream:
                return np.lib.format.read_array(stream, allow_pickle=False)
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError,
            RuntimeError) as error:
        raise CommandError(f"{where}: not a readable .npz archive ({error}).") from error
    except MemoryError as error:
        raise CommandError(f"{where}: does not fit in memory; save it as .npy.") from error


def choose_member(archive, name, where):
    """The member holding the one array of the archive, or the array called ``name``."""
    arrays = {member[: -len(".npy")]: member for member in archive.namelist()
              if member.endswith(".npy")}
    if len(arrays) == 1:
        return next(iter(arrays.values()))
    if name in arrays:
        return arrays[name]
    if not arrays:
        raise CommandError(f"{where}: holds no arrays.")
    raise CommandError(f"{where} holds several arrays {list(arrays)}; name one of them {name!r}.")


def check_fits_in_memory(n_bytes, where):
    """An .npz member is decompressed into memory: refuse one larger than the machine's RAM."""
    memory = physical_memory()
    if memory is not None and n_bytes > memory:
        raise CommandError(
            f"{where}: needs {n_bytes / 2**30:.1f} GiB decompressed, more than this machine's "
            f"{memory / 2**30:.1f} GiB; save it as .npy, which is memory-mapped."
        )


def physical_memory():
    """The machine's RAM in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def load_similarities(path, option):
    """A 2-D, non-empty, finite similarity matrix (an .npy stays memory-mapped)."""
    matrix = load_array(path, option, SIMILARITIES)
    where = f"{option} {path}"
    if matrix.shape[0] == 0:
        raise CommandError(f"{where}: has shape {matrix.shape}; it needs at least one row.")
    if matrix.shape[1] == 0:
        raise CommandError(f"{where}: has shape {matrix.shape}; the gallery is empty.")
    check_finite(matrix, where)
    return matrix


def check_finite(matrix, where):
    """Name the first NaN or inf, reading the matrix in row blocks."""
    if matrix.dtype.kind != "f":
        return
    step = rows_per_chunk(matrix.shape[1], matrix.dtype.itemsize, n_buffers=2)
    for rows in gen_batches(matrix.shape[0], step):
        block = np.asarray(matrix[rows])
        if not all_finite(block):
            row, column = np.argwhere(~np.isfinite(block))[0]
            raise CommandError(
                f"{where}: the similarity of row {rows.start + row} to gallery item {column} "
                f"is {block[row, column]}; every similarity must be finite."
            )


def load_gt(path, shape, of="--sims"):
    """The correct gallery index per query (int64) or a boolean relevance matrix, checked.

    ``shape`` is that of the query-by-gallery similarities, and ``of`` names the
    option it comes from in messages (``"--queries"`` for embeddings).
    """
    where = f"--gt {path}"
    gt = np.array(load_array(path, "--gt", TARGETS))
    if gt.ndim == 2:
        return relevance_matrix(gt, shape, where, of)
    n_queries, n_gallery = shape
    if gt.dtype.kind == "b":
        raise CommandError(f"{where}: holds booleans; a 1-D gt holds one gallery index per query.")
    if len(gt) != n_queries:
        raise CommandError(
            f"{where}: has shape {gt.shape}; gt needs one gallery index per query of "
            f"{of} ({n_queries},)."
        )
    bad = np.flatnonzero(~np.isfinite(gt) | (gt != np.round(gt)) | (gt < 0) | (gt >= n_gallery))
    if bad.size:
        raise CommandError(
            f"{where}: gt must hold gallery indices in [0, {n_gallery}); query {bad[0]} "
            f"has {gt[bad[0]]} ({bad.size} such queries)."
        )
    return gt.astype(np.int64)


def relevance_matrix(gt, shape, where, of="--sims"):
    """A 2-D gt: 0/1 (or boolean) of the shape of --sims, with a relevant item per query."""
    if of != "--sims":  # embeddings: the shape is that of their similarities
        of = f"{of} x --gallery"
    try:
        return check_relevance(gt, shape, of=of)
    except ValueError as error:
        raise CommandError(f"{where}: {error}") from None


# -- the output: never an input, reserved before the evaluation, replaced at the end ------
# (and never an existing file without --force)


def output_path(save):
    """The file ``--save`` writes: ``.npy`` is appended when the name lacks it."""
    if not save:
        raise CommandError("--save needs a file name such as out.npy.")
    if save.endswith(os.sep) or Path(save).is_dir():
        raise CommandError(f"--save {save}: is a folder; give a file name such as out.npy.")
    if save.endswith(".npz"):
        raise CommandError(f"--save {save}: writes one .npy file, not an .npz archive.")
    return Path(save if save.endswith(".npy") else save + ".npy")


NOT_INSTALLED = object()  # ReservedOutput's SIGTERM handler is not in place


class ReservedOutput:
    """A temporary file beside the target (resolved through links), created on entering
    the ``with`` block.

    Creating it proves the folder writable before any work is done; :meth:`commit`
    fills it and replaces the target, and leaving the ``with`` block without a commit
    (an error, Ctrl-C, or SIGTERM, which raises :class:`Terminated` inside the block)
    removes it. The target is refused when it is one of ``inputs`` (same file, also
    through symbolic or hard links), anything but a regular file, or, unless
    ``force``, an existing file.
    """

    def __init__(self, path, inputs, force=False):
        self.path, self.force = path, force
        self.target = Path(os.path.realpath(path))
        check_target(self.target, path, inputs, force)
        name = f".{self.target.name}.{secrets.token_hex(4)}.tmp"
        self.temporary = self.target.parent / name
        self.file = None
        self._previous_handler = NOT_INSTALLED

    def __enter__(self):
        self._catch_sigterm()
        try:
            descriptor = os.open(self.temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            self.file = os.fdopen(descriptor, "wb")
        except OSError as error:
            self._release()
            raise CommandError(
                f"--save {self.path}: cannot write in {self.target.parent} "
                f"({error.strerror or error})."
            ) from error
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, *exc_info):
        self._release()

    def _release(self):
        """Close and remove the temporary file (if it is still there); restore SIGTERM."""
        try:
            if self.file is not None:
                self.file.close()
            self.temporary.unlink(missing_ok=True)
        finally:
            if self._previous_handler is not NOT_INSTALLED:
                # None: a handler not installed from Python; the default is the closest
                previous = self._previous_handler
                signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
                self._previous_handler = NOT_INSTALLED

    def _catch_sigterm(self):
        """SIGTERM, which would end the process without removing the temporary file,
        removes it and raises :class:`Terminated` instead (signals are handled in the
        main thread), wherever in the block it arrives, the cleanup itself included."""
        if threading.current_thread() is not threading.main_thread():
            return

        def terminated(signum, frame):
            with contextlib.suppress(OSError):
                self.temporary.unlink(missing_ok=True)
            raise Terminated

        self._previous_handler = signal.signal(signal.SIGTERM, terminated)

    def commit(self, array):
        """Write ``array`` and move it into place; return the path written."""
        np.save(self.file, array, allow_pickle=False)
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        if self.target.exists():
            if not self.force:  # it appeared during the evaluation
                raise CommandError(existing_message(self.path, self.target))
            shutil.copymode(self.target, self.temporary)
        os.replace(self.temporary, self.target)
        return self.target


def existing_message(path, target):
    """The refusal of an existing ``--save`` target, naming it and ``--force``."""
    real = "" if os.path.abspath(path) == str(target) else f" (the file {target})"
    return f"--save {path}: exists already{real}; pass --force to replace it."


def check_target(target, path, inputs, force=False):
    """Refuse a target in no folder, a folder, an input, an existing file unless
    ``force``, or a file that is not writable."""
    folder = target.parent
    if not folder.is_dir():
        reason = "does not exist" if not folder.exists() else "is not a folder"
        raise CommandError(f"--save {path}: the folder {folder} {reason}.")
    if target.is_dir():
        raise CommandError(f"--save {path}: is a folder; give a file name such as out.npy.")
    if not target.exists():
        return
    if not target.is_file():
        raise CommandError(f"--save {path}: exists and is not a regular file.")
    for option, source in inputs.items():
        if source is not None and Path(source).exists() and os.path.samefile(target, source):
            raise CommandError(
                f"--save {path}: is the input {option} {source} (the same file); "
                "choose another name."
            )
    if not force:
        raise CommandError(existing_message(path, target))
    if not os.access(target, os.W_OK):
        raise CommandError(f"--save {path}: exists and is read-only.")
