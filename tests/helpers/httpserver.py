"""A small real HTTP server on 127.0.0.1 for download tests.

Serves in-memory files with Range, ETag and If-Range support, and can misbehave on
purpose: answer 404 or 503, cut the connection after N bytes (of the body, or inside the
head), ignore Range, honour Range but ignore If-Range, leave out Content-Length or the
ETag, date each version with Last-Modified, announce a length it does not send, send
slowly, trickle a byte at a time (the body, or the headers too), redirect, or serve a huge
body made on the fly. Every request is recorded so tests can assert what the client sent.

    with FileServer() as server:
        url = server.add("/c1.json", payload)
        server.cut_after("/c1.json", 1000)   # the next GET breaks off after 1000 bytes
        ...
        assert server.count("/c1.json") == 2
        assert server.requests[-1].headers["Range"] == "bytes=1000-"
"""

from __future__ import annotations

import hashlib
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

__all__ = ["FileServer", "Request"]

CHUNK = 64 * 1024


@dataclass(frozen=True)
class Request:
    """One request the server saw."""

    method: str
    path: str
    headers: dict[str, str]


@dataclass
class _Rules:
    files: dict[str, bytes] = field(default_factory=dict)
    cuts: dict[str, list[int]] = field(default_factory=dict)
    after_cut: dict[str, bytes] = field(default_factory=dict)
    ignore_range: bool = False
    delay_s: float = 0.0
    no_length: bool = False  # close-delimited bodies, as HTTP/1.0 allows
    no_etag: bool = False
    last_modified: bool = False  # a Last-Modified of each version's own
    trickle_s: float = 0.0  # one byte, then this pause, over and over
    trickle_headers: bool = False  # the status line and headers trickle too
    ignore_if_range: bool = False  # a Range is served from whatever the file is now
    length: int | None = None  # the Content-Length to announce instead of the true one
    huge: dict[str, int] = field(default_factory=dict)  # path -> bytes of zeros, made as they are sent
    head_cuts: dict[str, list[int]] = field(default_factory=dict)  # path -> bytes of head sent, then close
    redirects: dict[str, str] = field(default_factory=dict)  # path -> where a 302 sends it
    busy: dict[str, int] = field(default_factory=dict)  # path -> how many more GETs answer 503


class FileServer:
    """Serve bytes over HTTP on a free loopback port until closed; a context manager."""

    def __init__(self) -> None:
        self.rules = _Rules()
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="test-http", daemon=True
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def url(self, path: str) -> str:
        """Full URL of ``path`` (served or not: unknown paths answer 404)."""
        return self.base_url + path

    def add(self, path: str, data: bytes) -> str:
        """Serve ``data`` at ``path``; return its URL."""
        self.rules.files[path] = data
        return self.url(path)

    def remove(self, path: str) -> None:
        """Stop serving ``path``: it answers 404 from now on."""
        self.rules.files.pop(path, None)

    def cut_after(self, path: str, nbytes: int, times: int = 1, then_serve: bytes | None = None) -> None:
        """Make the next ``times`` GETs of ``path`` close the connection after ``nbytes`` body bytes.

        ``then_serve``: the file changes upstream right after the cut.
        """
        self.rules.cuts[path] = [nbytes] * times
        if then_serve is not None:
            self.rules.after_cut[path] = then_serve

    def cut_head(self, path: str, nbytes: int, times: int = 1) -> None:
        """Make the next ``times`` GETs of ``path`` close the connection after ``nbytes`` of the head."""
        self.rules.head_cuts[path] = [nbytes] * times

    def unavailable(self, path: str, times: int = 1) -> None:
        """Answer the next ``times`` GETs of ``path`` with 503, as a busy or restarting server does."""
        self.rules.busy[path] = times

    def redirect(self, path: str, to: str) -> None:
        """Answer GETs of ``path`` with a 302 to ``to`` (itself: a redirect loop)."""
        self.rules.redirects[path] = to

    def ignore_range(self, on: bool = True) -> None:
        """Answer every GET with the whole file (200), as servers without Range support do."""
        self.rules.ignore_range = on

    def leave_out(self, length: bool = False, etag: bool = False) -> None:
        """Send no Content-Length (the body ends when the connection closes), or no ETag."""
        self.rules.no_length, self.rules.no_etag = length, etag

    def date_versions(self) -> None:
        """Send Last-Modified, a date of each version's own (two versions never share one)."""
        self.rules.last_modified = True

    def trickle(self, pause_s: float) -> None:
        """Send the body a byte at a time, ``pause_s`` apart: never stalled, never done."""
        self.rules.trickle_s = pause_s

    def trickle_headers(self, pause_s: float) -> None:
        """Send the status line and headers a byte at a time, ``pause_s`` apart (then the body, likewise)."""
        self.rules.trickle_s, self.rules.trickle_headers = pause_s, True

    def ignore_if_range(self) -> None:
        """Serve a Range from the file as it is now, whatever If-Range says: the splicing server."""
        self.rules.ignore_if_range = True

    def announce(self, length: int) -> None:
        """Send ``Content-Length: length`` whatever the body is."""
        self.rules.length = length

    def add_huge(self, path: str, size: int) -> str:
        """Serve ``size`` zero bytes at ``path``, made as they are sent (a body no test holds)."""
        self.rules.huge[path] = size
        return self.url(path)

    def slow(self, delay_s: float) -> None:
        """Sleep ``delay_s`` before each 64 KiB chunk, to keep a transfer in flight."""
        self.rules.delay_s = delay_s

    def count(self, path: str | None = None, method: str = "GET") -> int:
        """Number of ``method`` requests seen, for ``path`` or for any path."""
        with self._lock:
            return sum(1 for r in self.requests if r.method == method and path in (None, r.path))

    def record(self, request: Request) -> None:
        """Append a request (called by the handler threads)."""
        with self._lock:
            self.requests.append(request)

    def close(self) -> None:
        """Stop serving and free the port."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FileServer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _handler_for(server: FileServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            server.record(Request("GET", self.path, dict(self.headers.items())))
            rules = server.rules
            if rules.busy.get(self.path):
                rules.busy[self.path] -= 1
                self.send_error(503)
                return
            if self.path in rules.redirects:
                self.send_response(302)
                self.send_header("Location", rules.redirects[self.path])
                self.send_header("Content-Length", "0")
                super().end_headers()
                return
            if self.path in rules.huge:
                self._send_huge(rules.huge[self.path])
                return
            data = rules.files.get(self.path)
            if data is None:
                self.send_error(404)
                return
            digest = hashlib.sha1(data).hexdigest()
            etag = f'"{digest}"'
            modified = formatdate(int(digest[:7], 16), usegmt=True)
            validator = etag if not rules.no_etag else modified if rules.last_modified else None
            start = _range_start(self.headers.get("Range")) if not rules.ignore_range else None
            if_range = self.headers.get("If-Range")
            if (
                start is not None
                and if_range is not None
                and if_range != validator
                and not rules.ignore_if_range
            ):
                start = None  # the file changed since the client's part: the whole new one
            if start is not None and start >= len(data):
                self.send_error(416)
                return
            body = data[start or 0 :]
            self.send_response(200 if start is None else 206)
            if not rules.no_length:
                self.send_header("Content-Length", str(len(body) if rules.length is None else rules.length))
            if not rules.no_etag:
                self.send_header("ETag", etag)
            if rules.last_modified:
                self.send_header("Last-Modified", modified)
            self.send_header("Accept-Ranges", "none" if rules.ignore_range else "bytes")
            if start is not None:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.end_headers()
            cuts = rules.cuts.get(self.path)
            limit = cuts.pop(0) if cuts else len(body)
            self._send(body[:limit], rules.delay_s, rules.trickle_s)
            if limit < len(body) and self.path in rules.after_cut:
                rules.files[self.path] = rules.after_cut.pop(self.path)
            self.close_connection = True

        def end_headers(self) -> None:
            cuts = server.rules.head_cuts.get(getattr(self, "path", ""))  # no path: a request not parsed
            if cuts:
                self._headers_buffer.append(b"\r\n")
                head, self._headers_buffer = b"".join(self._headers_buffer), []
                self.wfile.write(head[: cuts.pop(0)])
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)  # the body's writes fail, and are let fail
                self.close_connection = True
                return
            if not server.rules.trickle_headers:
                super().end_headers()
                return
            self._headers_buffer.append(b"\r\n")
            head, self._headers_buffer = b"".join(self._headers_buffer), []
            self._send(head, 0.0, server.rules.trickle_s)

        def _send_huge(self, size: int) -> None:
            self.send_response(200)
            if not server.rules.no_length:
                self.send_header("Content-Length", str(size))
            self.end_headers()
            zeros = bytes(CHUNK)
            try:
                for offset in range(0, size, CHUNK):
                    self.wfile.write(zeros[: min(CHUNK, size - offset)])
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

        def _send(self, body: bytes, delay_s: float, trickle_s: float) -> None:
            """Send ``body`` slowly as asked; a client that gave up on it (tests make it) is no error."""
            step = 1 if trickle_s else CHUNK
            try:
                for offset in range(0, len(body), step):
                    if trickle_s:
                        self.wfile.write(body[offset : offset + 1])
                        self.wfile.flush()
                        time.sleep(trickle_s)
                        continue
                    if delay_s:
                        time.sleep(delay_s)
                    self.wfile.write(body[offset : offset + CHUNK])
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def log_message(self, format: str, *args: object) -> None:
            """Keep test output quiet."""

    return Handler


def _range_start(header: str | None) -> int | None:
    match = re.fullmatch(r"bytes=(\d+)-", header or "")
    return int(match.group(1)) if match else None
