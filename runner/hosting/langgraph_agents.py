"""The agents of the manifest's ``agents:`` under LangGraph's own server, one graph each.

``langgraph.json`` declares a graph per agent, named after it, beside the main agent's::

    "graphs": {
        "agent": "runner.hosting.langgraph_server:graph",
        "researcher": "runner.hosting.langgraph_agents:researcher"
    }

This module's public names are the agents of the manifest that ``MCP_RUN_MANIFEST`` names (read
when the server imports it, in a worker thread), each a graph factory: the agent served on its own
(:func:`runner.agent.team.hosted_graph`: a run's last user message is its task, its final answer
the run's reply). Every agent is one graph of the one agent the server starts
(:mod:`runner.hosting.langgraph_server`), so they share its MCP servers. Everything else here is
private (``_``): agent names cannot start with one, so no agent's name is taken.
"""

from typing import Any as _Any

from runner.hosting.agent_host import HOST as _HOST


def _factory(name: str) -> _Any:
    async def graph(config: _Any) -> _Any:
        """Agent ``name``'s graph in the running agent (the server sets its checkpointer)."""
        from runner.errors import RunnerError

        agents = (await _HOST.runtime()).agents
        if name not in agents:  # the manifest changed since the server started
            raise RunnerError(f"the manifest has no agent '{name}' any more; restart the server")
        return agents[name]

    return graph


def _agent_names() -> list[str]:
    from runner.hosting.agent_host import manifest_path
    from runner.manifest.loading import load_manifest

    return sorted(load_manifest(manifest_path()).manifest.agents)


globals().update({_name: _factory(_name) for _name in _agent_names()})
