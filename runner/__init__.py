"""mcp-run: a YAML manifest of MCP servers, tools and prompts becomes a LangGraph agent.

    import runner

    async with runner.load_agent("agent.yaml") as agent:
        result = await agent.graph.ainvoke({"messages": [("user", "hi")]}, agent.config())

The packages are the pipeline, each importing only those above it:

    errors      the one exception tree
    redaction   secrets out of what people see: credentials in URLs, in messages and log records
    events      the events of a turn and the chat (``--json``), typed; their JSON Schema
    lazy        package attributes imported on first use (a light `validate`)
    sdk         every use of a private member of the MCP SDK, LangGraph, LangChain or anyio
    task_groups background tasks of a block whose own exception leaves unwrapped
    manifest    the manifest: pydantic models, loading with positions, ${VAR} expansion
    store       the state folder and the checkpointers (memory, SQLite, PostgreSQL)
    telemetry   OpenTelemetry traces and metrics of turns and tool calls
    auth        OAuth for HTTP servers: flow, token store, login
    servers     the fleet of supervised MCP connections; transports/ reaches each server
    tools       MCP tools as LangChain tools: the catalog (build, list), the caller, search
    prompts     the system prompt template and MCP prompt templates as commands
    models      the chat model from the manifest; the offline and scripted models
    agent       checks, the runtime, its host, the graph and its nodes, turns, sampling, hot reload
    hosting     the agent offered to others: one per process, LangGraph Server, the ``serve`` command
    web         ``mcp-run web``: the agent in a browser page, MCP Apps in sandboxed frames
    evals       the ``test`` command: cases, cassettes, matching, reports
    authoring   ``init``, ``import`` and ``config``: help for writing a manifest
    cli         the only package that prints for humans and knows exit codes
"""

from __future__ import annotations

from typing import Any

__all__ = ["load_agent"]


def __getattr__(name: str) -> Any:
    # Imported on first use: `mcp-run validate` should not pay for LangGraph and the MCP SDK.
    if name == "load_agent":
        from runner.agent.runtime import load_agent

        return load_agent
    raise AttributeError(f"module 'runner' has no attribute {name!r}")
