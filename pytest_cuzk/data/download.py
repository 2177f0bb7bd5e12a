"""One file over HTTP into a ``.part`` beside its final name, resumed only when that is safe.

A transfer that breaks off keeps what arrived; the next attempt resumes it with ``Range``,
but only with ``If-Range`` set to the validator (ETag, else Last-Modified) the first
response carried, recorded beside the ``.part``: a server whose file changed answers with
the whole new file, and nothing is spliced. Without a validator it starts over. A
transfer that sends no byte for ``stall_s``, or takes longer than ``deadline_s`` in all
(a server trickling a byte every few seconds), is given up, naming which.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

import requests
import urllib3

from pytest_cuzk.core.progress import Progress

__all__ = ["NET_CHUNK", "Failed", "Retry", "Transfer", "forget_part"]

NET_CHUNK = 64 << 10  # a cut transfer loses at most one chunk of what arrived
CONNECT_S = 30.0


class Retry(Exception):
    """The transfer broke off; the next attempt resumes it where that is safe."""


class Failed(Exception):
    """The download cannot succeed now (an HTTP error, an unreachable host, a deadline)."""


@dataclass(frozen=True)
class Transfer:
    """How downloads run: the stall and overall deadlines, and where progress goes."""

    progress: Progress
    stall_s: float = 60.0
    deadline_s: float = 3600.0

    def fetch(self, session: requests.Session, url: str, name: str, part: Path) -> int | None:
        """Bring ``url`` into ``part``; returns the full size the server announced (None: it did not)."""
        validator = _load_validator(part, url)
        offset = part.stat().st_size if part.exists() and validator else 0
        headers = {"Accept-Encoding": "identity"}
        if offset:
            headers |= {"Range": f"bytes={offset}-", "If-Range": validator or ""}
        try:
            resp = session.get(url, headers=headers, stream=True, timeout=(CONNECT_S, self.stall_s))
        except requests.RequestException as exc:
            raise Failed(f"cannot reach {url}: {exc}") from exc
        with resp:
            start, total = _content_range(resp)
            if resp.status_code == 416 or (resp.status_code == 206 and start != offset):
                forget_part(part)
                raise Retry(f"{url} could not resume at byte {offset}; starting over")
            if resp.status_code not in (200, 206):
                raise Failed(f"{url} answered HTTP {resp.status_code} {resp.reason}")
            if resp.status_code == 200:
                offset = 0  # a changed file, or no Range support: the whole file, from the start
            _save_validator(part, url, resp)
            done = self._stream(resp, url, name, part, offset, total)
        if total is not None and done < total:
            raise Retry(f"transfer ended after {done} of {total} bytes")
        return total

    def _stream(
        self, resp: requests.Response, url: str, name: str, part: Path, offset: int, total: int | None
    ) -> int:
        done, started = offset, time.monotonic()
        with part.open("ab" if offset else "wb") as fh:
            try:
                # read1: whatever one socket read brings, so a trickle still meets the deadline check
                while chunk := resp.raw.read1(NET_CHUNK):
                    fh.write(chunk)
                    done += len(chunk)
                    self.progress(name, done, total)
                    if time.monotonic() - started > self.deadline_s:
                        raise Failed(
                            f"{url} was still sending after {self.deadline_s:.0f} s ({done} bytes so far); "
                            "raise --cuzk-download-timeout, or fetch the file yourself"
                        )
            except urllib3.exceptions.ReadTimeoutError as exc:
                raise Failed(
                    f"{url} sent no byte for {self.stall_s:g} s after {done} bytes "
                    "(--cuzk-download-stall); the server stalled"
                ) from exc
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise Retry(f"transfer broke off after {done} bytes: {exc}") from exc
        return done


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
    validator = resp.headers.get("ETag") or resp.headers.get("Last-Modified")
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
