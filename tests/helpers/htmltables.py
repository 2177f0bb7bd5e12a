"""An HTML page's tables and tiles as text, for tests that read figures off a page and need no browser."""

from __future__ import annotations

from html.parser import HTMLParser

__all__ = ["rows", "tables", "tiles"]


class _Cells(HTMLParser):
    """Every table's rows of cell texts, by the table's id (else class), and every tile's key and value."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.tiles: list[tuple[str, str]] = []
        self._table: list[list[str]] | None = None
        self._cell: list[str] | None = None
        self._tile: list[str] | None = None  # class of the div being read ("k" or "v"), then its text

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        cls = found.get("class") or ""
        if tag == "table":
            self._table = self.tables.setdefault(found.get("id") or cls, [])
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")
        elif tag == "div" and cls in ("k", "v"):
            self._tile = [cls]

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table:
            self._table[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table":
            self._table = None
        elif tag == "div" and self._tile is not None:
            kind, text = self._tile[0], "".join(self._tile[1:]).strip()
            if kind == "k":
                self.tiles.append((text, ""))
            elif self.tiles:
                self.tiles[-1] = (self.tiles[-1][0], text)
            self._tile = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._tile is not None:
            self._tile.append(data)


def rows(html: str, cls: str) -> list[list[str]]:
    """The cell texts of each row of every table of id (else class) ``cls``, in page order."""
    parser = _Cells()
    parser.feed(html)
    return [r for r in parser.tables.get(cls, []) if r]


def tables(html: str, cls: str) -> list[dict[str, str]]:
    """The rows of the tables ``cls`` names by the first row's headings; rows of another width left out."""
    found = rows(html, cls)
    heads = found[0] if found else []
    return [dict(zip(heads, r, strict=True)) for r in found[1:] if len(r) == len(heads)]


def tiles(html: str) -> list[tuple[str, str]]:
    """Every headline tile's key and value, in page order."""
    parser = _Cells()
    parser.feed(html)
    return parser.tiles
