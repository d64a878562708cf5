"""Typed errors raised by shiftbench.

Every error that comes from bad user input names the argument, the value it
got and what is allowed, and carries them as attributes so that callers can
react programmatically.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ShiftbenchError",
    "InvalidArgumentError",
    "UnknownNameError",
    "UnknownCorruptionError",
    "InvalidSeverityError",
    "ImageTypeError",
    "ImageShapeError",
    "ImageRangeError",
    "MissingDependencyError",
    "ClusterConnectionError",
    "DataError",
    "MissingWeightsError",
    "WeightsFormatError",
    "ImageFileError",
]


class ShiftbenchError(Exception):
    """Base class of every error raised on purpose by shiftbench."""

    def __reduce__(self) -> tuple[Any, ...]:
        # errors cross process boundaries pickled (generate's workers); subclasses take other
        # constructor arguments than their message, so rebuild without calling __init__
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: type[ShiftbenchError], args: tuple[Any, ...], state: dict[str, Any]) -> ShiftbenchError:
    err = cls.__new__(cls, *args)
    err.args = args
    err.__dict__.update(state)
    return err


class InvalidArgumentError(ShiftbenchError, ValueError):
    """An argument has a value outside what is allowed."""

    def __init__(self, argument: str, value: Any, allowed: str, hint: str = "") -> None:
        self.argument = argument
        self.value = value
        self.allowed = allowed
        self.hint = hint
        msg = f"{argument}={value!r} is not valid: allowed {allowed}."
        if hint:
            msg += f" {hint}"
        super().__init__(msg)


class UnknownNameError(InvalidArgumentError, KeyError):
    """A name (corruption, perturbation, edition, benchmark...) is not registered."""

    def __init__(self, argument: str, value: Any, choices: list[str], suggestions: list[str]) -> None:
        self.choices = list(choices)
        self.suggestions = list(suggestions)
        hint = f"Did you mean {', '.join(repr(s) for s in suggestions)}?" if suggestions else ""
        shown = ", ".join(choices) if len(choices) <= 40 else ", ".join(choices[:40]) + ", ..."
        super().__init__(argument, value, f"one of: {shown}", hint)

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0])


class UnknownCorruptionError(UnknownNameError):
    """The corruption name is not in the registry."""


class InvalidSeverityError(InvalidArgumentError):
    """Severity is not an integer in 1..5 (or the range of the operation)."""


class ImageTypeError(ShiftbenchError, TypeError):
    """The image has an unsupported Python type or dtype."""

    def __init__(self, argument: str, value: Any, allowed: str) -> None:
        self.argument = argument
        self.value = value
        self.allowed = allowed
        super().__init__(f"{argument} has unsupported type or dtype {value}: allowed {allowed}.")


class ImageShapeError(InvalidArgumentError):
    """The image has an unsupported shape (rank, channel count, or size)."""


class ImageRangeError(InvalidArgumentError):
    """A float image has values outside [0, 1]."""


class MissingDependencyError(ShiftbenchError, ImportError):
    """An optional dependency is missing; the message says how to install it."""

    def __init__(self, package: str, feature: str, extra: str | None = None) -> None:
        self.package = package
        self.feature = feature
        install = f"pip install 'shiftbench[{extra}]'" if extra else f"pip install {package}"
        super().__init__(f"{feature} needs the package {package!r}, which is not installed. Install it with: {install}")


class ClusterConnectionError(InvalidArgumentError, ConnectionError):
    """A compute cluster (``--ray ADDRESS``) cannot be reached or cannot run the work as asked."""


class DataError(ShiftbenchError):
    """A dataset on disk is missing, incomplete or unreadable."""


class ImageFileError(DataError, ValueError):
    """An image file or array whose content cannot be read exactly (a refused mode, values out of range, NaN,
    labels that do not match); the message names the file. A ``ValueError`` too, so readers that skip unreadable
    images (``bad_images="skip"``) count it with them."""


class MissingWeightsError(DataError, FileNotFoundError):
    """A network's weight file is missing; the message names the file, how to point to it and where it comes from."""

    def __init__(self, argument: str, path: Any, hint: str) -> None:
        self.argument = argument
        self.path = path
        self.hint = hint
        super().__init__(f"{argument}: weight file {str(path)!r} does not exist. {hint}")


class WeightsFormatError(DataError):
    """A weight file exists but is not what it must be (wrong keys or shapes, not a state_dict, unsafe pickle)."""

    def __init__(self, argument: str, path: Any, problem: str) -> None:
        self.argument = argument
        self.path = path
        self.problem = problem
        super().__init__(f"{argument}: weight file {str(path)!r} is not usable: {problem}")
