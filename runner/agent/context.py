"""What one model request carries of the thread: ``context:`` in the manifest.

Before each model step the model node hands the request (system prompt, tool definitions, the
thread's messages) to :meth:`ContextWindow.fit`. Within ``max_tokens`` it is sent as it is. Past
it, in this order, until it fits:

1. the summary the thread already has (a graph state field, ``context_summary``, checkpointed)
   stands for the messages it covers: written once, reused at every later step and after a
   restart;
2. large tool results older than the last ``keep_last_turns`` turns are sent as a short reference
   to the saved result (the thread keeps it whole);
3. with ``strategy: summarize``, the turns before the kept ones are summarized (with the prior
   summary) into a new summary, stored in the state;
4. the oldest messages are left out (a tool call always with its results: providers reject one
   without the other), with a note saying so; as a last resort recent large results are shortened.

Only the request shrinks: the thread's stored messages are never changed. Tokens are counted with
LangChain's ``count_tokens_approximately``, once per message (cached by message id), so a step on a
long thread costs a lookup per message, not a recount of the history.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately, get_buffer_string, trim_messages
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langchain_core.tools import BaseTool

from runner.agent.turn_stream import stream_writer
from runner.errors import ModelError
from runner.events import ContextFitted
from runner.manifest.context import WINDOW_SHARE, ContextSpec

if TYPE_CHECKING:
    from runner.models import ModelChain

logger = logging.getLogger(__name__)

LARGE_RESULT_SHARE = 20  # a tool result over limit / 20 tokens (at least 50) counts as large
CACHE_LIMIT = 50_000  # message counts kept before the cache starts again
SUMMARY_PREFIX = "Summary of the earlier conversation (written to save context; the full history is kept):"


class ContextSummary(TypedDict):
    """The summary a thread's requests carry instead of its oldest messages."""

    text: str
    through: str  # id of the last message it covers
    messages: int  # messages of the thread it covers


@dataclass(frozen=True)
class ContextReport:
    """What one request carries, against the limit and the whole thread."""

    tokens: int  # the request: system prompt, tool definitions, messages
    limit: int | None
    whole: int  # the request with every message of the thread, as stored
    messages: int  # messages of the thread
    sent: int  # of them, sent (whole or as a reference)
    summarized: int  # covered by the summary the request carries
    written: bool  # that summary was written at this step
    left_out: int  # neither sent nor summarized
    shortened: int  # tool results sent as a reference

    @property
    def changed(self) -> bool:
        return bool(self.summarized or self.left_out or self.shortened)


def window_limit(spec: ContextSpec, model: ModelChain) -> int | None:
    """``max_tokens``, else the smallest input window LangChain's model profiles give the chain's
    models (a fallback gets the same request) less a margin, else None: no limit."""
    if spec.max_tokens is not None:
        return spec.max_tokens
    windows = []
    for member in (model.primary, *model.fallbacks):
        profile = getattr(member, "profile", None)
        window = profile.get("max_input_tokens") if isinstance(profile, dict) else None
        if isinstance(window, int) and not isinstance(window, bool) and window > 0:
            windows.append(window)
    return int(min(windows) * WINDOW_SHARE) if windows else None


def context_window(spec: ContextSpec, model: ModelChain,
                   other_model: Callable[[str], ModelChain]) -> ContextWindow:
    """The window of an agent whose model is ``model``; ``other_model`` makes ``summarize_with``'s."""
    summarizer = None
    if spec.strategy == "summarize":
        summarizer = other_model(spec.summarize_with) if spec.summarize_with else model
    return ContextWindow(spec, window_limit(spec, model), summarizer)


def _text_tokens(text: str) -> int:
    """A system prompt's tokens (none when it is empty: no system message is sent)."""
    return count_tokens_approximately([SystemMessage(text)]) if text else 0


def _signature(message: BaseMessage) -> tuple[Any, ...]:
    """Enough of a message to tell an edited one (same id: an approval's edited arguments)."""
    content = message.content
    size = len(content) if isinstance(content, str) else len(repr(content))
    calls = len(repr(message.tool_calls)) if isinstance(message, AIMessage) and message.tool_calls else 0
    return message.id, type(message).__name__, size, calls


def _units(messages: Sequence[BaseMessage]) -> list[int]:
    """Start index of each unit: a message, with the tool results that follow it (its calls')."""
    return [index for index, message in enumerate(messages)
            if index == 0 or not isinstance(message, ToolMessage)]


def _paired(messages: list[BaseMessage]) -> list[BaseMessage]:
    """``messages`` without a tool result whose call is not among them (a span cut before it)."""
    asked = {call["id"] for m in messages if isinstance(m, AIMessage) for call in m.tool_calls}
    return [m for m in messages if not isinstance(m, ToolMessage) or m.tool_call_id in asked]


def summary_message(summary: ContextSummary) -> HumanMessage:
    return HumanMessage(f"{SUMMARY_PREFIX}\n\n{summary['text']}")


def left_out_note(count: int) -> HumanMessage:
    return HumanMessage(f"[{count} earlier message{'s' if count != 1 else ''} of this conversation "
                        "are left out of this request to fit the model's context window.]")


def reference(message: ToolMessage) -> ToolMessage:
    """A large tool result as a short reference to the saved one (same call id, same message id)."""
    size = len(message.content) if isinstance(message.content, str) else len(repr(message.content))
    text = (f"[The result of {message.name or 'this call'} ({size} characters) is left out of this "
            f"request to save context; the conversation keeps it in full (message {message.id}). "
            "Call the tool again if you need it.]")
    return ToolMessage(content=text, tool_call_id=message.tool_call_id, name=message.name,
                       status=message.status, id=message.id)


class ContextWindow:
    """The request of each model step within ``limit`` tokens (None: no limit), per ``spec``.

    ``summarizer`` writes the summaries (``strategy: summarize``): the agent's model unless
    ``summarize_with`` names another."""

    def __init__(self, spec: ContextSpec, limit: int | None, summarizer: ModelChain | None = None) -> None:
        if spec.strategy == "summarize" and summarizer is None and limit is not None:
            raise ModelError("context.strategy 'summarize' needs a model to write the summaries")
        self.spec = spec
        self.limit = limit
        self.summarizer = summarizer
        self._counts: dict[tuple[Any, ...], int] = {}
        self._references: dict[tuple[Any, ...], ToolMessage] = {}
        self._tools: dict[tuple[int, ...], tuple[tuple[Any, ...], int]] = {}
        self._note_tokens = count_tokens_approximately([left_out_note(10**9)])

    # ------------------------------------------------------------------ counting

    def count(self, message: BaseMessage) -> int:
        if message.id is None:
            return count_tokens_approximately([message])
        key = _signature(message)
        tokens = self._counts.get(key)
        if tokens is None:
            if len(self._counts) >= CACHE_LIMIT:
                self._counts.clear()
            tokens = self._counts[key] = count_tokens_approximately([message])
        return tokens

    def tool_tokens(self, tools: Sequence[BaseTool | dict[str, Any]]) -> int:
        """The tool definitions' tokens, kept for the last few tool sets (by identity)."""
        key = tuple(map(id, tools))
        kept = self._tools.get(key)
        if kept is not None:
            return kept[1]
        tokens = count_tokens_approximately([], tools=list(tools)) if tools else 0
        if len(self._tools) >= 8:
            del self._tools[next(iter(self._tools))]
        self._tools[key] = (tuple(tools), tokens)  # the tools are kept: their ids stay theirs
        return tokens

    def _large(self) -> int:
        return max(50, (self.limit or 0) // LARGE_RESULT_SHARE)

    def _reference(self, message: ToolMessage) -> ToolMessage:
        key = _signature(message)
        short = self._references.get(key)
        if short is None:
            if len(self._references) >= CACHE_LIMIT:
                self._references.clear()
            short = self._references[key] = reference(message)
        return short

    # ------------------------------------------------------------------ fitting

    def measure(self, system_prompt: str, tools: Sequence[BaseTool | dict[str, Any]],
                history: Sequence[BaseMessage], summary: ContextSummary | None) -> ContextReport:
        """What the next request would carry as the thread stands (``/context``): no summary is
        written for it."""
        return self._fitted(system_prompt, tools, list(history), summary, written=False)[1]

    async def fit(
        self,
        system_prompt: str,
        tools: Sequence[BaseTool | dict[str, Any]],
        history: Sequence[BaseMessage],
        summary: ContextSummary | None,
        config: RunnableConfig,
    ) -> tuple[list[BaseMessage], ContextSummary | None]:
        """The messages to send (after the system prompt), and the new summary to store if one was
        written. An event says what was left out, shortened or summarized."""
        history = list(history)
        messages, report = self._fitted(system_prompt, tools, history, summary, written=False)
        written = None
        over = report.left_out > 0 or report.tokens > (self.limit or report.tokens)
        if over and self.spec.strategy == "summarize":
            written = await self._summary(system_prompt, tools, history, summary, config)
            if written is not None:
                messages, report = self._fitted(system_prompt, tools, history, written, written=True)
        if report.changed:
            self._announce(report)
        return messages, written

    def _fitted(
        self,
        system_prompt: str,
        tools: Sequence[BaseTool | dict[str, Any]],
        history: list[BaseMessage],
        summary: ContextSummary | None,
        *,
        written: bool,
    ) -> tuple[list[BaseMessage], ContextReport]:
        fixed = _text_tokens(system_prompt) + self.tool_tokens(tools)
        counts = [self.count(message) for message in history]
        whole = fixed + sum(counts)
        limit = self.limit
        if limit is None or whole <= limit:
            return history, ContextReport(whole, limit, whole, len(history), len(history), 0, False, 0, 0)
        start, head = self._summarized(history, summary)
        rest, rest_counts = history[start:], counts[start:]
        units = _units(rest)
        kept = self._kept_start(rest, units)
        rest, rest_counts, shortened = self._shortened(rest, rest_counts, before=kept)
        base = fixed + sum(self.count(message) for message in head)
        total = base + sum(rest_counts)
        left_out = 0
        if total > limit:  # the oldest units go; the last one stays
            drop = 0
            while drop < len(units) - 1 and total + self._note_tokens > limit:
                end = units[drop + 1]
                total -= sum(rest_counts[units[drop]:end])
                drop += 1
            if drop:
                cut = units[drop]
                left_out = cut
                rest, rest_counts = rest[cut:], rest_counts[cut:]
                if not head:
                    head = [left_out_note(start + left_out)]
                    base += self.count(head[0])
        if base + sum(rest_counts) > limit:  # the last resort: recent large results too
            rest, rest_counts, more = self._shortened(rest, rest_counts, before=len(rest))
            shortened += more
        sent = _paired(rest)
        tokens = base + sum(self.count(message) for message in sent)
        if tokens > limit:
            logger.warning("the model request carries about %d tokens, over context.max_tokens (%d): "
                           "its latest messages alone are larger", tokens, limit)
        summarized = start if summary is not None and start else 0
        report = ContextReport(tokens, limit, whole, len(history), len(sent), summarized, written, left_out,
                               shortened)
        return [*head, *sent], report

    def _summarized(self, history: list[BaseMessage],
                    summary: ContextSummary | None) -> tuple[int, list[BaseMessage]]:
        """Where the messages after ``summary`` start, and the summary's message (none: 0, [])."""
        if summary is None:
            return 0, []
        for index in range(len(history) - 1, -1, -1):
            if history[index].id == summary["through"]:
                return index + 1, [summary_message(summary)]
        return 0, []  # the history no longer has it (rewritten): not used

    def _kept_start(self, messages: list[BaseMessage], units: list[int]) -> int:
        """Start of the last ``keep_last_turns`` turns (a turn starts at a user message)."""
        turns = [start for start in units if isinstance(messages[start], HumanMessage)]
        keep = self.spec.keep_last_turns
        return turns[-keep] if len(turns) >= keep else 0

    def _shortened(self, messages: list[BaseMessage], counts: list[int],
                   before: int) -> tuple[list[BaseMessage], list[int], int]:
        """Large tool results among the first ``before`` messages as references."""
        large = self._large()
        messages, counts = list(messages), list(counts)
        shortened = 0
        for index in range(min(before, len(messages))):
            message = messages[index]
            if isinstance(message, ToolMessage) and counts[index] > large:
                short = self._reference(message)
                tokens = self.count(short)
                if tokens < counts[index]:
                    messages[index], counts[index] = short, tokens
                    shortened += 1
        return messages, counts, shortened

    async def _summary(
        self,
        system_prompt: str,
        tools: Sequence[BaseTool | dict[str, Any]],
        history: list[BaseMessage],
        summary: ContextSummary | None,
        config: RunnableConfig,
    ) -> ContextSummary | None:
        """A summary of the prior one and the messages before the kept turns, or None when there
        is nothing to summarize. The kept part is at most half of what the limit leaves for it,
        so that later steps have room before the next summary."""
        assert self.limit is not None and self.summarizer is not None
        start, _ = self._summarized(history, summary)
        rest = history[start:]
        units = _units(rest)
        kept = self._kept_start(rest, units)
        room = (self.limit - _text_tokens(system_prompt) - self.tool_tokens(tools)) // 2
        counts = [self.count(message) for message in rest]
        unit = next((i for i, begins in enumerate(units) if begins >= kept), len(units) - 1)
        while unit < len(units) - 1 and sum(counts[units[unit]:]) > room:
            unit += 1
        cut = units[unit]
        covered = [m for m in rest[:cut] if m.id is not None]
        if not covered:
            return None
        text = await self._written(summary["text"] if summary and start else None, rest[:cut], config)
        return ContextSummary(text=text, through=covered[-1].id or "", messages=start + cut)

    async def _written(self, earlier: str | None, messages: list[BaseMessage], config: RunnableConfig) -> str:
        from langchain.agents.middleware.summarization import DEFAULT_SUMMARY_PROMPT
        from langgraph.constants import TAG_NOSTREAM

        assert self.limit is not None and self.summarizer is not None
        prior = f"<summary_so_far>\n{earlier}\n</summary_so_far>\n" if earlier else ""
        # The summarizer's own window where its profile says (it may be larger than this limit).
        window = window_limit(ContextSpec(), self.summarizer) or self.limit
        budget = max(1, window - _text_tokens(DEFAULT_SUMMARY_PROMPT + prior))
        chosen = trim_messages(messages, max_tokens=budget, token_counter=count_tokens_approximately,
                               strategy="last")
        if not chosen:  # the last message alone is larger than the window: its reference instead
            shortened, _, _ = self._shortened(messages, [self.count(m) for m in messages], len(messages))
            chosen = trim_messages(shortened, max_tokens=budget, token_counter=count_tokens_approximately,
                                   strategy="last")
        prompt = DEFAULT_SUMMARY_PROMPT.format(messages=prior + get_buffer_string(chosen, format="xml"))
        # Not streamed as the answer's tokens; traced and metered as the model's own calls are.
        quiet = merge_configs(config, {"tags": [TAG_NOSTREAM], "metadata": {"lc_source": "summarization"}})
        reply = await self.summarizer.ainvoke([HumanMessage(prompt)], tools=[], config=quiet)
        text = reply.text.strip()
        if not text:
            raise ModelError("the model writing the context summary answered with no text")
        logger.info("summarized %d message(s) to fit context.max_tokens (%d)", len(messages), self.limit)
        return text

    def _announce(self, report: ContextReport) -> None:
        write = stream_writer()
        if write is None or report.limit is None:
            return
        action: Literal["trim", "summarize"] = "summarize" if report.summarized else "trim"
        write(ContextFitted(type="context", action=action, tokens=report.tokens, limit=report.limit,
                            whole=report.whole, summarized=report.summarized, written=report.written,
                            left_out=report.left_out, shortened=report.shortened))
