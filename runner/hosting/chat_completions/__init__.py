"""The served agent over the OpenAI Chat Completions API, beside MCP on ``mcp-run serve --http``:
each agent is a model, a conversation is a thread (:mod:`.requests` says how one is named), and a
turn's text streams as content (:mod:`.turns`); :mod:`.app` is the ASGI app under ``/v1/``.
"""

from runner.hosting.chat_completions.app import (
    API_PREFIX,
    ChatCompletions,
    ServedAgent,
    served_agents,
    unauthorized,
)

__all__ = ["API_PREFIX", "ChatCompletions", "ServedAgent", "served_agents", "unauthorized"]
