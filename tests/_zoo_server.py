"""A small HTTP file server on 127.0.0.1 for the zoo tests: honours Range, logs every request."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Served:
    body: bytes
    content_type: str = "application/octet-stream"
    honour_range: bool = True
    cut_after: int | None = None  # close the connection after this many body bytes (a broken download)
    delay: float = 0.0  # seconds to wait before answering (keeps a download in flight)
    range_from_zero: bool = False  # answer a Range request with 206 but the whole file (Content-Range bytes 0-...)


@dataclass
class Logged:
    path: str
    range: str | None
    status: int
    sent: int


@dataclass
class FileServer:
    files: dict[str, Served] = field(default_factory=dict)
    log: list[Logged] = field(default_factory=list)
    port: int = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def start(server_state: FileServer) -> tuple[ThreadingHTTPServer, threading.Thread]:
    state = server_state

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep test output clean
            return None

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            served = state.files.get(self.path)
            rng = self.headers.get("Range")
            # Each request is logged before its response goes out, so a test that
            # reads the log after the client returns never races the handler thread.
            if served is None:
                state.log.append(Logged(self.path, rng, 404, 0))
                self.send_error(404)
                return
            time.sleep(served.delay)
            body, start_at, status = served.body, 0, 200
            m = re.fullmatch(r"bytes=(\d+)-", rng or "")
            if m and served.range_from_zero:
                status = 206
            elif m and served.honour_range:
                start_at = int(m.group(1))
                if start_at >= len(body):
                    state.log.append(Logged(self.path, rng, 416, 0))
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(body)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status = 206
            chunk = body[start_at:]
            sent = chunk if served.cut_after is None else chunk[: served.cut_after]
            state.log.append(Logged(self.path, rng, status, len(sent)))
            self.send_response(status)
            self.send_header("Content-Type", served.content_type)
            self.send_header("Content-Length", str(len(chunk)))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start_at}-{len(body) - 1}/{len(body)}")
            self.end_headers()
            self.wfile.write(sent)
            self.wfile.flush()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.timeout = 5
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return httpd, thread
