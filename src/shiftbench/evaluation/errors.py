"""Typed errors of the evaluation pipeline.

They extend :mod:`shiftbench.errors`: every error caused by bad input names the
argument (or file), the value it got and what is allowed, and keeps those as
attributes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import (
    DataError,
    InvalidArgumentError,
    MissingDependencyError,
    ShiftbenchError,
)

__all__ = [
    "ModelOutputError",
    "IncompleteDatasetError",
    "ImageReadError",
    "StoreError",
    "StoreSchemaError",
    "IncompleteResultsError",
    "MissingPackageError",
    "WeightsUnavailableError",
]


class ModelOutputError(ShiftbenchError, ValueError):
    """The model returned logits that cannot be scored (wrong width, NaN or inf).

    Attributes:
        model: the model's name.
        problem: what is wrong, in words.
        expected: what was expected.
        got: what the model returned.
    """

    def __init__(self, model: str, problem: str, expected: str, got: str, hint: str = "") -> None:
        self.model = model
        self.problem = problem
        self.expected = expected
        self.got = got
        msg = f"model {model!r}: {problem}: expected {expected}, got {got}."
        if hint:
            msg += f" {hint}"
        super().__init__(msg)


class IncompleteDatasetError(DataError):
    """A released dataset lacks corruptions, severities or classes that were asked for.

    Attributes:
        root: the dataset's root folder.
        missing: one line per missing piece, e.g. ``"frost/3"``.
    """

    def __init__(self, argument: str, root: str, missing: Sequence[str], allowed: str, hint: str = "") -> None:
        self.argument = argument
        self.root = root
        self.missing = list(missing)
        shown = ", ".join(self.missing[:30]) + (f", ... ({len(self.missing)} in all)" if len(self.missing) > 30 else "")
        msg = f"{argument}={root!r} is incomplete: missing {shown}. Expected {allowed}."
        if hint:
            msg += f" {hint}"
        super().__init__(msg)


class ImageReadError(DataError):
    """An image file cannot be decoded (unreadable, truncated or not an image).

    Attributes:
        path: the file.
        reason: the decoder's message.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"image {path!r} cannot be read ({reason}). Allowed: readable image files; "
            "pass --bad-images skip (bad_images='skip') to skip and count such files instead."
        )


class StoreError(ShiftbenchError):
    """The results store cannot be opened or used."""


class StoreSchemaError(StoreError):
    """The results store was written with a schema this version does not read.

    Attributes:
        path: the store file.
        found: the schema version in the file.
        supported: the newest schema version this shiftbench reads.
    """

    def __init__(self, path: str, found: int, supported: int) -> None:
        self.path = path
        self.found = found
        self.supported = supported
        super().__init__(
            f"--store {path!r} was written with results-store schema version {found}, by a newer shiftbench; "
            f"this shiftbench reads schema versions up to {supported}. Upgrade shiftbench, or pass --store with "
            "another file."
        )


class IncompleteResultsError(InvalidArgumentError):
    """A metric needs results (corruptions, severities, clean error) that are absent."""


class MissingPackageError(MissingDependencyError):
    """An optional package is missing; the message gives the exact install command."""

    def __init__(self, package: str, feature: str, install: str) -> None:
        self.package = package
        self.feature = feature
        self.install = install
        ImportError.__init__(
            self, f"{feature} needs the package {package!r}, which is not installed. Install it with: {install}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.package, self.feature, self.install))


class WeightsUnavailableError(DataError):
    """A model's pretrained weights are not on this machine and cannot be fetched.

    Attributes:
        model: the model as the user named it.
        url: where the weights are published ("" when the model's own code fetches them and does not say).
        path: the exact path to place a copy at (None when there is no such path).
        reason: why they could not be fetched.
    """

    def __init__(self, model: str, url: str, path: str | None, reason: str) -> None:
        self.model = model
        self.url = url
        self.path = path
        self.reason = reason
        msg = f"{model}: the weights are not on this machine and could not be fetched"
        if url:
            msg += f" from {url}"
        msg += f" ({reason})."
        if path:
            msg += f" Download the file elsewhere and place it at {path}, or pass --weights FILE."
        else:
            msg += " Pass --weights FILE with a local copy."
        super().__init__(msg)
