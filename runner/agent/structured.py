"""Structured output in the graph: the final answer is an object valid against ``output.schema``.

The model is asked for it with its provider's structured output (``response_format`` json_schema,
the way langchain-openai takes it) or, for providers without it, with a ``final_answer`` tool
offered beside the MCP tools (the tool loop goes on until the model calls it). An answer that does
not validate goes back to the model with its validation errors, up to ``output.retries`` times,
then the turn fails with those errors (:class:`~runner.errors.OutputError`).

Only the accepted answer enters the thread: an ``AIMessage`` whose text is the object as JSON and
whose ``response_metadata[OUTPUT_KEY]`` is the object itself (kept by the checkpointer with the
message). The attempts and the errors sent back stay inside the model node, but each rejected
attempt is a model step of its own: it is handed to ``rejected`` (the node counts its usage) before
the errors go back or the turn fails.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from runner.agent.output_contract import OutputContract
from runner.errors import OutputError, ToolError
from runner.manifest import ModelSpec
from runner.models.schema_values import FINAL_ANSWER_TOOL

OUTPUT_KEY = "structured_output"  # where the accepted object is kept: the answer's response_metadata
_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)

Ask = Callable[[Sequence[BaseMessage]], Awaitable[AIMessage]]
Rejected = Callable[[AIMessage], None]
Stop = Callable[[], AIMessage | None]  # the message ending the turn instead of a retry (a limit), or None


def structured_output(contract: OutputContract | None, model: ModelSpec) -> StructuredOutput | None:
    """What the graph needs for ``contract`` with ``model``'s chain, or None without ``output:``."""
    if contract is None:
        return None
    return StructuredOutput(contract, native=contract.native_for(model))


def answer_object(message: BaseMessage) -> Any:
    """The object a final answer carries (structured output), or None."""
    return message.response_metadata.get(OUTPUT_KEY) if isinstance(message, AIMessage) else None


@dataclass(frozen=True)
class StructuredOutput:
    """How the model is asked for the object, and how its answers are checked and sent back."""

    contract: OutputContract
    native: bool
    tool: BaseTool | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if not self.native:
            object.__setattr__(self, "tool", final_answer_tool(self.contract.schema))

    def offer(self, tools: Sequence[BaseTool]) -> list[BaseTool]:
        """The step's tools, with ``final_answer`` when the answer is given by calling it."""
        return [*tools, self.tool] if self.tool is not None else list(tools)

    def options(self) -> dict[str, Any]:
        """The call options of a model step: ``response_format`` when the provider's own is used."""
        if not self.native:
            return {}
        return {"response_format": {"type": "json_schema", "json_schema": {
            "name": FINAL_ANSWER_TOOL, "schema": self.contract.schema, "strict": False}}}

    def answers(self, reply: AIMessage) -> bool:
        """Whether ``reply`` is (meant as) the final answer rather than a step of the tool loop."""
        if self.native:
            return not reply.tool_calls and not reply.invalid_tool_calls
        called = [call["name"] for call in (*reply.tool_calls, *reply.invalid_tool_calls)]
        return not called or FINAL_ANSWER_TOOL in called

    async def settle(self, reply: AIMessage, prompt: Sequence[BaseMessage], ask: Ask,
                     rejected: Rejected | None = None, stop: Stop | None = None) -> AIMessage:
        """The accepted answer for ``reply``: it, or a retry asked with ``ask`` after the
        validation errors were sent back; OutputError once the retries are spent. Each rejected
        answer is handed to ``rejected`` first (a model step of its own: its usage is not the
        accepted answer's). Before each retry, ``stop`` may end the turn instead (a budget
        reached, as before any model step): its message is returned, unchecked."""
        conversation = list(prompt)
        for attempt in range(self.contract.retries + 1):
            value, problems = self._read(reply)
            if not problems:
                return _accepted(reply, value, native=self.native)
            if rejected is not None:
                rejected(reply)
            if attempt == self.contract.retries:
                tries = f"{attempt + 1} answer{'s' if attempt else ''}"
                raise OutputError(f"the model's answer does not match output.schema after {tries} "
                                  f"(output.retries: {self.contract.retries}): " + "; ".join(problems),
                                  problems)
            if stop is not None and (ending := stop()) is not None:
                return ending
            conversation += [reply, *self._feedback(reply, problems)]
            reply = await ask(conversation)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _read(self, reply: AIMessage) -> tuple[Any, list[str]]:
        """The object ``reply`` gives and why it is not valid (empty when it is)."""
        if self.native:
            if reply.tool_calls or reply.invalid_tool_calls:
                return None, ["no tool calls now: answer with the JSON object itself"]
            text = _FENCE.sub(r"\1", _text(reply).strip())
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                return None, [f"the answer is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): "
                              "answer with only a JSON object"]
            return value, self.contract.problems(value)
        finals = [call for call in reply.tool_calls if call["name"] == FINAL_ANSWER_TOOL]
        broken = [call for call in reply.invalid_tool_calls if call["name"] == FINAL_ANSWER_TOOL]
        others = len(reply.tool_calls) + len(reply.invalid_tool_calls) - len(finals) - len(broken)
        if broken:
            return None, [f"the arguments of {FINAL_ANSWER_TOOL} are not a JSON object"]
        if not finals:
            return None, [f"give the final answer by calling {FINAL_ANSWER_TOOL} with the object"]
        if len(finals) > 1 or others:
            return None, [f"call {FINAL_ANSWER_TOOL} alone and once, after the other tools' results are in"]
        return finals[0]["args"], self.contract.problems(finals[0]["args"])

    def _feedback(self, reply: AIMessage, problems: list[str]) -> list[BaseMessage]:
        """What the model is told about a rejected answer: a result for each call it made (a call
        without one is refused by providers), and the errors."""
        text = ("The answer does not match the required JSON Schema:\n- " + "\n- ".join(problems)
                + "\nAnswer again" + (" with only the JSON object." if self.native else
                                       f" by calling {FINAL_ANSWER_TOOL} with a corrected object."))
        calls = [*reply.tool_calls, *reply.invalid_tool_calls]
        results: list[BaseMessage] = [
            ToolMessage(content=text if call["name"] == FINAL_ANSWER_TOOL else
                        "Not run: the final answer was due; answer without other tools now.",
                        tool_call_id=call["id"] or "", name=call["name"] or "", status="error")
            for call in calls]
        if not any(call["name"] == FINAL_ANSWER_TOOL for call in calls):
            results.append(HumanMessage(text))
        return results


def final_answer_tool(schema: dict[str, Any]) -> BaseTool:
    """The ``final_answer`` tool: its arguments are the answer. Its calls are read by the model
    step (:meth:`StructuredOutput.settle`), never run as a tool."""

    async def refuse(**_: Any) -> str:
        raise ToolError(f"{FINAL_ANSWER_TOOL} is the answer itself: call it alone, as the last step")

    return StructuredTool(name=FINAL_ANSWER_TOOL, args_schema=schema, coroutine=refuse,
                          description="Give the final answer to the user: call this once, with the "
                          "answer as its arguments, when the work is done.")


def _accepted(reply: AIMessage, value: Any, *, native: bool) -> AIMessage:
    metadata = {**reply.response_metadata, OUTPUT_KEY: value}
    if not native:  # the final_answer call is the answer: it ends the turn like text would
        metadata["finish_reason"] = "stop"
    return AIMessage(content=json.dumps(value, indent=2, ensure_ascii=False), id=reply.id,
                     response_metadata=metadata, usage_metadata=reply.usage_metadata)


def _text(reply: AIMessage) -> str:
    if isinstance(reply.content, str):
        return reply.content
    return "".join(block if isinstance(block, str) else str(block.get("text", ""))
                   for block in reply.content if isinstance(block, str) or block.get("type") == "text")
