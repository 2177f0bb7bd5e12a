"""The HTTP connections of a download: a ``Deadline`` can shut them, and a response head must arrive whole.

A read timeout restarts with each byte, so it bounds neither a server trickling its body
(the ``Deadline`` does: its timer shuts every socket the download opened) nor one trickling
its head (the stall time does, the same way, while the head is awaited). http.client takes a
connection that ends inside a head for a whole head and an empty body; here that is a
``HeadCut``, a broken transfer.
"""

from __future__ import annotations

import contextlib
import contextvars
import http.client
import socket
import threading
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

__all__ = ["Deadline", "HeadCut", "session"]

_WATCHED: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("cuzk_download", default=None)


class Deadline:
    """The end of one download, all its attempts together; at it, every socket it opened is shut.

    A read timeout restarts with each byte, so it cannot bound a server that trickles; a
    timer that shuts the socket can, in the headers as in the body.
    """

    def __init__(self, seconds: float, stall_s: float | None = None) -> None:
        """``stall_s``: the time a response head may take to arrive whole (None: the deadline's)."""
        self.seconds = seconds
        self.stall_s = stall_s
        self.end = time.monotonic() + seconds
        self.passed = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._token: contextvars.Token[Deadline | None] | None = None

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.passed:
                _shut(sock)

    def cut(self) -> None:
        """Shut every socket now and from now on: the deadline passed, or the wait was interrupted."""
        with self._lock:
            self.passed = True
            for sock in self._sockets:
                _shut(sock)

    def pause(self, seconds: float) -> None:
        """Sleep between attempts, never past the deadline."""
        time.sleep(min(seconds, self.left()))

    @contextlib.contextmanager
    def head(self, sock: socket.socket) -> Iterator[None]:
        """Bound the wait for a response head by the stall time: bytes of a head are no progress.

        A read timeout restarts with each byte, so a server trickling its headers would meet
        only the deadline; this timer shuts the socket, and the wait ends as a read timeout.
        """
        if self.stall_s is None:
            yield
            return
        stalled = threading.Event()

        def stall() -> None:
            stalled.set()
            _shut(sock)

        timer = threading.Timer(min(self.stall_s, self.left()), stall)
        timer.daemon = True
        timer.start()
        try:
            yield
        except (OSError, http.client.HTTPException) as exc:
            if stalled.is_set():
                raise TimeoutError(f"no whole response head in {self.stall_s:g} s") from exc
            raise
        finally:
            timer.cancel()

    def __enter__(self) -> Deadline:
        self._timer = threading.Timer(self.left(), self.cut)
        self._timer.daemon = True
        self._timer.start()
        self._token = _WATCHED.set(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._token is not None:
            _WATCHED.reset(self._token)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed: nothing left to cut
        sock.shutdown(socket.SHUT_RDWR)


class HeadCut(http.client.HTTPException):
    """The connection ended inside a response head: http.client would take it for a whole one."""


class _Lines:
    """A response's file, counting what ``readline`` brought and whether the last line was the end."""

    def __init__(self, fp: Any) -> None:
        self.fp, self.bytes, self.last = fp, 0, b"\n"

    def readline(self, limit: int = -1) -> bytes:
        self.last = self.fp.readline(limit)
        self.bytes += len(self.last)
        return self.last

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fp, name)


class _WholeHead(http.client.HTTPResponse):
    """http.client's response, but a head cut before its blank line is an error, not a response."""

    def begin(self) -> None:
        lines = _Lines(self.fp)
        self.fp = lines  # type: ignore[assignment]
        try:
            super().begin()
        finally:
            now: Any = self.fp
            if now is lines:  # else begin closed it: a body of no bytes
                self.fp = lines.fp
        if lines.last == b"":
            raise HeadCut(f"the connection ended inside the response head, after {lines.bytes} bytes")


class _Watched(HTTPConnection):
    response_class = _WholeHead

    def connect(self) -> None:
        super().connect()
        if (deadline := _WATCHED.get()) is not None and self.sock is not None:
            deadline.watch(self.sock)

    def getresponse(self) -> Any:
        deadline = _WATCHED.get()
        if deadline is None or self.sock is None:
            return super().getresponse()
        with deadline.head(self.sock):
            return super().getresponse()


class _WatchedTLS(_Watched, HTTPSConnection):
    """The same, over TLS."""


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Watched


class _TLSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedTLS


class _Adapter(HTTPAdapter):
    """requests' adapter, whose connections a ``Deadline`` in force can shut."""

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **kwargs: Any) -> None:
        super().init_poolmanager(connections, maxsize, block, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _Pool, "https": _TLSPool}


def session() -> requests.Session:
    """A requests session whose downloads a ``Deadline`` bounds."""
    out = requests.Session()
    out.mount("http://", _Adapter())
    out.mount("https://", _Adapter())
    return out
