"""Tab completion in the chat: chat commands and prompt commands after ``/``, a prompt command's
argument names (``name=``), tool names after ``/call``, thread ids after ``/thread``.

Everything is read from the running agent when Tab is pressed, so a reload or a server's new
tool list completes at once.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable, Iterator, Sequence

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from runner.agent.runtime import Runtime

THREAD_SCAN_LIMIT = 500  # checkpoints read to find thread ids


class ChatCompleter(Completer):
    def __init__(self, runtime: Runtime, commands: Sequence[str]) -> None:
        self.runtime = runtime
        self.commands = commands

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or "\n" in text:
            return
        if " " not in text:
            prompts = [command.name for command in self.runtime.prompt_catalog]
            yield from _starting_with(text, [f"/{name}" for name in [*self.commands, *prompts]])
            return
        command, _, rest = text[1:].partition(" ")
        word = rest.rsplit(" ", 1)[-1]
        if command == "call" and " " not in rest:
            yield from _starting_with(word, sorted(self.runtime.catalog.entries))
        elif command == "thread" and " " not in rest:
            yield from _starting_with(word, ["new", self.runtime.thread_id])
        elif (prompt := self.runtime.prompt_catalog.get(command)) is not None and "=" not in word:
            given = {part.split("=", 1)[0] for part in rest.split() if "=" in part}
            names = [argument.name for argument in prompt.prompt.arguments or []]
            yield from _starting_with(word, [f"{name}=" for name in names if name not in given])

    async def get_completions_async(
        self, document: Document, complete_event: CompleteEvent
    ) -> AsyncGenerator[Completion, None]:
        text = document.text_before_cursor
        if text.startswith("/thread ") and " " not in text.removeprefix("/thread "):
            word = text.removeprefix("/thread ")
            threads = await self._threads()
            for completion in _starting_with(word, ["new", *threads]):
                yield completion
            return
        for completion in self.get_completions(document, complete_event):
            yield completion

    async def _threads(self) -> list[str]:
        """The thread ids the checkpointer holds, the current one first."""
        return [self.runtime.thread_id, *(t for t in await stored_threads(self.runtime)
                                          if t != self.runtime.thread_id)]


async def stored_threads(runtime: Runtime) -> list[str]:
    """The thread ids the checkpointer holds (up to :data:`THREAD_SCAN_LIMIT` checkpoints read)."""
    found: list[str] = []
    checkpointer = runtime.checkpointer
    if checkpointer is None or not hasattr(checkpointer, "alist"):
        return found
    scanned = 0
    async for checkpoint in checkpointer.alist(None):
        thread = checkpoint.config.get("configurable", {}).get("thread_id")
        if isinstance(thread, str) and thread not in found:
            found.append(thread)
        scanned += 1
        if scanned >= THREAD_SCAN_LIMIT:
            break
    return found


async def resolve_thread(runtime: Runtime, requested: str) -> tuple[str, str]:
    """The thread a typed id means, and what to tell the user: the id itself when a conversation
    had it; the one id it is a unique prefix of; else a new thread of that id. Each said so."""
    threads = await stored_threads(runtime)
    if requested in threads:
        return requested, f"resumed thread {requested}"
    matches = [thread for thread in threads if thread.startswith(requested)]
    if len(matches) == 1:
        return matches[0], f"resumed thread {matches[0]} (the one id starting with {requested})"
    if matches:
        return requested, (f"new thread {requested} ({len(matches)} ids start with it: "
                           f"{', '.join(matches[:5])})")
    return requested, f"new thread {requested} (no conversation had that id)"


def _starting_with(word: str, candidates: Iterable[str]) -> Iterator[Completion]:
    seen = set()
    for candidate in candidates:
        if candidate.startswith(word) and candidate not in seen:
            seen.add(candidate)
            yield Completion(candidate, start_position=-len(word))
