"""MkDocs hooks of the documentation site (mkdocs.yml, `make docs`): the site's home page is the
README itself, so the front door is written once. Its links point into docs/ (as GitHub reads
them); on the site they are relative to docs/, so the prefix is dropped, and MkDocs then checks
them like every other page's (tests/docs/test_site.py). Never imports a product package."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

README = Path(__file__).resolve().parents[1] / "README.md"
HOME = "index.md"
_INTO_DOCS = re.compile(r"\]\(docs/")


class _File(Protocol):
    src_uri: str


class _Page(Protocol):
    file: _File


def on_page_markdown(markdown: str, page: _Page, **_: object) -> str:
    """The home page's text is the README's, its links made relative to docs/."""
    if page.file.src_uri != HOME:
        return markdown
    return _INTO_DOCS.sub("](", README.read_text(encoding="utf-8"))
