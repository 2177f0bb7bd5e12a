"""Where the plugin and the reference engine keep per-user files when nobody says otherwise."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["user_cache_dir"]


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/pytest-cuzk`` (``~/.cache/pytest-cuzk`` without it): test data, params, PCE files."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-cuzk"
