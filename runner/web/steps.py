"""What each model step of a turn in the page was given: the system prompt, the tools offered and
how many messages, reported as the step starts so the page's timeline can show it.

The page's agent runs with :class:`WebHost`, whose model chains report each call on the running
graph's custom stream; a turn's stream carries the report as an event of type ``model_request``
(the page's own: the chat and ``--json`` never see it, their host reports nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from runner.agent.host import Host
from runner.agent.turn_stream import stream_writer
from runner.manifest import ModelSpec
from runner.models import ModelChain

STEP_EVENT = "model_request"


def tool_name(tool: BaseTool | dict[str, Any]) -> str:
    if isinstance(tool, BaseTool):
        return tool.name
    function = tool.get("function")
    return str(function.get("name") if isinstance(function, Mapping) else tool.get("name"))


class StepReporting(ModelChain):
    """A model chain that reports what each call is given, then makes it as ``inner`` would."""

    def __init__(self, inner: ModelChain) -> None:
        super().__init__(inner.primary, inner.fallbacks, attempts=inner.attempts)

    async def ainvoke(
        self,
        messages: Sequence[BaseMessage],
        *,
        tools: Sequence[BaseTool | dict[str, Any]],
        config: RunnableConfig | None = None,
        options: Mapping[str, Any] | None = None,
        tool_choice: str | None = None,
    ) -> AIMessage:
        report = stream_writer()
        if report is not None:
            first = messages[0] if messages else None
            report({"type": STEP_EVENT,  # type: ignore[arg-type]  # the page's own, not of runner.events
                    "system_prompt": first.text if isinstance(first, SystemMessage) else "",
                    "tools": [tool_name(tool) for tool in tools], "messages": len(messages)})
        return await super().ainvoke(messages, tools=tools, config=config, options=options,
                                     tool_choice=tool_choice)


class WebHost(Host):
    """The page's host: as the chat's, with each model step reported (:class:`StepReporting`)."""

    def model(self, spec: ModelSpec, base_dir: Path) -> ModelChain:
        return StepReporting(super().model(spec, base_dir))
