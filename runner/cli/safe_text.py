"""Text from servers, tools, models and manifests made safe for a terminal, in one place.

A terminal obeys what it is sent: ``ESC]52;c;…`` writes the clipboard, ``ESC]0;…`` the window
title, ``ESC[2J`` clears the screen, a cursor movement rewrites an earlier line, and a bidi
override (U+202E) shows text in another order than it has. :func:`visible` shows each such
character instead (``^[`` for ESC as ``cat -v`` does, ``\\u202e`` for the others), keeping
newlines and tabs. Every path to the terminal goes through it: the rich consoles
(:class:`SafeConsole`, which also reads no markup unless a print asks), the log lines
(:class:`VisibleLogLines`), the ``--debug`` tracebacks (:func:`visible_traceback`), and each
plain ``click.echo`` of such text.
"""

from __future__ import annotations

import errno
import logging
import traceback
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

from runner.redaction import RedactingFormatter, redact_urls

_C0_AND_DEL = {code: f"^{chr(code ^ 0x40)}" for code in (*range(0x20), 0x7F) if chr(code) not in "\n\t"}
_C1 = {code: f"\\x{code:02x}" for code in range(0x80, 0xA0)}
# Embeddings and overrides (U+202A–U+202E) and isolates (U+2066–U+2069): they reorder what follows.
_BIDI = {code: f"\\u{code:04x}" for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))}
_SHOWN = str.maketrans({**_C0_AND_DEL, **_C1, **_BIDI})


def visible(text: str) -> str:
    """``text`` with every control character (but newline and tab) and bidi control shown as
    characters the terminal only prints. A CR LF line end stays a line end."""
    return text.replace("\r\n", "\n").translate(_SHOWN)


def visible_traceback(error: BaseException) -> str:
    """The traceback Python would print for ``error`` and the exceptions it came from, with the
    credentials of its URLs hidden and its control characters shown: the messages of a runner
    error quote servers' words, and a chained library error may quote a URL as it was given."""
    return visible(redact_urls("".join(traceback.format_exception(error))))


class SafeConsole(Console):
    """A rich console that shows control characters in all it prints (strings, tables, ``Text``)
    and reads markup only where a print passes ``markup=True``: a server's ``[bold]`` is text."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(**{"markup": False, **settings})

    def on_broken_pipe(self) -> None:
        # rich would exit 1 from inside the write (a SystemExit through the event loop, which
        # leaves the turn's tasks behind); the command group ends the run (runner.cli.closed_output).
        raise BrokenPipeError(errno.EPIPE, "the reader of the output has gone")

    def render_str(self, text: str, **settings: Any) -> Text:
        # Before rich measures and wraps it (and drops BEL and CR without a trace).
        return super().render_str(visible(text), **settings)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            # A Text made elsewhere was not shown through render_str. Control segments are rich's
            # own cursor movements (a spinner, a live status line).
            yield segment if segment.control else Segment(visible(segment.text), segment.style)


class VisibleLogLines(RedactingFormatter):
    """A log line with its control characters shown (messages carry servers' words) and the
    credentials of its URLs hidden (httpx and the MCP SDK log each request's URL)."""

    def format(self, record: logging.LogRecord) -> str:
        return visible(super().format(record))
