"""The chat's line editor on a terminal (prompt_toolkit): history, completion, multi-line input,
a status line, and output printed above the prompt.

One :class:`ChatEditor` reads every line of a chat, messages and questions alike, inside the
event loop. While it is open, stdout and stderr (and the log handlers writing to them) go through
prompt_toolkit, which prints above the prompt and redraws it with what was typed so far. While a
turn runs, a one-line application shows the status line with a spinner; keys typed then are kept
and become the start of the next line (Enter ends lines ahead), Ctrl-D then leaves once the lines
ahead are sent, and Ctrl-C is the usual SIGINT.

Keys: Enter sends; Alt-Enter (or Esc then Enter) or a trailing ``\\`` starts a new line; pasted
text keeps its lines (bracketed paste); Up/Down walk the history and Ctrl-R searches it; Tab
completes (what needs no waiting is completed at once, so Enter typed right after Tab sends the
completed line), at a form's question too (its choices); Ctrl-C at a question cancels the turn it
belongs to; Ctrl-C clears a half-typed line, and Ctrl-C on an empty line or Ctrl-D at the prompt
leaves.

Where the terminal cannot take this (not a terminal, ``TERM=dumb``), the chat reads plain lines
with :class:`runner.cli.terminal.LineReader` instead: see :func:`can_edit`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
import anyio.lowlevel
from prompt_toolkit import PromptSession, search
from prompt_toolkit.application import Application, get_app
from prompt_toolkit.completion import CompleteEvent, Completer, DynamicCompleter
from prompt_toolkit.completion.base import Completion, get_common_complete_suffix
from prompt_toolkit.data_structures import Size
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition, has_completions, is_searching
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import FormattedTextControl, Layout, Window
from prompt_toolkit.output.vt100 import Vt100_Output
from prompt_toolkit.patch_stdout import patch_stdout
from rich.console import Console

from runner.agent.runtime import Runtime
from runner.cli.completion import ChatCompleter, ChoiceCompleter
from runner.cli.safe_text import visible
from runner.cli.status import SPINNER_STEP, ChatStatus
from runner.cli.terminal import LineReader
from runner.manifest import CHAT_COMMANDS
from runner.store.private import private_file

DUMB_TERMINALS = ("dumb", "unknown")
STATUS_REFRESH = 0.5  # seconds between redraws of the status line at the prompt
MENU_LINES = 10  # at most, lines kept free under the prompt for the completion menu
PROMPT_STYLE = "fg:ansidefault"  # looks plain; makes the prompt's trailing space printed, as before


HISTORY_FILE = "chat_history"  # in the state folder: one history per manifest


@asynccontextmanager
async def chat_reader(console: Console, runtime: Runtime, *, as_json: bool, status: ChatStatus,
                      interrupt: Callable[[], None]) -> AsyncIterator[LineReader | ChatEditor]:
    """The line editor for a person at a terminal; plain lines for programs, pipes, dumb terminals."""
    if as_json or not can_edit(sys.stdin, sys.stdout):
        yield LineReader(console)
        return
    editor = ChatEditor(console, history=private_file(runtime.fleet.state_dir / HISTORY_FILE),
                        completer=ChatCompleter(runtime, CHAT_COMMANDS), status=status, interrupt=interrupt)
    async with editor.open():
        yield editor


def can_edit(stdin: TextIO, stdout: TextIO, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the chat gets the line editor: stdin and stdout are a terminal that is not dumb."""
    return stdin.isatty() and stdout.isatty() and environ.get("TERM", "") not in DUMB_TERMINALS


class ChatEditor:
    """Reads the chat's lines on a terminal; see the module's docstring. Open it with :meth:`open`."""

    def __init__(self, console: Console, *, history: Path, completer: ChatCompleter, status: ChatStatus,
                 interrupt: Callable[[], None]) -> None:
        self._console = console
        self._status = status
        self._interrupt = interrupt
        self._output = _StatusBelowOutput.of(sys.stdout)
        common: dict[str, Any] = {"bottom_toolbar": self._toolbar, "refresh_interval": STATUS_REFRESH,
                                  "prompt_continuation": _continuation, "output": self._output}
        self._messages: PromptSession[str] = PromptSession(
            history=FileHistory(str(history)), completer=completer, complete_while_typing=False,
            reserve_space_for_menu=menu_lines(self._output.get_size().rows),
            key_bindings=_line_bindings(clear_on_ctrl_c=True, complete_at_once=completer.at_once), **common)
        self._choices: Completer | None = None  # the choices of the question being asked
        self._questions: PromptSession[str] = PromptSession(
            history=InMemoryHistory(), completer=DynamicCompleter(lambda: self._choices),
            complete_while_typing=False,
            key_bindings=_line_bindings(clear_on_ctrl_c=False, complete_at_once=self._choices_now), **common)
        self.waiting_prompt: str | None = None  # output never needs the prompt redrawn by hand
        # The prompt and the status line are redrawn from the start of the cursor's line, erasing
        # an unfinished line printed above them: output must come in whole lines.
        self.keeps_partial_lines = False
        self._typeahead = ""  # typed while a turn ran
        self._leave_typed = False  # Ctrl-D typed while a turn ran: leave at the next prompt
        self._working = False
        self._status_app: Application[None] | None = None
        self._status_task: asyncio.Task[None] | None = None
        self._status_started = asyncio.Event()

    @asynccontextmanager
    async def open(self) -> AsyncIterator[ChatEditor]:
        with patch_stdout(raw=True), _logs_through(sys.stderr):
            try:
                yield self
            finally:
                with anyio.CancelScope(shield=True):
                    await self._stop_status_app()

    async def read(self, prompt: str, *, message: bool = False, default: str = "",
                   choices: Sequence[str] = ()) -> str | None:
        """The next line (a ``message`` at the chat's prompt, else a question's answer, its
        line starting with ``default`` unless keys were typed ahead, Tab completing ``choices``); None
        at Ctrl-D. Ctrl-C cancels the running turn (a question belongs to one), or raises
        KeyboardInterrupt at the prompt."""
        with anyio.CancelScope(shield=True):
            await self._stop_status_app()
        session = self._messages if message else self._questions
        self._choices = ChoiceCompleter(choices) if choices else None
        self._messages.reserve_space_for_menu = menu_lines(self._output.get_size().rows)
        try:
            if "\n" in self._typeahead:  # a line ended with Enter while the turn ran
                line, _, self._typeahead = self._typeahead.partition("\n")
                self._console.print(prompt + line, markup=False, highlight=False)
                if message and line.strip():
                    session.history.append_string(line)
                return line
            if message and self._leave_typed:
                return None
            default, self._typeahead = self._typeahead or default, ""
            try:
                return await session.prompt_async([(PROMPT_STYLE, visible(prompt))], default=default,
                                                  handle_sigint=False)
            except EOFError:
                return None
            except KeyboardInterrupt:
                self._interrupt()  # cancels the turn, or raises KeyboardInterrupt at the prompt
                await anyio.lowlevel.checkpoint()  # the turn's cancellation is delivered here
                return None
        finally:
            if self._working:
                self._start_status_app()

    def _choices_now(self, document: Document) -> list[Completion]:
        if self._choices is None:
            return []
        return list(self._choices.get_completions(document, CompleteEvent(completion_requested=True)))

    def write(self, text: str) -> None:
        self._console.file.write(visible(text))
        self._console.file.flush()

    @asynccontextmanager
    async def working(self, activity: str = "thinking") -> AsyncIterator[None]:
        """While the body runs (a turn, a command), show the status line with a spinner."""
        self._working = True
        self._status.start(activity)
        self._start_status_app()
        try:
            yield
        finally:
            self._working = False
            self._status.stop()
            with anyio.CancelScope(shield=True):
                await self._stop_status_app()

    # -- the status line while a turn runs -------------------------------------------------------

    def _toolbar(self) -> str:
        return " " + self._status.line(width=self._output.get_size().columns - 2)

    def _start_status_app(self) -> None:
        if self._status_task is not None:
            return
        window = Window(FormattedTextControl(self._toolbar), height=1, style="class:bottom-toolbar")
        app: Application[None] = Application(layout=Layout(window), key_bindings=self._typeahead_bindings(),
                                              refresh_interval=SPINNER_STEP, erase_when_done=True,
                                              output=self._output)
        self._status_started = started = asyncio.Event()
        self._status_app = app
        self._status_task = asyncio.create_task(
            app.run_async(pre_run=started.set, handle_sigint=False, set_exception_handler=False))

    async def _stop_status_app(self) -> None:
        task, app, started = self._status_task, self._status_app, self._status_started
        if task is None or app is None:
            return
        self._status_task = self._status_app = None
        if not task.done():
            waiting = asyncio.ensure_future(started.wait())
            await asyncio.wait([task, waiting], return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if app.is_running and app.future is not None and not app.future.done():
                app.exit()
            await asyncio.wait([task])
        if not task.cancelled() and (error := task.exception()) is not None:
            raise error

    def _typeahead_bindings(self) -> KeyBindings:
        bindings = KeyBindings()

        @bindings.add("c-c")
        def _interrupt(event: KeyPressEvent) -> None:
            os.kill(os.getpid(), signal.SIGINT)  # the chat's own Ctrl-C handling, as in cooked mode

        @bindings.add("c-d")
        def _leave(event: KeyPressEvent) -> None:
            self._leave_typed = True

        @bindings.add(Keys.Any)
        def _keep(event: KeyPressEvent) -> None:
            if event.data.isprintable():
                self._typeahead += event.data

        @bindings.add(Keys.BracketedPaste)
        def _paste(event: KeyPressEvent) -> None:
            self._typeahead += event.data.replace("\r\n", "\n").replace("\r", "\n")

        @bindings.add("enter")
        @bindings.add("c-j")  # a newline without a carriage return (what programs send)
        def _line(event: KeyPressEvent) -> None:
            self._typeahead += "\n"

        @bindings.add("backspace")
        def _erase(event: KeyPressEvent) -> None:
            if self._typeahead and not self._typeahead.endswith("\n"):
                self._typeahead = self._typeahead[:-1]

        return bindings


class _StatusBelowOutput(Vt100_Output):
    """The terminal, with the status line drawn right under the prompt (and its completion
    menu) rather than at the bottom of the screen. prompt_toolkit would otherwise ask the terminal
    where the cursor is (CPR) and, where no answer comes, print a warning and no status line."""

    @classmethod
    def of(cls, stdout: TextIO) -> _StatusBelowOutput:
        fd = stdout.fileno()

        def size() -> Size:
            columns, rows = os.get_terminal_size(fd)
            return Size(rows=rows or 24, columns=columns or 80)

        return cls(stdout, size, term=os.environ.get("TERM"), enable_cpr=False)

    def get_rows_below_cursor_position(self) -> int:
        return 2  # the prompt's line and the status line; the layout asks more for the menu


def _line_bindings(
    *, clear_on_ctrl_c: bool, complete_at_once: Callable[[Document], list[Completion] | None] | None = None
) -> KeyBindings:
    """Enter, Alt-Enter and a trailing backslash; Enter in a history search (Ctrl-R) takes the
    match and sends it, as bash does; with ``clear_on_ctrl_c``, Ctrl-C on a line with text clears
    it (on an empty line it still interrupts). With ``complete_at_once``, Tab applies the
    completions it gives before the next key is read (prompt_toolkit computes them in a task, so
    an Enter right after Tab sent the line as typed): one is inserted, several open the menu."""
    bindings = KeyBindings()
    has_text = Condition(lambda: bool(get_app().current_buffer.text))

    if complete_at_once is not None:
        complete_now = complete_at_once

        @bindings.add("tab", filter=~has_completions & ~is_searching)
        def _complete(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            found = complete_now(buffer.document)
            if found is None:  # it needs waiting (a read of the store): prompt_toolkit's own way
                buffer.start_completion(insert_common_part=True)
            elif len(found) == 1:
                buffer.apply_completion(found[0])
            elif found:
                common = get_common_complete_suffix(buffer.document, found)
                if common:
                    buffer.insert_text(common)
                else:
                    buffer.start_completion()

    if clear_on_ctrl_c:
        @bindings.add("c-c", filter=has_text & ~is_searching)
        def _clear(event: KeyPressEvent) -> None:
            event.current_buffer.reset()

    @bindings.add("enter", filter=is_searching)
    def _take_match(event: KeyPressEvent) -> None:
        search.accept_search()
        event.app.current_buffer.validate_and_handle()

    @bindings.add("escape", "enter")  # Alt-Enter sends Esc Enter
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @bindings.add("enter", filter=~is_searching)
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        document = buffer.document
        if document.is_cursor_at_the_end and document.text.endswith("\\"):
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    return bindings


def menu_lines(rows: int) -> int:
    """Lines for the completion menu in a window of ``rows``: a third of it, 3 to MENU_LINES."""
    return max(3, min(MENU_LINES, rows // 3))


def _continuation(width: int, line_number: int, wrap_count: int) -> str:
    return "." * (width - 1) + " "


@contextmanager
def _logs_through(stream: TextIO) -> Iterator[None]:
    """Point the root log handlers that write to the real stderr at ``stream`` (the patched one),
    so that a warning is printed above the prompt too."""
    moved = []
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream in (sys.__stderr__, sys.__stdout__):
            moved.append((handler, handler.setStream(stream)))
    try:
        yield
    finally:
        for handler, previous in moved:
            handler.setStream(previous)
