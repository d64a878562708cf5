"""Typed errors of the ImageNet-P modules (subclasses of :mod:`shiftbench.errors`)."""

from __future__ import annotations

from typing import Any

from ..errors import DataError, InvalidArgumentError, UnknownNameError

__all__ = [
    "UnknownPerturbationError",
    "InvalidDifficultyError",
    "VideoShapeError",
    "CorruptVideoError",
]


class UnknownPerturbationError(UnknownNameError):
    """The perturbation name is not in the ImageNet-P registry."""


class InvalidDifficultyError(InvalidArgumentError):
    """Difficulty is not an integer in 1..3, or is above 1 where the benchmark defines none."""


class VideoShapeError(DataError):
    """A video's frame count or frame size differs from what its perturbation and edition imply.

    Attributes:
        path: the file.
        what: ``"frames"`` or ``"size"``.
        expected: what the perturbation implies.
        got: what the file holds.
    """

    def __init__(self, path: str, what: str, expected: Any, got: Any, hint: str = "") -> None:
        self.path = path
        self.what = what
        self.expected = expected
        self.got = got
        msg = f"{path}: {what} is {got!r}, expected {expected!r}."
        if hint:
            msg += f" {hint}"
        super().__init__(msg)


class CorruptVideoError(DataError):
    """A video file cannot be opened or decoded.

    Attributes:
        path: the file.
        reason: what went wrong.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: unreadable video ({reason}).")
