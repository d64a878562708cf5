"""Verified, resumable downloads into shiftbench's cache (standard library HTTP only).

A file is written to ``<name>.part`` next to its final path and renamed into
place only once it is complete and its checksum verified, so an interrupted
download (even kill -9) never leaves a file that looks finished: the next call
resumes the ``.part`` with an HTTP ``Range`` request (or starts again when the
server ignores ranges).
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from .errors import ChecksumMismatchError, DownloadError, NotACheckpointError, OfflineError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["cache_dir", "download", "sha256_of", "ProgressCallback", "rich_progress", "line_progress"]

ProgressCallback = Callable[[int, "int | None"], None]
"""Called as ``progress(bytes_done, bytes_total)`` after each chunk (total None when unknown)."""

CHUNK = 1 << 16
USER_AGENT = "shiftbench-zoo (python urllib)"


def cache_dir() -> Path:
    """The zoo's cache folder: ``$SHIFTBENCH_CACHE/zoo`` when set, else ``~/.cache/shiftbench/zoo``."""
    root = os.environ.get("SHIFTBENCH_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "shiftbench"
    return base / "zoo"


def sha256_of(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def rich_progress(description: str, console: Console | None = None) -> tuple[ProgressCallback, Callable[[], None]]:
    """A rich byte-progress bar (size, speed, ETA) on stderr; returns ``(callback, stop)``."""
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console or Console(stderr=True),
        transient=False,
    )
    task = bar.add_task(description, total=None)
    bar.start()

    def update(done: int, total: int | None) -> None:
        bar.update(task, completed=done, total=total)

    return update, bar.stop


def _verify(url: str, part: Path, final: Path, sha256: str | None, size: int | None) -> str:
    """Check the finished ``.part``; delete it and raise on a mismatch. Returns its SHA-256."""
    actual_size = part.stat().st_size
    if size is not None and actual_size != size:
        part.unlink(missing_ok=True)
        raise ChecksumMismatchError(url, final, f"{size} bytes", f"{actual_size} bytes")
    digest = sha256_of(part)
    if sha256 is not None and not digest.startswith(sha256.lower()):
        part.unlink(missing_ok=True)
        raise ChecksumMismatchError(url, final, f"sha256 {sha256.lower()}...", f"sha256 {digest}")
    return digest


def _open(url: str, offset: int, timeout: float) -> tuple[http.client.HTTPResponse, int]:
    """Open the URL (from ``offset`` with a Range request); returns (response, status)."""
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    req = urllib.request.Request(url, headers=headers)
    resp = urllib.request.urlopen(req, timeout=timeout)  # noqa: S310 - http(s) URLs from package data or the caller
    return resp, int(getattr(resp, "status", 200))


def _range_start(header: object) -> int | None:
    """The first byte of a ``Content-Range: bytes A-B/N`` header (None: missing or malformed)."""
    import re

    m = re.match(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$", str(header or ""))
    return int(m.group(1)) if m else None


def download(
    url: str,
    dest: str | Path,
    *,
    sha256: str | None = None,
    size: int | None = None,
    progress: ProgressCallback | None = None,
    timeout: float = 30.0,
) -> Path:
    """Download ``url`` to ``dest`` (verified, resumable); return ``dest``.

    An existing ``dest`` is returned as it is (it was verified when it was
    placed; place a file there by hand to skip the download). A leftover
    ``dest.part`` is resumed with an HTTP Range request.

    Args:
        url: an ``http(s)://`` URL.
        dest: the final path; its folder is created.
        sha256: the published SHA-256, in full or a prefix of it (e.g. the
            8 hex digits torch.hub puts in file names); None when none is published.
        size: the published size in bytes, if any.
        progress: called with (bytes done, bytes total or None) as data arrives.
        timeout: seconds to wait for the server at each step.

    Raises:
        OfflineError: the server cannot be reached (names the URL and the path to place the file at).
        NotACheckpointError: the server sent an HTML page instead of the file.
        ChecksumMismatchError: the file does not match ``sha256``/``size``; it was deleted.
        DownloadError: any other HTTP failure.
    """
    final = Path(dest).expanduser()
    if final.is_file():
        return final
    if not url.lower().startswith(("http://", "https://")):
        raise DownloadError(url, final, "only http:// and https:// URLs are downloaded")
    final.parent.mkdir(parents=True, exist_ok=True)
    with _folder_lock(final.parent):  # one writer per cache folder (parallel workers fetching the same model)
        if final.is_file():  # another process finished it while this one waited
            return final
        return _transfer(url, final, sha256, size, progress, timeout)


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive advisory lock on a folder (POSIX flock; released by the OS if the process dies)."""
    if fcntl is None:  # pragma: no cover - Windows: no lock
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _transfer(
    url: str, final: Path, sha256: str | None, size: int | None, progress: ProgressCallback | None, timeout: float
) -> Path:
    """Fetch ``url`` into ``final.part`` (resuming it), verify, move into place."""
    part = final.with_name(final.name + ".part")
    offset = part.stat().st_size if part.is_file() else 0
    try:
        resp, status = _open(url, offset, timeout)
    except urllib.error.HTTPError as e:
        e.close()  # the error holds the connection open otherwise
        if e.code == 416 and offset:  # the .part already holds the whole file
            _verify(url, part, final, sha256, size)
            os.replace(part, final)
            return final
        raise DownloadError(url, final, f"HTTP {e.code} {e.reason}") from e
    except (TimeoutError, urllib.error.URLError, ConnectionError) as e:
        reason = getattr(e, "reason", e)
        raise OfflineError(url, final, f"the server could not be reached ({reason})") from e
    with resp:
        ctype = str(resp.headers.get("Content-Type", "")).lower()
        if "text/html" in ctype:
            raise NotACheckpointError(
                url, final, "the server answered with a web page, not the file (a file host's confirmation page?)"
            )
        if status == 206:
            start = _range_start(resp.headers.get("Content-Range"))
            if start == offset:
                mode = "ab"
            elif start == 0:  # the server sent the file from byte 0 after all: start again, never append it
                offset, mode = 0, "wb"
            else:
                raise DownloadError(url, final, f"asked for bytes from {offset}, the server answered "
                                    f"Content-Range {resp.headers.get('Content-Range')!r}; delete {part} to start "
                                    "again")  # fmt: skip
        else:  # 200: the server ignored the range (or there was none): start from byte 0
            offset, mode = 0, "wb"
        length = resp.headers.get("Content-Length")
        total = offset + int(length) if length is not None else size
        done = offset
        if progress is not None:
            progress(done, total)
        try:
            with open(part, mode) as out:
                while True:
                    chunk = resp.read(CHUNK)
                    if not chunk:
                        break
                    out.write(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(done, total)
                out.flush()
                os.fsync(out.fileno())
        except (OSError, http.client.HTTPException) as e:
            raise DownloadError(
                url,
                final,
                f"the transfer stopped after {done} bytes ({type(e).__name__}: {e}; run again to resume from {part})",
            ) from e
    if length is not None and done != total:
        raise DownloadError(url, final, f"the server sent {done} of {total} bytes (run again to resume)")
    _verify(url, part, final, sha256, size)
    os.replace(part, final)
    return final


def line_progress(description: str, stream: TextIO | None = None) -> ProgressCallback:
    """Progress as plain lines (logs, CI): the start, then about every 10 %."""
    out = stream if stream is not None else sys.stderr
    state = {"next": 0.0}

    def update(done: int, total: int | None) -> None:
        if total:
            if done / total >= state["next"]:
                print(f"{description}: {done / 1e6:.1f} of {total / 1e6:.1f} MB ({100 * done / total:.0f} %)", file=out)
                state["next"] = (int(done / total * 10) + 1) / 10
        elif state["next"] == 0.0:
            print(f"{description}: downloading (size unknown)", file=out)
            state["next"] = 1.0

    return update


def default_progress(description: str) -> tuple[ProgressCallback, Callable[[], None]]:
    """A rich bar on a terminal, plain lines otherwise."""
    if sys.stderr.isatty():
        return rich_progress(description)
    return line_progress(description), lambda: None
