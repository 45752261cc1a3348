"""The visible text of an HTML page, for the readers that have no better extractor
(documents.py without trafilatura, knowledge.py's import of .html files)."""

from __future__ import annotations

from collections.abc import Iterable
from html.parser import HTMLParser
from typing import Any

#: Elements that start a new line of text.
BLOCK_TAGS = frozenset(
    {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section"}
)


class VisibleText(HTMLParser):
    """Collects the text outside ``hidden`` elements in ``parts``, a newline per block."""

    def __init__(self, hidden: Iterable[str]) -> None:
        super().__init__(convert_charrefs=True)
        self.hidden = frozenset(hidden)
        self.parts: list[str] = []
        self._depth = 0  # how many hidden elements are open

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self.hidden:
            self._depth += 1
        elif tag in BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.hidden and self._depth:
            self._depth -= 1
        elif tag in BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._depth:
            self.parts.append(data)


def visible_text(html: str, hidden: Iterable[str]) -> str:
    """The page's text outside ``hidden`` elements, block breaks kept as newlines."""
    parser = VisibleText(hidden)
    parser.feed(html)
    parser.close()
    return "".join(parser.parts)
