"""One generic name -> thing registry: built-in entries, aliases, entry points, and a did-you-mean error.

Every table of named things shiftbench looks up by a user's string (benchmarks, model
sources, ...) is a :class:`Registry`. Names are normalised (stripped, lower case by
default) before lookup; an unknown name raises
:class:`~shiftbench.errors.UnknownNameError` with the registered names and the closest
ones. An installed package adds entries through an entry-point group: each entry point
is loaded the first time the registry is read (an entry point that fails to load is
reported by name, never silently dropped).

Example::

    from shiftbench.registry import Registry

    colours: Registry[str] = Registry("colour")
    colours.register("red", "#ff0000", aliases=("rouge",))
    colours.get("Rouge")          # '#ff0000'
    colours.get("rde")            # UnknownNameError: ... Did you mean 'red'?
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from .errors import InvalidArgumentError, UnknownNameError

__all__ = ["Registry", "close_matches"]

T = TypeVar("T")
_MISSING = object()


def _plain(name: object) -> str:
    return str(name).strip().lower().replace("-", "_").replace(" ", "_")


def close_matches(name: str, names: Iterable[str], n: int = 3, cutoff: float = 0.5, *, substrings: bool = True) -> list[str]:
    """The names closest to a mistyped ``name``, for "Did you mean ...?" (shiftbench's one way of suggesting).

    Names containing ``name`` (or contained in it) first (unless ``substrings`` is False), then the
    closest by ``difflib``'s ratio (at least ``cutoff``); case, spaces, dashes and underscores are not
    told apart.
    """
    choices = list(dict.fromkeys(str(c) for c in names))
    plain = {}
    for c in choices:
        plain.setdefault(_plain(c), c)
    low = _plain(name)
    subs = [c for c in choices if substrings and low and _plain(c) and (low in _plain(c) or _plain(c) in low)]
    fuzzy = [plain[m] for m in difflib.get_close_matches(low, list(plain), n=n, cutoff=cutoff)]
    return list(dict.fromkeys(subs + fuzzy))[:n]


class Registry(Mapping[str, T]):
    """Named entries of one kind (a read-only mapping: ``name in r``, ``r[name]``, ``sorted(r)``).

    Args:
        kind: what an entry is, as the argument name of errors (``"benchmark"``, ``"model source"``).
        group: the entry-point group installed packages register through (None: none).
        modules: modules imported before the first lookup (built-in entries that register themselves).
        normalise: turns a user's name into a key (default: stripped, lower case).
        check: validates and converts an entry on registration (e.g. instantiates a class).
        cutoff: how close a name must be to be suggested (``difflib``'s ratio, 0..1).
        error: the error an unknown name raises (an :class:`~shiftbench.errors.UnknownNameError` subclass).
        entries: initial entries by name.
        shown: how the error shows a name (e.g. ``"zoo:" + name``; the unknown one as normalised).
        order: the sort key of the names the error lists (default: registration order).
    """

    def __init__(
        self,
        kind: str,
        *,
        group: str | None = None,
        modules: Sequence[str] = (),
        normalise: Callable[[str], str] = lambda s: str(s).strip().lower(),
        check: Callable[[str, T], T] | None = None,
        cutoff: float = 0.6,
        error: type[UnknownNameError] = UnknownNameError,
        entries: Mapping[str, T] | None = None,
        shown: Callable[[str], str] | None = None,
        order: Callable[[str], Any] | None = None,
    ) -> None:
        self.error, self.shown, self.order = error, shown, order
        self.kind, self.group, self.modules = kind, group, tuple(modules)
        self.normalise, self.check, self.cutoff = normalise, check, cutoff
        self._entries: dict[str, T] = {}
        self._aliases: dict[str, str] = {}
        self._loaded = False
        self._loading = False
        for name, entry in (entries or {}).items():
            self.register(name, entry)

    def register(self, name: str, entry: T, *, aliases: Sequence[str] = (), replace: bool = False) -> T:
        """Add ``entry`` under ``name`` (and ``aliases``); returns it (as ``check`` made it).

        Raises:
            InvalidArgumentError: an empty name, or one taken by another entry (pass ``replace=True``).
        """
        key = self.normalise(name)
        if not key:
            raise InvalidArgumentError(f"{self.kind} name", name, "a non-empty name")
        if self.check is not None:
            entry = self.check(key, entry)
        old = self._entries.get(key)
        if old is not None and not replace and type(old) is not type(entry) and old is not entry:
            raise InvalidArgumentError(f"{self.kind} name", name, "a name not registered yet", "Pass replace=True.")
        self._entries[key] = entry
        for a in aliases:
            self._aliases[self.normalise(a)] = key
        return entry

    def registered(self, name: str) -> bool:
        """Whether ``name`` is registered already, without importing the built-in modules or entry points (for
        a module registering its own entries while it is imported)."""
        k = self.normalise(name)
        return self._aliases.get(k, k) in self._entries

    def unregister(self, name: str) -> None:
        """Remove an entry and its aliases (tests, notebooks)."""
        key = self.normalise(name)
        self._entries.pop(key, None)
        self._aliases = {a: k for a, k in self._aliases.items() if k != key}

    def load(self) -> None:
        """Import the built-in modules and, once, the installed entry points."""
        if self._loading:
            return
        self._loading = True
        try:
            for mod in self.modules:
                importlib.import_module(mod)
            if self._loaded or self.group is None:
                self._loaded = True
                return
            self._loaded = True
            for ep in importlib.metadata.entry_points(group=self.group):
                try:
                    obj = ep.load()
                except Exception as e:  # noqa: BLE001 - reported with the entry point's name
                    raise InvalidArgumentError(
                        f"entry point {ep.name!r} of {self.group}", getattr(ep, "value", ep.name),
                        f"an importable {self.kind}", f"Loading it failed: {e}") from e
                self.register(ep.name, obj, replace=True)
        finally:
            self._loading = False

    def names(self) -> list[str]:
        """Registered names, built-in ones first, then in registration order."""
        self.load()
        return list(self._entries)

    def key(self, name: str) -> str:
        """The registered name ``name`` (or an alias of it) stands for.

        Raises:
            UnknownNameError: no such entry (with the registered names and the closest ones).
        """
        self.load()
        k = self.normalise(name)
        k = self._aliases.get(k, k)
        if k not in self._entries:
            names = list(self._entries) if self.order is None else sorted(self._entries, key=self.order)
            near = close_matches(k, names + list(self._aliases), cutoff=self.cutoff)
            show = self.shown or str
            raise self.error(self.kind, show(k) if self.shown else name, [show(n) for n in names],
                             [show(n) for n in near])
        return k

    def get(self, name: str, default: object = _MISSING) -> T:  # type: ignore[override]
        """The entry called ``name`` (or an alias of it); see :meth:`key` for the error (with ``default``:
        that instead of the error, as ``dict.get``)."""
        if default is not _MISSING and name not in self:
            return default  # type: ignore[return-value]
        return self._entries[self.key(name)]

    def __contains__(self, name: object) -> bool:
        self.load()
        if not isinstance(name, str):
            return False
        k = self.normalise(name)
        return self._aliases.get(k, k) in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __len__(self) -> int:
        return len(self.names())

    def items(self) -> list[tuple[str, T]]:
        self.load()
        return list(self._entries.items())
