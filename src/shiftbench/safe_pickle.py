"""Reading pickled data files without running their code.

Released datasets of our field ship as pickles (the CIFAR "python version"
batches, ``Icons-50.npy`` as a pickled dict). ``pickle.load`` on such a file runs
whatever its ``__reduce__`` names, so a file from an untrusted mirror can run a
shell command. :func:`load` admits only what such data files hold: plain
containers (dict, list, tuple, set), numbers, strings, bytes, ``None`` and NumPy
arrays, dtypes and scalars. Anything else (a function, a class, a module
attribute) raises :class:`UnsafePickleError` before it is looked up, so no
code named by the file is imported or called.

    >>> import io, pickle
    >>> load(io.BytesIO(pickle.dumps({"labels": [1, 2]})), source="batch")
    {'labels': [1, 2]}
"""

from __future__ import annotations

import _compat_pickle
import io
import pickle
from pathlib import Path
from typing import IO, Any

from .errors import DataError

__all__ = ["UnsafePickleError", "load", "load_file", "ALLOWED_GLOBALS"]

# The only globals a data pickle may reference: how NumPy arrays, dtypes and
# scalars reconstruct themselves (module paths of NumPy 1.x and 2.x), and the
# builtins that pickle protocol 2+ names for containers.
ALLOWED_GLOBALS: frozenset[tuple[str, str]] = frozenset(
    {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "bytearray"),
        ("builtins", "complex"),
        ("builtins", "slice"),
        ("_codecs", "encode"),
        ("collections", "OrderedDict"),
    }
)


class UnsafePickleError(DataError):
    """A pickle names something other than plain data; nothing it names was run."""

    def __init__(self, source: str, module: str, name: str) -> None:
        self.source = source
        self.module = module
        self.name = name
        super().__init__(
            f"{source}: refused to unpickle: it references {module}.{name}, which is not plain data "
            "(allowed: dict, list, tuple, set, numbers, strings, bytes, None and NumPy arrays). "
            "Nothing in the file was run."
        )


class _DataUnpickler(pickle.Unpickler):
    def __init__(self, file: IO[bytes], source: str, encoding: str) -> None:
        super().__init__(file, encoding=encoding)
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        # Python 2 names ("__builtin__", "copy_reg"), mapped as pickle itself maps them.
        module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        if (module, name) not in ALLOWED_GLOBALS:
            raise UnsafePickleError(self._source, module, name)
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError(self._source, "<persistent id>", repr(pid)[:40])


def load(file: IO[bytes], *, source: str = "<pickle>", encoding: str = "ASCII") -> Any:
    """Unpickle plain data from an open binary file; refuse everything else.

    Args:
        file: a binary file object positioned at the pickle.
        source: how to name the file in errors (usually its path).
        encoding: for Python 2 pickles (``"bytes"`` keeps their str as bytes,
            as the CIFAR batches expect; ``"latin1"`` as NumPy arrays need).

    Raises:
        UnsafePickleError: the pickle references a class or function that is
            not plain data.
        DataError: the file is truncated or not a pickle.
    """
    try:
        return _DataUnpickler(file, source, encoding).load()
    except UnsafePickleError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError) as e:
        raise DataError(f"{source}: not a readable pickle ({type(e).__name__}: {e})") from e


def load_file(path: str | Path, *, encoding: str = "ASCII") -> Any:
    """:func:`load` on a file path; the path names the file in every error."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise DataError(f"{str(p)!r} cannot be read: {e.strerror or e}") from e
    return load(io.BytesIO(data), source=repr(str(p)), encoding=encoding)
