"""The two built-in models: ``offline`` (no network; calls tools on request and reports results)
and ``scripted`` (replays a list of turns, for tests and demos)."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, ClassVar

import yaml
from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    TypeAdapter,
    ValidationError,
)

from runner.errors import ManifestError, ModelError, Problem
from runner.manifest import OFFLINE_ID, SCRIPTED_ID, did_you_mean
from runner.models.schema_values import FINAL_ANSWER_TOOL, fitting_value

logger = logging.getLogger(__name__)

_RESULT_PREVIEW_CHARS = 500


# --------------------------------------------------------------------------- shared by built-ins


def _offered_tools(kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    """The OpenAI-format tool definitions bound with ``bind_tools`` (``function`` parts)."""
    return [tool["function"] for tool in kwargs.get("tools") or []]


def _answer_schema(kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON Schema of ``response_format`` (json_schema, as OpenAI's Chat Completions takes it)."""
    response_format = kwargs.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        return schema if isinstance(schema, dict) else None
    return None


def _as_answer(value: Any, tools: list[dict[str, Any]], schema: dict[str, Any] | None, call_id: str
               ) -> AIMessage:
    """A reply giving ``value`` as the answer object: its JSON text when asked with
    ``response_format``, else a ``final_answer`` call when that tool is offered, else the JSON text."""
    if schema is None and any(tool["name"] == FINAL_ANSWER_TOOL for tool in tools):
        call = {"name": FINAL_ANSWER_TOOL, "args": value, "id": call_id, "type": "tool_call"}
        return AIMessage(content="", tool_calls=[call])
    return AIMessage(content=json.dumps(value, ensure_ascii=False))


class _BuiltinChatModel(BaseChatModel):
    """Binds tools the way provider models do: as OpenAI-format ``tools`` call kwargs."""

    model_id: ClassVar[str]  # the manifest's model id of this built-in model

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _reply(self, messages: list[BaseMessage], tools: list[dict[str, Any]],
               schema: dict[str, Any] | None = None) -> AIMessage:
        """The reply to ``messages`` offered ``tools``; ``schema``: asked for an object (response_format)."""
        raise NotImplementedError

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = self._named(self._reply(messages, _offered_tools(kwargs), _answer_schema(kwargs)))
        message.response_metadata.setdefault("finish_reason", _finish_reason(message))
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._generate(messages, stop, **kwargs)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        # BaseChatModel reports each chunk to the callbacks itself.
        reply = self._reply(messages, _offered_tools(kwargs), _answer_schema(kwargs))
        for chunk in _as_chunks(self._named(reply)):
            yield chunk

    def _named(self, message: AIMessage) -> AIMessage:
        """``message`` naming the model that wrote it (``usage`` events say which), as providers' do."""
        message.response_metadata.setdefault("model_name", self.model_id)
        return message


def _as_chunks(message: AIMessage) -> Iterator[ChatGenerationChunk]:
    """Word-sized text chunks, then one chunk per tool call."""
    words = re.findall(r"\S+\s*|\s+", message.content if isinstance(message.content, str) else "")
    for word in words:
        yield ChatGenerationChunk(message=AIMessageChunk(content=word))
    for index, call in enumerate(message.tool_calls):
        part = tool_call_chunk(
            name=call["name"], args=json.dumps(call["args"]), id=call["id"], index=index
        )
        yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[part]))
    # The last chunk says why the reply ended (and its token usage), as a provider's does.
    yield ChatGenerationChunk(message=AIMessageChunk(
        content="", response_metadata={**message.response_metadata, "finish_reason": _finish_reason(message)},
        usage_metadata=message.usage_metadata))


def _finish_reason(message: AIMessage) -> str:
    return "tool_calls" if message.tool_calls else "stop"


# --------------------------------------------------------------------------- the offline model


class OfflineChatModel(_BuiltinChatModel):
    """A deterministic model without network: calls tools on request and reports results."""

    model_id: ClassVar[str] = OFFLINE_ID

    @property
    def _llm_type(self) -> str:
        return "mcp-run-offline"

    def _reply(self, messages: list[BaseMessage], tools: list[dict[str, Any]],
               schema: dict[str, Any] | None = None) -> AIMessage:
        reply = self._answer(messages, tools, schema)
        return reply.model_copy(update={"usage_metadata": _estimated_usage(messages, tools, reply)})

    def _answer(self, messages: list[BaseMessage], tools: list[dict[str, Any]],
                schema: dict[str, Any] | None = None) -> AIMessage:
        offered = [tool for tool in tools if tool["name"] != FINAL_ANSWER_TOOL]
        final_tool = next((tool for tool in tools if tool["name"] == FINAL_ANSWER_TOOL), None)
        answer_schema = schema or (final_tool or {}).get("parameters")
        reply = self._text_or_call(messages, offered)
        if answer_schema is None or reply.tool_calls:
            return reply
        # Asked for an object: the smallest that fits the schema, the text in its text fields.
        value = fitting_value(answer_schema, str(reply.content))
        return _as_answer(value, tools, schema, f"offline_{len(messages)}")

    def _text_or_call(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        if messages and isinstance(messages[-1], ToolMessage):
            return AIMessage(content=_report_results(messages))
        last = messages[-1] if messages else None
        text = str(last.text).strip() if isinstance(last, HumanMessage) else ""
        by_name = {tool["name"]: tool for tool in tools}
        request = _parse_call_request(text, by_name)
        if request is None:
            return AIMessage(content=_offline_help(tools))
        if isinstance(request, str):
            return AIMessage(content=request)
        name, args = request
        call = {"name": name, "args": args, "id": _call_id(messages), "type": "tool_call"}
        return AIMessage(content="", tool_calls=[call])


def _estimated_tokens(text: str) -> int:
    """About four characters a token, as providers' tokenizers average on English text."""
    return (len(text) + 3) // 4


def _estimated_usage(messages: list[BaseMessage], tools: list[dict[str, Any]], reply: AIMessage) -> Any:
    """The offline model's usage: what a provider would count for this request and reply, estimated
    from their sizes (the request: every message and the offered tools' definitions)."""
    asked = sum(_estimated_tokens(str(m.content)) + 4 for m in messages)
    asked += sum(_estimated_tokens(json.dumps(tool, separators=(",", ":"))) for tool in tools)
    answered = _estimated_tokens(str(reply.content)) + sum(
        _estimated_tokens(call["name"] + json.dumps(call["args"])) for call in reply.tool_calls)
    return {"input_tokens": asked, "output_tokens": answered, "total_tokens": asked + answered}


def _call_id(messages: list[BaseMessage]) -> str:
    """A call id unique in the thread, the same for the same request: from what the request
    carries (the messages' ids too), not its length, which a request fitted to the context
    window (runner.agent.context) can repeat."""
    digest = hashlib.sha256(repr([(m.type, m.id, m.content) for m in messages]).encode()).hexdigest()
    return f"offline_{digest[:12]}"


def _report_results(messages: list[BaseMessage]) -> str:
    results: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        results.insert(0, message)
    lines = []
    for result in results:
        text = str(result.text).strip()
        if len(text) > _RESULT_PREVIEW_CHARS:
            text = text[:_RESULT_PREVIEW_CHARS] + " …"
        verb = "failed" if result.status == "error" else "returned"
        if result.status == "error":  # "failed" says it: not "failed: Error: ..."
            text = text.removeprefix("Error: ")
        lines.append(f"{result.name or 'the tool'} {verb}: {text}")
    return "\n".join(lines)


def _required_args(tool: dict[str, Any]) -> list[str]:
    return list((tool.get("parameters") or {}).get("required") or [])


def _parse_call_request(
    text: str, tools: dict[str, dict[str, Any]]
) -> tuple[str, dict[str, Any]] | str | None:
    """(name, args) for a call request, a str explaining a bad request, or None for other text."""
    explicit = text.startswith("/call")
    if explicit:
        text = text.removeprefix("/call").strip()
    name, _, rest = text.partition(" ")
    rest = rest.strip()
    # A server__tool name with JSON (or nothing) after it is a call request even when unknown.
    looks_like_call = name in tools or ("__" in name and (not rest or rest.startswith("{")))
    if not explicit and (not looks_like_call or (rest and not rest.startswith("{"))):
        return None
    if name not in tools:
        available = ", ".join(sorted(tools)) or "none"
        return (f"There is no tool named '{name}'{did_you_mean(name, list(tools))}. "
                f"Available tools: {available}.")
    if not rest:
        missing = _required_args(tools[name])
        if missing:
            return f"{name} needs arguments: /call {name} {_args_example(missing)}"
        return name, {}
    try:
        args = json.loads(rest)
    except json.JSONDecodeError as exc:
        return f"Could not read the arguments of {name} as JSON ({exc.msg}); write a JSON object."
    if not isinstance(args, dict):
        return f"The arguments of {name} must be a JSON object, e.g. {{\"key\": \"value\"}}."
    return name, args


def _args_example(names: list[str]) -> str:
    return "{" + ", ".join(f'"{name}": ...' for name in names) + "}"


def _offline_help(tools: list[dict[str, Any]]) -> str:
    lines = ["This is the offline model: it runs no language model and only calls tools on request."]
    if tools:
        lines.append("Tools:")
        for tool in sorted(tools, key=lambda t: t["name"]):
            summary = (tool.get("description") or "").strip().splitlines()
            suffix = f"  - {summary[0]}" if summary else ""
            lines.append(f"  /call {tool['name']} {_args_example(_required_args(tool))}{suffix}")
        lines.append(
            "Call one with /call NAME {\"arg\": value} or NAME {...}, in the chat or with "
            "mcp-run FILE -p; NAME alone works when it needs no arguments. In the chat, /call "
            "calls the tool directly (with any model) and /help lists the chat commands."
        )
    else:
        lines.append("No tools are available.")
    lines.append(
        "To talk to a real model, set model.id in the manifest, e.g. `model: openai:gpt-4.1-mini`."
    )
    return "\n".join(lines)


# --------------------------------------------------------------------------- the scripted model


class _ScriptSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScriptedToolCall(_ScriptSpec):
    name: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class TokenUsage(_ScriptSpec):
    """Token counts the scripted reply reports, as a provider's would."""

    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    cached_tokens: int = Field(0, ge=0, description="Input tokens read from the provider's cache.")
    reasoning_tokens: int = Field(0, ge=0, description="Output tokens spent reasoning.")


def _usage_metadata(usage: TokenUsage) -> Any:
    """``usage`` as a provider's reply reports it (LangChain's ``usage_metadata``)."""
    metadata: dict[str, Any] = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                                "total_tokens": usage.input_tokens + usage.output_tokens}
    if usage.cached_tokens:
        metadata["input_token_details"] = {"cache_read": usage.cached_tokens}
    if usage.reasoning_tokens:
        metadata["output_token_details"] = {"reasoning": usage.reasoning_tokens}
    return metadata


def _answered_by(model: str | None) -> dict[str, Any]:
    """The response metadata naming the model a scripted turn says answered (``provider:model``)."""
    if model is None:
        return {}
    provider, _, name = model.rpartition(":")
    return {"model_name": name, **({"model_provider": provider} if provider else {})}


class TextTurn(_ScriptSpec):
    text: str
    usage: TokenUsage | None = None
    model: str | None = Field(None, min_length=1, description="provider:model the reply says it is from.")


class ToolCallsTurn(_ScriptSpec):
    tool_calls: list[ScriptedToolCall] = Field(min_length=1)
    text: str = ""
    usage: TokenUsage | None = None
    model: str | None = Field(None, min_length=1, description="provider:model the reply says it is from.")


class OutputTurn(_ScriptSpec):
    """An answer object (structured output): JSON text when asked with response_format, else a
    final_answer call when that tool is offered. Whether it validates is the test's choice."""

    output: dict[str, Any]
    usage: TokenUsage | None = None
    model: str | None = Field(None, min_length=1, description="provider:model the reply says it is from.")


_KINDS = {ToolCallsTurn: "tool_call_turn", OutputTurn: "output_turn"}


def _turn_kind(value: Any) -> str | None:
    if isinstance(value, str):
        return "plain"
    if isinstance(value, BaseModel):
        return _KINDS.get(type(value), "text_turn")
    if isinstance(value, dict):
        if "tool_calls" in value:
            return "tool_call_turn"
        return "output_turn" if "output" in value else "text_turn"
    return None


Turn = Annotated[
    Annotated[str, Tag("plain")]
    | Annotated[TextTurn, Tag("text_turn")]
    | Annotated[ToolCallsTurn, Tag("tool_call_turn")]
    | Annotated[OutputTurn, Tag("output_turn")],
    Discriminator(
        _turn_kind,
        custom_error_type="turn_kind",
        custom_error_message=(
            "a turn is a string, {text: ...}, {tool_calls: [{name, args}]} or {output: {...}}"),
    ),
]
_SCRIPT = TypeAdapter(list[Turn])


# Where each scripted model is in its script, by the model's id, for the runs of one context
# (None: each model's own position, shared by every thread). The tasks a run starts share it.
_SCRIPT_POSITIONS: ContextVar[dict[int, int] | None] = ContextVar("script_positions", default=None)


@contextmanager
def scripts_from_the_start() -> Iterator[None]:
    """Within it (and the tasks started in it), every scripted model plays its script from its
    first turn, apart from other contexts: each eval case runs the scripts as a lone run would,
    whatever ran before or runs beside it."""
    token = _SCRIPT_POSITIONS.set({})
    try:
        yield
    finally:
        _SCRIPT_POSITIONS.reset(token)


class ScriptedChatModel(_BuiltinChatModel):
    """Replays turns: each call consumes the next one. Records what each call was offered.

    ``calls[i]`` lists the tool names offered to call ``i``; ``received[i]`` its messages;
    ``offered_bytes[i]`` the size of its tool definitions (compact JSON, as a request carries them).
    A tool call without an ``id`` gets ``{id_prefix}_{turn}_{index}``: a script read from a file
    prefixes its name (``call_researcher_0_0``), so the calls of several agents' scripts in one
    turn never share an id.
    """

    turns: list[TextTurn | ToolCallsTurn | OutputTurn]
    id_prefix: str = "call"
    _next: int = PrivateAttr(0)
    _calls: list[list[str]] = PrivateAttr(default_factory=list)
    _offered_bytes: list[int] = PrivateAttr(default_factory=list)
    _received: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    def __init__(self, turns: Sequence[str | dict[str, Any] | TextTurn | ToolCallsTurn | OutputTurn],
                 id_prefix: str = "call") -> None:
        try:
            parsed = _SCRIPT.validate_python(list(turns))
        except ValidationError as exc:
            raise ModelError(f"invalid scripted turns: {exc}") from exc
        super().__init__(turns=[TextTurn(text=t) if isinstance(t, str) else t for t in parsed],
                         id_prefix=id_prefix)

    @classmethod
    def from_file(cls, path: Path) -> ScriptedChatModel:
        return cls(load_script(path), id_prefix="call_" + re.sub(r"[^A-Za-z0-9_-]", "_", path.stem))

    model_id: ClassVar[str] = SCRIPTED_ID

    @property
    def _llm_type(self) -> str:
        return "mcp-run-scripted"

    @property
    def calls(self) -> list[list[str]]:
        return self._calls

    @property
    def received(self) -> list[list[BaseMessage]]:
        return self._received

    @property
    def offered_bytes(self) -> list[int]:
        return self._offered_bytes

    def _reply(self, messages: list[BaseMessage], tools: list[dict[str, Any]],
               schema: dict[str, Any] | None = None) -> AIMessage:
        self._calls.append([tool["name"] for tool in tools])
        self._offered_bytes.append(sum(
            len(json.dumps({"type": "function", "function": tool}, separators=(",", ":"))) for tool in tools
        ))
        self._received.append(list(messages))
        positions = _SCRIPT_POSITIONS.get()  # set: this case's own positions (scripts_from_the_start)
        index = self._next if positions is None else positions.get(id(self), 0)
        if index >= len(self.turns):
            raise ModelError(
                f"the scripted model has no turn left: its {len(self.turns)} turns were used "
                f"before call {len(self._calls) if positions is None else index + 1}"
            )
        turn = self.turns[index]
        if positions is None:
            self._next += 1
        else:
            positions[id(self)] = index + 1
        usage = None if turn.usage is None else _usage_metadata(turn.usage)
        metadata = _answered_by(turn.model)
        if isinstance(turn, TextTurn):
            return AIMessage(content=turn.text, usage_metadata=usage, response_metadata=metadata)
        if isinstance(turn, OutputTurn):
            answer = _as_answer(turn.output, tools, schema, f"{self.id_prefix}_{index}_0")
            return answer.model_copy(update={"usage_metadata": usage,
                                             "response_metadata": {**answer.response_metadata, **metadata}})
        calls = [
            {"name": c.name, "args": c.args, "id": c.id or f"{self.id_prefix}_{index}_{n}",
             "type": "tool_call"}
            for n, c in enumerate(turn.tool_calls)
        ]
        return AIMessage(content=turn.text, tool_calls=calls, usage_metadata=usage,
                         response_metadata=metadata)


def load_script(path: Path) -> list[TextTurn | ToolCallsTurn | OutputTurn]:
    """Read and validate a script file; every problem is located in the file."""
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        problem = Problem(file, 1, 1, "", f"cannot read the script: {exc.strerror or exc}")
        raise ManifestError([problem]) from exc
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = Problem(file, line, column, "", f"YAML syntax: {exc.problem or exc}")
        raise ManifestError([problem]) from exc
    try:
        turns = _SCRIPT.validate_python(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            at_key = error["type"] == "extra_forbidden"  # point at the unknown key itself
            node, path_parts = _node_at(root, error["loc"], at_key=at_key)
            line, column = (node.start_mark.line + 1, node.start_mark.column + 1) if node else (1, 1)
            problems.append(Problem(file, line, column, ".".join(path_parts), error["msg"]))
        raise ManifestError(problems) from exc
    return [TextTurn(text=t) if isinstance(t, str) else t for t in turns]


def _node_at(
    root: yaml.Node | None, loc: tuple[int | str, ...], *, at_key: bool = False
) -> tuple[yaml.Node | None, list[str]]:
    """The deepest YAML node along a pydantic error location (its last key with ``at_key``), and
    the path walked to it.

    Location parts that name no key (union tags, a missing field) are skipped for the node but a
    missing field still ends the path, so the problem points at the mapping that lacks it.
    """
    node, path = root, []
    for depth, part in enumerate(loc, start=1):
        child = None
        if isinstance(node, yaml.MappingNode):
            pair = next((kv for kv in node.value if getattr(kv[0], "value", None) == part), None)
            child = pair and pair[0 if at_key and depth == len(loc) else 1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
        if child is not None:
            node = child
            path.append(str(part))
        elif isinstance(part, str) and part not in ("plain", "text_turn", "tool_call_turn", "output_turn"):
            path.append(part)
    return node, path
