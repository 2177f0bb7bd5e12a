"""The one way a URL or DSN is shown or kept: with its password and secret parameters masked.

Manifest URLs, ``--cuzk-status`` addresses and ``--cuzk-results-db`` DSNs may carry
credentials (``postgresql://user:pw@host/db``, ``https://TOKEN@host/f``,
``https://host/f?X-Amz-Signature=...``). Whatever reaches a message, a log, a report or a JSON
file goes through ``redact`` first, which masks every URL in a text: the password of its
userinfo, the whole userinfo when it has no password (a token sent as the user name cannot be
told from a user name), and the values of secret-like parameters in its query or fragment
(an OAuth ``#access_token=``).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["MASK", "redact"]

MASK = "***"
# A scheme, "://", then everything up to whitespace, a quote or a bracket that closes a repr.
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'\"<>`]+")
# Parameter names that hold secrets, as part of the name: token, access_token, X-Amz-Signature,
# X-Amz-Credential, X-Goog-Signature, sig (Azure SAS), api_key, password, client_secret ...
_SECRET = re.compile(r"pass|pwd|secret|token|key|sig|auth|credential|session|jwt|bearer", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with every URL in it masked (``user:***@host``, ``?token=***``)."""
    return _URL.sub(lambda m: _redact_url(m.group(0)), text)


def _redact_url(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL after all (say, a bracket in the host): mask what may be userinfo
        return re.sub(r"//[^/@]*@", f"//{MASK}@", url)
    netloc = parts.netloc
    userinfo, at, host = netloc.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    if at:
        netloc = f"{user}:{MASK}@{host}" if colon else f"{MASK}@{host}"
    query, fragment = _redact_params(parts.query), _redact_params(parts.fragment)
    if (netloc, query, fragment) == (parts.netloc, parts.query, parts.fragment):
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def _redact_params(params: str) -> str:
    """``a=1&token=t`` with its secret-like values masked; unchanged when it holds none."""
    pairs = parse_qsl(params, keep_blank_values=True)
    if not any(_SECRET.search(k) for k, _ in pairs):
        return params
    return urlencode([(k, MASK if _SECRET.search(k) else v) for k, v in pairs], safe="*")
