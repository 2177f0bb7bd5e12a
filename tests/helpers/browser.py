"""A real headless browser for the HTML pages: Debian's chromium, driven through its chromedriver.

Why a browser: a page that a template renders without error can still show nothing (a chart
that does not lay out, a table the browser repairs away). Selenium asks the browser what it
laid out and shows: elements, their rendered sizes and colours, the resources it fetched, and a
screenshot. Tests skip, saying why, where chromium, chromedriver (packages ``chromium`` and
``chromium-driver``, which ``.ci/run`` installs) or selenium are missing.
"""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

__all__ = ["Browser", "browser"]

WIDTH, HEIGHT = 1280, 900


def _missing() -> str | None:
    for name, package in (("chromium", "chromium"), ("chromedriver", "chromium-driver")):
        if shutil.which(name) is None:
            return f"no headless browser: {name} is not on PATH (apt-get install {package}; .ci/run does)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "no browser driver: selenium is not installed (pip install -e '.[dev]')"
    return None


class Browser:
    """One headless chromium; ``open`` loads a page from a file, as someone opening an artifact would."""

    def __init__(self) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = shutil.which("chromium") or "chromium"
        for arg in (
            "--headless=new",
            "--disable-gpu",
            f"--window-size={WIDTH},{HEIGHT}",
            "--hide-scrollbars",
        ):
            options.add_argument(arg)
        if os.geteuid() == 0:
            options.add_argument("--no-sandbox")  # chromium refuses to sandbox as root
        self.driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))

    def open(self, path: Path) -> Any:
        self.driver.get(path.resolve().as_uri())
        return self.driver

    @contextmanager
    def window(self, width: int, height: int = HEIGHT) -> Iterator[Any]:
        """The window at ``width`` x ``height`` for a while, then back at the session's size."""
        self.driver.set_window_size(width, height)
        try:
            assert self.driver.execute_script("return window.innerWidth") == width, "as wide as asked"
            yield self.driver
        finally:
            self.driver.set_window_size(WIDTH, HEIGHT)

    def all(self, css: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return list(self.driver.find_elements(By.CSS_SELECTOR, css))

    def one(self, css: str) -> Any:
        found = self.all(css)
        assert len(found) == 1, f"{len(found)} elements match {css!r}"
        return found[0]

    def fetched(self) -> list[str]:
        """Every resource the page asked the network or the disk for after the document itself."""
        return list(
            self.driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        )

    def screenshot(self, path: Path) -> Path:
        """The visible part of the page as a PNG, checked not to be blank."""
        from PIL import Image

        png = self.driver.get_screenshot_as_png()
        path.write_bytes(png)
        image = Image.open(io.BytesIO(png)).convert("RGB")
        colours = image.getcolors(maxcolors=WIDTH * HEIGHT) or []
        background = max(colours)[0] / (image.width * image.height)
        assert len(colours) > 50, f"{path}: {len(colours)} colours, the page looks blank"
        assert background < 0.9, f"{path}: {background:.0%} of it is one colour, the page looks blank"
        return path

    def quit(self) -> None:
        self.driver.quit()


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """The session's headless chromium (skips, saying why, where there is none)."""
    why = _missing()
    if why:
        pytest.skip(why)
    b = Browser()
    try:
        yield b
    finally:
        b.quit()
