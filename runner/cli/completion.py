"""Tab completion in the chat: chat commands and prompt commands after ``/``, a prompt command's
argument names (``name=``), tool names after ``/call`` and at the start of a line (the
``server__tool {json}`` form), thread ids after ``/thread``, agent names after ``/agent``; and a
form's choices when a server asks (:class:`ChoiceCompleter`).

Everything is read from the running agent when Tab is pressed, so a reload or a server's new
tool list completes at once. Only thread ids are read from the store (:meth:`ChatCompleter.at_once`
says which completions need no waiting).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable, Iterator, Sequence

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from runner.agent.runtime import Runtime
from runner.manifest.agents import conversing_agents

THREAD_SCAN_LIMIT = 500  # checkpoints read to find thread ids


class ChatCompleter(Completer):
    def __init__(self, runtime: Runtime, commands: Sequence[str]) -> None:
        self.runtime = runtime
        self.commands = commands

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        text = document.text_before_cursor
        if "\n" in text:
            return
        if not text.startswith("/"):
            if text and " " not in text:  # a tool called by its name: server__tool {json}
                yield from _starting_with(text, sorted(self.runtime.catalog.entries))
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
        elif command == "agent" and " " not in rest:  # main and the agents with a model
            yield from _starting_with(word, conversing_agents(self.runtime.manifest.agents))
        elif (prompt := self.runtime.prompt_catalog.get(command)) is not None and "=" not in word:
            given = {part.split("=", 1)[0] for part in rest.split() if "=" in part}
            names = [argument.name for argument in prompt.prompt.arguments or []]
            yield from _starting_with(word, [f"{name}=" for name in names if name not in given])

    def at_once(self, document: Document) -> list[Completion] | None:
        """The completions of ``document``, computed now, where none needs the store read (all but
        thread ids); else None. Tab applies these before the next key is read, so Enter right
        after Tab sends the completed line."""
        if _is_thread_argument(document.text_before_cursor):
            return None
        return list(self.get_completions(document, CompleteEvent(completion_requested=True)))

    async def get_completions_async(
        self, document: Document, complete_event: CompleteEvent
    ) -> AsyncGenerator[Completion, None]:
        text = document.text_before_cursor
        if _is_thread_argument(text):
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


class ChoiceCompleter(Completer):
    """The choices of a question (a form field's values, yes and no); after a comma, for a field
    that takes several, the next one."""

    def __init__(self, choices: Sequence[str]) -> None:
        self.choices = choices

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        word = document.text_before_cursor.rsplit(",", 1)[-1].lstrip()
        lowered = word.lower()
        for choice in self.choices:
            if choice.lower().startswith(lowered):
                yield Completion(choice, start_position=-len(word))


def _is_thread_argument(text: str) -> bool:
    return text.startswith("/thread ") and " " not in text.removeprefix("/thread ")


async def stored_threads(runtime: Runtime) -> list[str]:
    """The thread ids the checkpointer holds (up to :data:`THREAD_SCAN_LIMIT` checkpoints read)."""
    found: list[str] = []
    checkpointer = runtime.checkpointer
    if checkpointer is None or not hasattr(checkpointer, "alist"):
        return found
    scanned = 0
    async for checkpoint in checkpointer.alist(None):
        thread = checkpoint.config.get("configurable", {}).get("thread_id")
        if isinstance(thread, str) and thread not in found and runtime.own_thread(checkpoint.metadata):
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
