"""Chat models from the manifest, and the two built-in models.

    registry.py   what a model id needs (its provider, package, API key), without LangChain's models
    providers.py  model ids -> LangChain chat models (``init_chat_model``), fallbacks, and tools
                  bound per call, since the tool list can change between two steps of a turn
    retries.py    each request bounded by model.timeout and retried by model.retries (backoff,
                  Retry-After), each retry an event and a span
    builtin.py    ``offline`` (no network: calls tools on request) and ``scripted`` (replays turns)
"""

from __future__ import annotations

from runner.lazy import lazy_attributes

_EXPORTS = {
    "OFFLINE_ID": "runner.models.builtin",
    "SCRIPTED_ID": "runner.models.builtin",
    "OfflineChatModel": "runner.models.builtin",
    "ScriptedChatModel": "runner.models.builtin",
    "ScriptedToolCall": "runner.models.builtin",
    "TextTurn": "runner.models.builtin",
    "ToolCallsTurn": "runner.models.builtin",
    "load_script": "runner.models.builtin",
    "ModelChain": "runner.models.providers",
    "as_model_chain": "runner.models.providers",
    "build_chat_model": "runner.models.providers",
    "build_model_chain": "runner.models.providers",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_attributes(__name__, _EXPORTS)
