"""Cases sharing one runtime, told apart by their thread: the model and the tool calls of each
case are live, recorded into its cassette, or replayed from it.

:class:`EvalSessions` is the runtime's host (:class:`~runner.agent.host.AgentHost`), so what it
changes holds for every generation, after reloads too: :class:`EvalModel` is the model chain the
graph calls (it sees the thread in the call's config), :meth:`EvalSessions.call_tool` sees every
tool call (it reads the thread from LangGraph's config), and :class:`CaseTemplate` renders the
system prompt with the case's ``vars`` and, for cassettes, the recorded time.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, NoReturn, cast

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.config import get_config

from runner.agent.checks import CheckedAgent
from runner.agent.host import Host
from runner.agent.nodes import MAX_STEPS_REASON
from runner.errors import CassetteDrift, ToolError
from runner.evals.cases import Case
from runner.evals.cassettes import (
    Cassette,
    ModelCall,
    RecordedReply,
    RecordedToolCall,
    Secrets,
    conversation_fingerprint,
    tool_fingerprints,
)
from runner.manifest import ModelSpec
from runner.manifest.loading import LoadedManifest
from runner.models import ModelChain, OfflineChatModel, build_model_chain
from runner.prompts.system import ServerSummary, SystemTemplate, ToolSummary
from runner.tools.caller import ToolCall
from runner.tools.content import ToolOutput

Mode = Literal["live", "record", "replay"]


@dataclass
class CaseRun:
    """One case's run: its thread, its cassette (recorded or replayed) and its counters."""

    case: Case
    thread_id: str
    cassette: Cassette | None = None
    now: datetime | None = None
    model_calls: int = 0
    turn_calls: int = 0
    drift: str | None = None
    replayed_tools: set[int] = field(default_factory=set)
    _last_system: str | None = None

    def begin_turn(self) -> None:
        """A new user message: the case's ``max_steps`` counts this turn's model calls afresh."""
        self.turn_calls = 0

    def count_model_call(self) -> None:
        self.turn_calls += 1
        self.model_calls += 1

    def record_model_call(self, system: str, tools: dict[str, str], conversation: str,
                          reply: AIMessage) -> None:
        assert self.cassette is not None
        calls = [{"name": c["name"], "args": c["args"], "id": c["id"]} for c in reply.tool_calls]
        recorded = RecordedReply(text=str(reply.text), tool_calls=calls,
                                 reason=reply.response_metadata.get("finish_reason"),
                                 usage=dict(reply.usage_metadata) if reply.usage_metadata else None)
        self.cassette.model_calls.append(ModelCall(
            system=None if system == self._last_system else system, tools=tools,
            conversation=conversation, reply=recorded))
        self._last_system = system

    def replay_model_call(self, system: str, tools: dict[str, str], conversation: str) -> AIMessage:
        assert self.cassette is not None
        recorded_calls = self.cassette.model_calls
        index = self.model_calls - 1
        if index >= len(recorded_calls):
            self.drifted(f"the model was called {index + 1} times; the recording has "
                         f"{len(recorded_calls)} calls")
        recorded = recorded_calls[index]
        expected_system = next((c.system for c in reversed(recorded_calls[: index + 1])
                                if c.system is not None), "")
        gone = sorted(set(recorded.tools) - set(tools))
        if gone:
            self.drifted(f"tool gone: {', '.join(gone)} (offered when recorded, not now)")
        changed = sorted(name for name, digest in recorded.tools.items() if tools.get(name) != digest)
        if changed:
            self.drifted(f"schema changed: {', '.join(changed)}")
        if system != expected_system:
            self.drifted(f"prompt changed: the system prompt differs from the recording "
                         f"({first_line_difference(expected_system, system)})")
        if conversation != recorded.conversation:
            self.drifted(f"the conversation before model call {index + 1} differs from the "
                         "recording (an input or a tool result changed)")
        reply = recorded.reply
        metadata = {"finish_reason": reply.reason} if reply.reason else {}
        calls = [{**call, "type": "tool_call"} for call in reply.tool_calls]
        return AIMessage(content=reply.text, tool_calls=calls, response_metadata=metadata,
                         usage_metadata=cast(Any, reply.usage))

    def record_tool_call(self, name: str, args: dict[str, Any], content: Any, error: bool) -> None:
        assert self.cassette is not None
        self.cassette.tool_calls.append(RecordedToolCall(name=name, args=args, content=content,
                                                         error=error))

    def replay_tool_call(self, name: str, args: dict[str, Any]) -> ToolOutput:
        assert self.cassette is not None
        for index, recorded in enumerate(self.cassette.tool_calls):
            if index in self.replayed_tools or recorded.name != name or recorded.args != args:
                continue
            self.replayed_tools.add(index)
            if recorded.error:
                raise ToolError(str(recorded.content))
            return ToolOutput(recorded.content, None, False)
        self.drifted(f"the call {name} {args} is not in the recording")

    def drifted(self, reason: str) -> NoReturn:
        self.drift = self.drift or reason
        raise CassetteDrift(reason)


def first_line_difference(expected: str, actual: str) -> str:
    old, new = expected.splitlines(), actual.splitlines()
    for number, (before, after) in enumerate(zip(old, new, strict=False), start=1):
        if before != after:
            return f"line {number}: recorded {before.strip()!r}, now {after.strip()!r}"
    return f"recorded {len(old)} lines, now {len(new)}"


class EvalSessions(Host):
    """Every case run of one ``mcp-run test`` invocation, by thread id; the runtime's host. No
    one answers a server's questions: they are declined, and the model told so."""

    def __init__(self, mode: Mode, *, model_id: str | None = None,
                 environ: Mapping[str, str] | None = None) -> None:
        super().__init__(answers_questions=False)
        self.mode = mode
        self.model_id = model_id
        self.environ = os.environ if environ is None else environ
        self.secrets = Secrets({})
        self.runs: dict[str, CaseRun] = {}

    def start(self, case: Case, thread_id: str, cassette: Cassette | None, now: datetime | None) -> CaseRun:
        run = CaseRun(case, thread_id, cassette, now)
        self.runs[thread_id] = run
        return run

    def run_for(self, config: RunnableConfig | None) -> CaseRun | None:
        thread = ((config or {}).get("configurable") or {}).get("thread_id")
        return self.runs.get(thread) if isinstance(thread, str) else None

    # -- the host: how the runtime runs the agent -------------------------------

    def agent(self, checked: CheckedAgent) -> CheckedAgent:
        """Cases keep their threads in memory, ``--model`` replaces the manifest's model, and the
        system template renders each case's ``vars``."""
        self.secrets = Secrets.of(checked.loaded, self.environ)
        template = checked.system_template
        if template is not None:
            template = CaseTemplate.around(template, self)
        return dataclasses.replace(checked, loaded=self.manifest_for_evals(checked.loaded),
                                   system_template=template)

    def manifest_for_evals(self, loaded: LoadedManifest) -> LoadedManifest:
        manifest = loaded.manifest
        update: dict[str, Any] = {"checkpointer": "memory"}
        if self.model_id and self.model_id != manifest.model.id:
            update["model"] = manifest.model.model_copy(update={
                "id": self.model_id, "fallbacks": [], "params": {}, "base_url": None,
                "api_key_env": None, "script": manifest.model.script if self.model_id == "scripted"
                else None})
        return dataclasses.replace(loaded, manifest=manifest.model_copy(update=update))

    def model(self, spec: ModelSpec, base_dir: Path) -> ModelChain:
        """No model is built for a replay: the replies come from the cassettes."""
        if self.mode == "replay":
            return EvalModel(ModelChain(OfflineChatModel()), self)
        return EvalModel(build_model_chain(spec, base_dir=base_dir), self)

    async def call_tool(self, name: str, arguments: dict[str, Any], call: ToolCall) -> ToolOutput:
        try:
            run = self.run_for(get_config())
        except RuntimeError:  # called outside a graph run: not a case's call
            run = None
        if run is None or self.mode == "live":
            return await call(name, arguments)
        if self.mode == "replay":
            return run.replay_tool_call(name, arguments)
        try:
            output = await call(name, arguments)
        except ToolError as exc:
            run.record_tool_call(name, arguments, str(exc), True)
            raise
        run.record_tool_call(name, arguments, output.content, False)
        return output


class EvalModel(ModelChain):
    """The model chain the graph calls: live, recording into the case's cassette, or replaying."""

    def __init__(self, inner: ModelChain, sessions: EvalSessions) -> None:
        super().__init__(inner.primary, inner.fallbacks)
        self.sessions = sessions

    async def ainvoke(
        self,
        messages: Sequence[BaseMessage],
        *,
        tools: Sequence[BaseTool],
        config: RunnableConfig | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AIMessage:
        # ``options``: the call's own (response_format, for structured output); a replayed reply
        # was answered to them when it was recorded.
        run = self.sessions.run_for(config)
        if run is None:
            return await super().ainvoke(messages, tools=tools, config=config, options=options)
        if run.drift is not None:  # a tool call already left the recording
            raise CassetteDrift(run.drift)
        limit = run.case.spec.max_steps
        if limit is not None and run.turn_calls >= limit:
            return AIMessage(content=f"stopped after {limit} model calls (the case's max_steps)",
                             response_metadata={"finish_reason": MAX_STEPS_REASON})
        run.count_model_call()
        mode, secrets = self.sessions.mode, self.sessions.secrets
        if mode == "live":
            return await super().ainvoke(messages, tools=tools, config=config, options=options)
        first = messages[0] if messages else None
        system = secrets.scrub(str(first.text)) if isinstance(first, SystemMessage) else ""
        offered = tool_fingerprints(tools)
        conversation = conversation_fingerprint(messages, secrets)
        if mode == "replay":
            return run.replay_model_call(system, offered, conversation)
        reply = await super().ainvoke(messages, tools=tools, config=config, options=options)
        run.record_model_call(system, offered, conversation, reply)
        return reply


@dataclass(frozen=True)
class CaseTemplate(SystemTemplate):
    """The system template rendered with the case's ``vars`` and, with cassettes, a fixed time."""

    sessions: EvalSessions | None = None

    @classmethod
    def around(cls, template: SystemTemplate, sessions: EvalSessions) -> CaseTemplate:
        fields = {f.name: getattr(template, f.name) for f in dataclasses.fields(SystemTemplate)}
        return cls(**fields, sessions=sessions)

    def render(self, servers: Sequence[ServerSummary], tools: Sequence[ToolSummary],
               now: datetime | None = None) -> str:
        try:
            run = self.sessions.run_for(get_config()) if self.sessions is not None else None
        except RuntimeError:  # rendered outside a graph run (a listing, a check)
            run = None
        if run is None:
            return super().render(servers, tools, now)
        plain = dataclasses.replace(self, vars={**self.vars, **run.case.spec.vars}, sessions=None)
        return plain.render(servers, tools, now or run.now)
