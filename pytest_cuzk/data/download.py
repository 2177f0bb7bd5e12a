"""One file over HTTP into a ``.part`` beside its final name, resumed only when that is safe.

A transfer that breaks off keeps what arrived; the next attempt resumes it with ``Range``,
but only with ``If-Range`` set to the validator (ETag, else Last-Modified) the first
response carried, recorded beside the ``.part``; a ``206`` is taken only when it carries
that same validator (a server that ignores ``If-Range`` would splice two versions of the
file), else the download starts over. Without a validator it starts over. A transfer that
sends no byte for ``stall_s`` is given up; so is a download, all its attempts together,
at its ``Deadline``: its socket is shut then, wherever the transfer is (a server trickling
its headers or body a byte at a time). A body longer than the ``limit`` it may have, or
announced so, is refused as soon as that shows, never stored whole, never in memory.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import re
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from pytest_cuzk.core.errors import DataDirUnwritable
from pytest_cuzk.core.progress import Progress
from pytest_cuzk.wire.redact import redact

__all__ = ["NET_CHUNK", "Deadline", "Failed", "Retry", "SizeMismatch", "Transfer", "forget_part", "session"]

NET_CHUNK = 64 << 10  # a cut transfer loses at most one chunk of what arrived
CONNECT_S = 30.0


class Retry(Exception):
    """The transfer broke off; the next attempt resumes it where that is safe."""


class Failed(Exception):
    """The download cannot succeed now (an HTTP error, an unreachable host, a deadline, a size)."""


class SizeMismatch(Failed):
    """The server announces or sends a length other than the manifest's ``size``: fix the manifest."""


_WATCHED: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("cuzk_download", default=None)


class Deadline:
    """The end of one download, all its attempts together; at it, every socket it opened is shut.

    A read timeout restarts with each byte, so it cannot bound a server that trickles; a
    timer that shuts the socket can, in the headers as in the body.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
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

    def _cut(self) -> None:
        with self._lock:
            self.passed = True
            for sock in self._sockets:
                _shut(sock)

    def __enter__(self) -> Deadline:
        self._timer = threading.Timer(self.left(), self._cut)
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


class _Watched(HTTPConnection):
    def connect(self) -> None:
        super().connect()
        if (deadline := _WATCHED.get()) is not None and self.sock is not None:
            deadline.watch(self.sock)


class _WatchedTLS(HTTPSConnection):
    def connect(self) -> None:
        super().connect()
        if (deadline := _WATCHED.get()) is not None and self.sock is not None:
            deadline.watch(self.sock)


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


@dataclass(frozen=True)
class Transfer:
    """How downloads run: the stall and overall deadlines, and where progress goes."""

    progress: Progress
    stall_s: float = 60.0
    deadline_s: float = 3600.0

    def fetch(
        self,
        http: requests.Session,
        url: str,
        name: str,
        part: Path,
        deadline: Deadline,
        limit: int,
        size: int | None = None,
    ) -> int | None:
        """Bring ``url`` into ``part``; returns the full size the server announced (None: it did not).

        ``limit``: the most bytes the file may have; ``size``: the bytes it must have, when known.
        """
        shown = redact(url)
        validator = _load_validator(part, url)
        offset = part.stat().st_size if part.exists() and validator else 0
        headers = {"Accept-Encoding": "identity"}
        if offset:
            headers |= {"Range": f"bytes={offset}-", "If-Range": validator or ""}
        try:
            timeout = (min(CONNECT_S, deadline.left()), min(self.stall_s, deadline.left()))
            resp = http.get(url, headers=headers, stream=True, timeout=timeout)
        except requests.RequestException as exc:  # its text, not its chain: that holds the URL unmasked
            unreachable = Failed(f"cannot reach {shown}: {redact(str(exc))}")
            raise self._passed(deadline, shown, offset) or unreachable from None
        with resp:
            start, total = _content_range(resp)
            if resp.status_code == 416 or (resp.status_code == 206 and start != offset):
                forget_part(part)
                raise Retry(f"{shown} could not resume at byte {offset}; starting over")
            if resp.status_code == 206 and _validator(resp) != validator:
                forget_part(part)
                raise Retry(
                    f"{shown} answered a resume with another version of the file "
                    f"({_validator(resp)!r}, not {validator!r}); starting over"
                )
            if resp.status_code not in (200, 206):
                raise Failed(f"{shown} answered HTTP {resp.status_code} {resp.reason}")
            if resp.status_code == 200:
                offset = 0  # a changed file, or no Range support: the whole file, from the start
            if total is not None and size is not None and total != size:
                forget_part(part)
                raise SizeMismatch(f"{shown} announces {total} bytes, but the manifest's size says {size}")
            if total is not None and total > limit:
                forget_part(part)
                raise Failed(f"{shown} announces {total} bytes, more than the {limit} this file may have")
            _save_validator(part, url, resp)
            done = self._stream(resp, shown, name, part, offset, total, deadline, limit, size)
        if total is not None and done < total:
            raise Retry(f"transfer ended after {done} of {total} bytes")
        return total

    def _stream(
        self,
        resp: requests.Response,
        shown: str,
        name: str,
        part: Path,
        offset: int,
        total: int | None,
        deadline: Deadline,
        limit: int,
        size: int | None,
    ) -> int:
        done = offset
        with part.open("ab" if offset else "wb") as fh:
            try:
                # read1: whatever one socket read brings, so a trickle still meets the deadline check
                while chunk := resp.raw.read1(NET_CHUNK):
                    _write(fh, chunk, part)
                    done += len(chunk)
                    self.progress(name, done, total)
                    if done > limit:
                        fh.close()
                        forget_part(part)
                        if size is not None:
                            raise SizeMismatch(
                                f"{shown} sent more than the {size} bytes the manifest's size says"
                            )
                        raise Failed(f"{shown} sent more than {limit} bytes, the most this file may have")
                    if deadline.passed or not deadline.left():
                        break
            except urllib3.exceptions.ReadTimeoutError as exc:
                raise self._passed(deadline, shown, done) or Failed(
                    f"{shown} sent no byte for {self.stall_s:g} s after {done} bytes "
                    "(--cuzk-download-stall); the server stalled"
                ) from exc
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise self._passed(deadline, shown, done) or Retry(
                    f"transfer broke off after {done} bytes: {redact(str(exc))}"
                ) from exc
        if failed := self._passed(deadline, shown, done):
            raise failed
        return done

    @staticmethod
    def _passed(deadline: Deadline, shown: str, done: int) -> Failed | None:
        """The download's deadline as the reason it failed, when that is what happened."""
        if not deadline.passed and deadline.left():
            return None
        return Failed(
            f"{shown} was still sending after {deadline.seconds:g} s ({done} bytes so far, all attempts "
            "together); raise --cuzk-download-timeout, or fetch the file yourself"
        )


def _write(fh: BinaryIO, chunk: bytes, part: Path) -> None:
    """Write a chunk; a full or read-only disk is no broken transfer: it fails, and no ``.part`` is kept."""
    try:
        fh.write(chunk)
        fh.flush()
    except OSError as exc:
        forget_part(part)
        raise DataDirUnwritable(part, exc) from None


def _validator(resp: requests.Response) -> str | None:
    return resp.headers.get("ETag") or resp.headers.get("Last-Modified")


def _validator_path(part: Path) -> Path:
    return part.with_name(part.name + ".json")


def _load_validator(part: Path, url: str) -> str | None:
    """The ETag or Last-Modified the ``.part``'s bytes came with, when they came from ``url``."""
    try:
        record = json.loads(_validator_path(part).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("url") != url:
        return None
    value = record.get("validator")
    return value if isinstance(value, str) and value else None


def _save_validator(part: Path, url: str, resp: requests.Response) -> None:
    validator = _validator(resp)
    path = _validator_path(part)
    if validator and not validator.startswith("W/"):  # a weak ETag cannot vouch for a byte range
        path.write_text(json.dumps({"url": url, "validator": validator}))
    else:
        path.unlink(missing_ok=True)


def forget_part(part: Path) -> None:
    """Drop a ``.part`` and what it was resumed with."""
    with contextlib.suppress(OSError):
        part.unlink()
    _validator_path(part).unlink(missing_ok=True)


def _content_range(resp: requests.Response) -> tuple[int | None, int | None]:
    """Return (first byte sent, full size): from Content-Range on a 206, from Content-Length otherwise."""
    if resp.status_code == 206:
        match = re.fullmatch(r"bytes (\d+)-\d+/(\d+)", resp.headers.get("Content-Range", ""))
        return (int(match.group(1)), int(match.group(2))) if match else (None, None)
    length = resp.headers.get("Content-Length", "")
    return 0, int(length) if length.isdigit() else None
