"""The param cache directory: made on first need, or a clear word on why it cannot be one."""

from __future__ import annotations

import os
from pathlib import Path

from pytest_cuzk.refengine.errors import RefEngineError

__all__ = ["ParamCacheError", "check_param_cache"]


class ParamCacheError(RefEngineError, ValueError):
    """A param cache the engine cannot use; the message names it and says what to do."""


def check_param_cache(path: Path) -> None:
    """Make the param cache (a writable directory) or say why it cannot be one."""
    if path.exists() and not path.is_dir():
        raise ParamCacheError(f"param cache {path} is not a directory; set srs.param_cache to a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ParamCacheError(f"cannot create param cache {path}: {exc.strerror}") from exc
    if not os.access(path, os.W_OK):
        raise ParamCacheError(
            f"param cache {path} is read-only: cuzk-ref writes its keys, PCE files and locks there; "
            "make it writable or set srs.param_cache to another directory"
        )
