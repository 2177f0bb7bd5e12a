"""Where the plugin and the reference engine keep per-user files when nobody says otherwise.

One rule on every platform, platformdirs': ``$XDG_CACHE_HOME`` and ``$XDG_DATA_HOME`` (else
``~/.cache`` and ``~/.local/share``) on Linux, ``~/Library/Caches`` and ``~/Library/Application
Support`` on macOS, ``%LOCALAPPDATA%`` on Windows.
"""

from __future__ import annotations

from pathlib import Path

import platformdirs

__all__ = ["user_cache_dir", "user_data_dir"]

APP = "pytest-cuzk"


def user_cache_dir() -> Path:
    """The per-user cache directory: test data, params, PCE files (anything that can be made again)."""
    return platformdirs.user_cache_path(APP, appauthor=False)


def user_data_dir() -> Path:
    """The per-user data directory: the default results database (what cannot be made again)."""
    return platformdirs.user_data_path(APP, appauthor=False)
