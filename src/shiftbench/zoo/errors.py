"""Errors of the model zoo: downloads that fail, files that do not verify, checkpoints that are refused."""

from __future__ import annotations

from pathlib import Path

from ..errors import InvalidArgumentError, ShiftbenchError

__all__ = ["DownloadError", "OfflineError", "ChecksumMismatchError", "CachedChecksumError", "NotACheckpointError", "UnsafeCheckpointError"]


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


class CachedChecksumError(ChecksumMismatchError):
    """A weights file already in the cache (or given as a local copy) whose SHA-256 differs from the published one:
    it is not used (other weights would be evaluated under the entry's name); the file is left where it is."""

    def __init__(self, url: str, path: str | Path, expected: str, actual: str) -> None:
        self.expected = expected
        self.actual = actual
        DownloadError.__init__(
            self,
            url,
            path,
            f"the cached file's checksum differs from the published one: published {expected}, the file has "
            f"{actual}; not used. Delete it to download it again, or pass --trust-cache (SHIFTBENCH_TRUST_CACHE=1) "
            "to use it anyway",
        )


class NotACheckpointError(DownloadError):
    """The server answered with something other than the file (e.g. an HTML page from a file host)."""


class UnsafeCheckpointError(InvalidArgumentError):
    """A checkpoint cannot be read with ``torch.load(weights_only=True)``: it needs code to be unpickled.

    Nothing from the file was executed.
    """
