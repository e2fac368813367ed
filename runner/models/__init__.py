"""Chat models from the manifest, and the two built-in models.

    providers.py  model ids -> LangChain chat models (``init_chat_model``), fallbacks, and tools
                  bound per call, since the tool list can change between two steps of a turn
    builtin.py    ``offline`` (no network: calls tools on request) and ``scripted`` (replays turns)
"""

from runner.models.builtin import (
    OFFLINE_ID,
    SCRIPTED_ID,
    OfflineChatModel,
    ScriptedChatModel,
    ScriptedToolCall,
    TextTurn,
    ToolCallsTurn,
    load_script,
)
from runner.models.providers import ModelChain, as_model_chain, build_chat_model, build_model_chain

__all__ = [
    "OFFLINE_ID",
    "SCRIPTED_ID",
    "ModelChain",
    "OfflineChatModel",
    "ScriptedChatModel",
    "ScriptedToolCall",
    "TextTurn",
    "ToolCallsTurn",
    "as_model_chain",
    "build_chat_model",
    "build_model_chain",
    "load_script",
]
