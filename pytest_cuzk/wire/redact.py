"""The one way a URL or DSN is shown or kept: with its password and secret parameters masked.

Manifest URLs, ``--cuzk-status`` addresses and ``--cuzk-results-db`` DSNs may carry
credentials (``postgresql://user:pw@host/db``, ``https://host/f?token=...``). Whatever reaches a
message, a log, a report or a JSON file goes through ``redact`` first, which masks every URL in
a text: the password of its userinfo and the values of password-like query parameters.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["MASK", "redact"]

MASK = "***"
# A scheme, "://", then everything up to whitespace, a quote or a bracket that closes a repr.
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'\"<>`]+")
_SECRET = re.compile(r"pass|pwd|secret|token|key|sig|auth|credential|session", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with every URL in it masked (``user:***@host``, ``?token=***``)."""
    return _URL.sub(lambda m: _redact_url(m.group(0)), text)


def _redact_url(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL after all (say, a bracket in the host): mask what may be userinfo
        return re.sub(r"//[^/@]*:[^/@]*@", f"//{MASK}@", url)
    netloc, query = parts.netloc, parts.query
    userinfo, at, host = netloc.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    if at and colon:
        netloc = f"{user}:{MASK}@{host}"
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(_SECRET.search(k) for k, _ in pairs):
        query = urlencode([(k, MASK if _SECRET.search(k) else v) for k, v in pairs], safe="*")
    if (netloc, query) == (parts.netloc, parts.query):
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
