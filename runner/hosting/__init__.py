"""The running agent offered to other callers: one agent per process (``agent_host``), LangGraph
Server's graph factory (``langgraph_server``), ``mcp-run serve``, the agent as an MCP server
(``mcp``), the OpenAI-compatible Chat Completions API served beside it (``chat_completions``), and
the callers of both, each named by its bearer token and kept to its own threads (``callers``).
"""
