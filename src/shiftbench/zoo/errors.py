"""Errors of the model zoo: downloads that fail, files that do not verify, checkpoints that are refused."""

from __future__ import annotations

from pathlib import Path

from ..errors import InvalidArgumentError, ShiftbenchError

__all__ = ["DownloadError", "OfflineError", "ChecksumMismatchError", "NotACheckpointError", "UnsafeCheckpointError"]


class DownloadError(ShiftbenchError, OSError):
    """A published file could not be downloaded into the cache.

    Attributes:
        url: where the file is published.
        path: the exact cache path the file is expected at (place it there by hand to skip the download).
    """

    def __init__(self, url: str, path: str | Path, reason: str) -> None:
        self.url = url
        self.path = str(path)
        self.reason = reason
        super().__init__(
            f"Could not download {url}: {reason}. To use the file without a download, fetch it yourself and "
            f"place it at {self.path}"
        )

    def __str__(self) -> str:  # OSError would otherwise format errno/strerror
        return str(self.args[0])


class OfflineError(DownloadError):
    """The server could not be reached (no network, connection refused, DNS failure, timeout)."""


class ChecksumMismatchError(DownloadError):
    """The downloaded file's SHA-256 (or size) differs from the published one; the file was deleted."""

    def __init__(self, url: str, path: str | Path, expected: str, actual: str) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(
            url,
            path,
            f"checksum mismatch: published {expected}, downloaded file has {actual}; "
            "the file was deleted (a truncated, altered or replaced file)",
        )


class NotACheckpointError(DownloadError):
    """The server answered with something other than the file (e.g. an HTML page from a file host)."""


class UnsafeCheckpointError(InvalidArgumentError):
    """A checkpoint cannot be read with ``torch.load(weights_only=True)``: it needs code to be unpickled.

    Nothing from the file was executed.
    """
