"""``mcp-run web``: the running agent in a browser page served from the package (no build step):
chat, tool calls as cards, questions answered in the page, servers, reloads, turn timelines, and
MCP Apps rendered in sandboxed frames."""
