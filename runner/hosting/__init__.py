"""The running agent offered to other callers: one agent per process (``agent_host``), LangGraph
Server's graph factory (``langgraph_server``), and ``mcp-run serve``, the agent as an MCP server
(``mcp``).
"""
