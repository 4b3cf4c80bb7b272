"""What the operator tool writes to a terminal: every string as the text it is.

The tool prints what others wrote: MessageIds, Subjects, dead-letter reasons and descriptions,
stored documents, a provider's answers. Any of them may hold rich markup (``[/]`` raises
``MarkupError``, ``[link=...]`` makes a clickable link) or terminal controls (a screen clear, an
OSC 52 clipboard write, a C1 CSI, a bidi override that reorders what the line shows). So every
command prints through one ``TextConsole``: it reads no string as markup or emoji, shows each
control character as its escape (``\\x1b``, ``\\u202e``), and prints JSON with those characters
as ``\\u`` escapes inside their strings (still valid JSON, read back as the same values).

It owns that one conversion (``visible``), applied where rich turns a string into ``Text``
(``Console.render_str``: every printed string, table cell and title). It must never let a
string reach the terminal another way: a style the tool wants is a ``Text`` with a style, never
markup in a string.
"""

from __future__ import annotations

import re
from json import dumps, loads
from typing import Any, TextIO

from rich.console import Console
from rich.highlighter import JSONHighlighter
from rich.text import Text

# C0 and C1 controls and DEL; the bidi controls of "Trojan Source" (CVE-2021-42574: U+061C,
# U+200E-200F, U+202A-202E, U+2066-2069) and the line and paragraph separators; lone surrogates,
# which a UTF-8 stdout cannot even encode.
_BEYOND_C0 = r"\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE = re.compile(rf"[\x00-\x1f{_BEYOND_C0}]")
# ``json.dumps`` escapes U+0000-U+001F inside strings itself: a raw newline is its layout.
_UNSAFE_IN_JSON = re.compile(f"[{_BEYOND_C0}]")

WIDTH = 160


def visible(text: str) -> str:
    """``text`` with each control character shown as its Python escape: ``\\x1b``, ``\\n``."""
    return _UNSAFE.sub(lambda match: ascii(match.group())[1:-1], text)


class TextConsole(Console):
    """The console every command prints with (module docstring)."""

    def __init__(self, file: TextIO) -> None:
        super().__init__(file=file, width=WIDTH, soft_wrap=True, markup=False, emoji=False)

    def render_str(self, text: str, **options: Any) -> Text:
        """Every string rich prints, as text: never markup nor emoji, controls visible."""
        return super().render_str(visible(text), **{**options, "markup": False, "emoji": False})

    def print_json(self, json: str | None = None, *, data: Any = None, **options: Any) -> None:
        """``json`` (a JSON text) or ``data``, indented, each control character inside a string
        a ``\\u`` escape. rich's other options are not offered."""
        if options:
            raise TypeError(f"TextConsole.print_json does not take {sorted(options)}")
        document = data if json is None else loads(json)
        printed = _UNSAFE_IN_JSON.sub(
            lambda match: f"\\u{ord(match.group()):04x}",
            dumps(document, indent=2, ensure_ascii=False),
        )
        # As rich.json.JSON builds its text: highlighted, never wrapped (a copy stays JSON).
        text = JSONHighlighter()(Text(printed, no_wrap=True))
        self.print(text, soft_wrap=True)
