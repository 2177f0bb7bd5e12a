"""One file over HTTP into a ``.part`` beside its final name, resumed only when that is safe.

A transfer that breaks off keeps what arrived; the next attempt resumes it with ``Range``,
but only with ``If-Range`` set to the validator (ETag, else Last-Modified) the first
response carried, recorded beside the ``.part``; a ``206`` is taken only when it carries
that same validator (a server that ignores ``If-Range`` would splice two versions of the
file), else the download starts over. Without a validator it starts over. A transfer that
sends no byte for ``stall_s`` is given up; so is a download, all its attempts together,
at its ``Deadline``: its socket is shut then, wherever the transfer is (a server trickling
its headers or body a byte at a time). The response head must arrive whole within the stall
time (its bytes are no progress), and a head the connection cut before its blank line is a
broken transfer, never a response with an empty body. A body longer than the ``limit`` it may
have, or announced so, is refused as soon as that shows, never stored whole, never in memory.
The transfer runs in a thread of its own so that the waiting thread can say how far it is
while no byte comes.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import requests
import urllib3

from pytest_cuzk.core.errors import DataDirUnwritable
from pytest_cuzk.core.progress import ProgressLine
from pytest_cuzk.data.connections import Deadline, HeadCut
from pytest_cuzk.vocab.redact import redact

__all__ = [
    "NET_CHUNK",
    "RETRIED_STATUSES",
    "Failed",
    "SizeMismatch",
    "Transfer",
    "Transient",
    "forget_part",
]

NET_CHUNK = 64 << 10  # a cut transfer loses at most one chunk of what arrived
CONNECT_S = 30.0
TICK_S = 0.5  # how often the waiting thread looks at a transfer in flight
RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})  # a busy or restarting server: try again


class Transient(Exception):
    """An attempt failed in a way the next may not (a cut, a refused connection, a busy server).

    The next attempt resumes what arrived where that is safe.
    """


class Failed(Exception):
    """The download cannot succeed now (an HTTP error, a stall, a deadline, a size)."""


class SizeMismatch(Failed):
    """The server announces or sends a length other than the manifest's ``size``: fix the manifest."""


@dataclass
class _Meter:
    """How far a transfer in flight is: written by its thread, shown by the waiting one."""

    done: int = 0
    total: int | None = None


@dataclass(frozen=True)
class Transfer:
    """How downloads run: the stall and overall deadlines, and the line that shows their progress."""

    progress: ProgressLine = field(default_factory=ProgressLine)
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
        The transfer runs in a thread of its own while this one shows its progress every tick,
        bytes or none (a server that sends nothing yet is a wait the log must show).
        """
        meter = _Meter()
        run: Callable[..., int | None] = contextvars.copy_context().run  # the Deadline in force, there too
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="cuzk-download") as pool:
            future = pool.submit(run, self._fetch, http, url, part, deadline, limit, size, meter)
            try:
                while not concurrent.futures.wait([future], timeout=TICK_S).done:
                    self.progress.download(name, meter.done, meter.total)
            except BaseException:  # Ctrl-C while waiting: the transfer's thread must end too
                deadline.cut()
                raise
        total = future.result()
        self.progress.download(name, meter.done, total)
        return total

    def _fetch(
        self,
        http: requests.Session,
        url: str,
        part: Path,
        deadline: Deadline,
        limit: int,
        size: int | None,
        meter: _Meter,
    ) -> int | None:
        shown = redact(url)
        validator = _load_validator(part, url)
        offset = part.stat().st_size if part.exists() and validator else 0
        if passed := self._passed(deadline, shown, offset):  # in the pause before this attempt
            raise passed
        headers = {"Accept-Encoding": "identity"}
        if offset:
            headers |= {"Range": f"bytes={offset}-", "If-Range": validator or ""}
        try:
            timeout = (min(CONNECT_S, deadline.left()), min(self.stall_s, deadline.left()))
            resp = http.get(url, headers=headers, stream=True, timeout=timeout)
        except requests.RequestException as exc:  # its text, not its chain: that holds the URL unmasked
            raise self._passed(deadline, shown, offset) or self._unanswered(shown, exc) from None
        with resp:
            start, total = _content_range(resp)
            meter.done, meter.total = offset, total
            if resp.status_code == 416 or (resp.status_code == 206 and start != offset):
                forget_part(part)
                raise Transient(f"{shown} could not resume at byte {offset}; starting over")
            if resp.status_code == 206 and offset and (got := _validator(resp)) != validator:
                forget_part(part)
                raise Transient(
                    f"{shown} answered a resume with another version of the file (its validator "
                    f"{got or 'is missing'}, where the part came with {validator}); starting over"
                )
            if resp.status_code in RETRIED_STATUSES:
                raise Transient(f"{shown} answered HTTP {resp.status_code} {resp.reason}")
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
            done = self._stream(resp, shown, part, offset, deadline, limit, size, meter)
        if total is not None and done < total:
            raise Transient(f"transfer ended after {done} of {total} bytes")
        return total

    def _unanswered(self, shown: str, exc: requests.RequestException) -> Exception:
        """Why a request got no response: a stalled or cut head, an unreachable host, a bad URL."""
        if isinstance(exc, requests.ReadTimeout):
            return Failed(
                f"{shown} sent no whole response head in {self.stall_s:g} s (--cuzk-download-stall); "
                "the server stalled"
            )
        cut = next((e for e in _causes(exc) if isinstance(e, HeadCut)), None)
        if cut is not None:
            return Transient(f"{shown}: {cut}")
        if isinstance(exc, requests.ConnectionError):
            return Transient(f"cannot reach {shown}: {redact(str(exc))}")
        return Failed(f"{shown}: {redact(str(exc))}")  # too many redirects, a URL requests refuses

    def _stream(
        self,
        resp: requests.Response,
        shown: str,
        part: Path,
        offset: int,
        deadline: Deadline,
        limit: int,
        size: int | None,
        meter: _Meter,
    ) -> int:
        done = offset
        with part.open("ab" if offset else "wb") as fh:
            try:
                # read1: whatever one socket read brings, so a trickle still meets the deadline check
                while chunk := resp.raw.read1(NET_CHUNK):
                    _write(fh, chunk, part)
                    done += len(chunk)
                    meter.done = done
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
                raise self._passed(deadline, shown, done) or Transient(
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


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """An exception and those it wraps, as requests and urllib3 wrap them (in args and ``reason``)."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo and len(seen) < 16:
        err = todo.pop()
        seen.append(err)
        yield err
        inner = [getattr(err, "reason", None), err.__cause__, *err.args]
        todo += [e for e in inner if isinstance(e, BaseException) and e not in seen]


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
    if not isinstance(record, dict) or record.get("url_sha256") != _digest(url):
        return None
    value = record.get("validator")
    return value if isinstance(value, str) and value else None


def _save_validator(part: Path, url: str, resp: requests.Response) -> None:
    validator = _validator(resp)
    path = _validator_path(part)
    if validator and not validator.startswith("W/"):  # a weak ETag cannot vouch for a byte range
        path.write_text(json.dumps({"url_sha256": _digest(url), "validator": validator}))
    else:
        path.unlink(missing_ok=True)


def _digest(url: str) -> str:
    """What a ``.part``'s record keeps of its URL: enough to compare, nothing a token can be read from."""
    return hashlib.sha256(url.encode()).hexdigest()


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
