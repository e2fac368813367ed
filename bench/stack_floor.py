"""Row 10b's floor of the stack: an agent's call run as LangGraph and LangChain alone run it.

The same call as ``agent of agents: called in process`` with nothing of mcp-run's: a parent graph
whose model node asks for one tool call, a tool node that runs the called agent's graph as a
subgraph (under the parent's thread, with its config: the parent's checkpointer and streams), and a
called agent with one model node answering ``ping`` at once. Both models are the smallest LangChain
chat model (no streaming, no tools bound, no retries, no prompt). The parent is streamed as a turn
is (``messages``, ``updates`` and ``custom``, subgraphs included, a memory checkpointer written when
the run ends), and the call is timed as row 10b times it: from the parent's update carrying the tool
call to the one carrying its result. No agent call built on a LangGraph subgraph and a LangChain
model can cost less, so the composed call's time over this one bounds what 10b's ratio can reach.
Without the subgraph (the tool node calling the called agent's model itself) the call costs what
one model step in a tool step costs: what an agent's call would cost if it were not a graph.
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph

from bench.harness import BenchError
from bench.stats import elapsed_ms

ANSWER = "ping"
CALL = {"name": "sub", "args": {"task": ANSWER}, "id": "call-1", "type": "tool_call"}


class Messages(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class Replying(BaseChatModel):
    """Asks for the call of ``sub`` (the parent, until it has the result) or answers ``ping``."""

    calls_sub: bool

    @property
    def _llm_type(self) -> str:
        return "bench-replying"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        if not self.calls_sub:
            reply = AIMessage(ANSWER)
        elif isinstance(messages[-1], ToolMessage):
            reply = AIMessage(f"sub returned: {messages[-1].text}")
        else:
            reply = AIMessage("", tool_calls=[CALL])
        return ChatResult(generations=[ChatGeneration(message=reply)])

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return self._generate(messages, stop, **kwargs)


def stack_graph(*, subgraph: bool = True) -> CompiledStateGraph:
    """The parent graph, its tool node running the called agent's graph as a subgraph (or, without
    ``subgraph``, calling the called agent's model itself: one model step, no graph of its own)."""
    called_model, parent_model = Replying(calls_sub=False), Replying(calls_sub=True)

    async def answer(state: Messages, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await called_model.ainvoke(state["messages"], config)]}

    called = StateGraph(Messages)
    called.add_node("model", answer)
    called.add_edge(START, "model")
    called.add_edge("model", END)
    called_graph = called.compile(name="sub")

    async def model(state: Messages, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await parent_model.ainvoke(state["messages"], config)]}

    async def tools(state: Messages, config: RunnableConfig) -> dict[str, Any]:
        request = state["messages"][-1]
        assert isinstance(request, AIMessage)
        call = request.tool_calls[0]
        task = [HumanMessage(call["args"]["task"])]
        if subgraph:
            answer = (await called_graph.ainvoke({"messages": task}, config))["messages"][-1]
        else:
            answer = await called_model.ainvoke(task, config)
        return {"messages": [ToolMessage(answer.text, tool_call_id=call["id"], name=call["name"])]}

    def route(state: Messages) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    parent = StateGraph(Messages)
    parent.add_node("model", model)
    parent.add_node("tools", tools)
    parent.add_edge(START, "model")
    parent.add_conditional_edges("model", route, ["tools", END])
    parent.add_edge("tools", "model")
    return parent.compile(checkpointer=InMemorySaver())


async def timed_stack_call(graph: CompiledStateGraph) -> float:
    """One turn on a new thread; the ms from the update with the tool call to the one with its
    result (checks both, and the turn's answer)."""
    called_at = call_ms = 0.0
    final = None
    config: RunnableConfig = {"configurable": {"thread_id": uuid.uuid4().hex}}
    async for namespace, mode, data in graph.astream(
            {"messages": [HumanMessage("/call sub")]}, config,
            stream_mode=["messages", "updates", "custom"], subgraphs=True, durability="exit"):
        if namespace or mode != "updates":
            continue
        for node, update in data.items():
            message = update["messages"][-1]
            if node == "model" and isinstance(message, AIMessage) and message.tool_calls:
                called_at = time.perf_counter()
            elif node == "tools" and isinstance(message, ToolMessage):
                call_ms = elapsed_ms(called_at)
            elif node == "model":
                final = message.text
    if final != f"sub returned: {ANSWER}" or not called_at or not call_ms:
        raise BenchError(f"the bare LangGraph turn answered {final!r}, not one call's report of {ANSWER!r}")
    return call_ms
