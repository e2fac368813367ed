"""Chat models from the manifest: provider models through ``init_chat_model``, the built-in
ones, fallbacks, and tool binding per call (:class:`ModelChain`)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool

from runner.errors import ModelError, RunnerError
from runner.manifest import ModelSpec
from runner.models.builtin import OFFLINE_ID, SCRIPTED_ID, OfflineChatModel, ScriptedChatModel

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- building models


def build_chat_model(
    spec: ModelSpec, *, base_dir: Path, model_id: str | None = None
) -> BaseChatModel:
    """The chat model named by ``model_id`` (default ``spec.id``), configured from ``spec``.

    ``base_url``, ``api_key_env`` and ``params`` apply to ``spec.id`` only; a fallback id gets none
    of them, since fallbacks are usually other providers.
    """
    model_id = model_id or spec.id
    if model_id == OFFLINE_ID:
        return OfflineChatModel()
    if model_id == SCRIPTED_ID:
        if not spec.script:
            raise ModelError("the 'scripted' model needs 'script: path/to/turns.yaml'")
        return ScriptedChatModel.from_file(base_dir / spec.script)
    kwargs: dict[str, Any] = {}
    if model_id == spec.id:
        kwargs.update(spec.params)
        if spec.base_url:
            kwargs["base_url"] = spec.base_url
        if spec.api_key_env:
            key = os.environ.get(spec.api_key_env)
            if not key:
                raise ModelError(
                    f"model '{model_id}' reads its API key from the environment variable "
                    f"{spec.api_key_env} (model.api_key_env), which is not set: set it, e.g. "
                    f"export {spec.api_key_env}=..."
                )
            kwargs["api_key"] = key
    return _init_provider_model(model_id, kwargs)


def _init_provider_model(model_id: str, kwargs: dict[str, Any]) -> BaseChatModel:
    from langchain.chat_models import init_chat_model

    try:
        return init_chat_model(model_id, **kwargs)
    except ImportError as exc:
        package = re.search(r"pip install ([^\s`'\"]+)", str(exc))
        if package is None:
            raise ModelError(f"model '{model_id}' cannot be loaded: {exc}") from exc
        raise ModelError(
            f"model '{model_id}' needs the {package.group(1)} package: "
            f"pip install {package.group(1)}"
        ) from exc
    except ValueError as exc:
        raise ModelError(
            f"model '{model_id}' is not a known chat model id: use provider:model, e.g. "
            f"openai:gpt-4.1-mini, anthropic:claude-sonnet-4-5, google_genai:gemini-2.5-flash, "
            f"ollama:llama3.1, or the built-in '{OFFLINE_ID}' / '{SCRIPTED_ID}' ({exc})"
        ) from exc
    except Exception as exc:  # provider clients fail in their own ways (missing key, bad params)
        raise ModelError(f"model '{model_id}' cannot be created: {type(exc).__name__}: {exc}") from exc


def build_model_chain(spec: ModelSpec, *, base_dir: Path) -> ModelChain:
    """The primary model of ``spec`` followed by its fallbacks."""
    primary = build_chat_model(spec, base_dir=base_dir)
    fallbacks = [build_chat_model(spec, base_dir=base_dir, model_id=i) for i in spec.fallbacks]
    logger.debug("model %s with fallbacks %s", spec.id, spec.fallbacks)
    return ModelChain(primary, fallbacks)


class ModelChain:
    """A primary chat model and the models tried in order when a call to it fails."""

    def __init__(self, primary: BaseChatModel, fallbacks: Sequence[BaseChatModel] = ()) -> None:
        self.primary = primary
        self.fallbacks = list(fallbacks)

    def __repr__(self) -> str:
        names = [type(m).__name__ for m in (self.primary, *self.fallbacks)]
        return f"ModelChain({' -> '.join(names)})"

    def bind_tools(self, tools: Sequence[BaseTool]) -> Runnable[LanguageModelInput, BaseMessage]:
        """Every model bound to ``tools`` (none bound when empty), chained as fallbacks."""
        bound = [m.bind_tools(list(tools)) if tools else m for m in (self.primary, *self.fallbacks)]
        return bound[0].with_fallbacks(bound[1:]) if len(bound) > 1 else bound[0]

    async def ainvoke(
        self,
        messages: Sequence[BaseMessage],
        *,
        tools: Sequence[BaseTool],
        config: RunnableConfig | None = None,
    ) -> AIMessage:
        """One model call offering ``tools``; failures of the whole chain become ModelError."""
        try:
            reply = await self.bind_tools(tools).ainvoke(list(messages), config)
        except RunnerError:
            raise
        except Exception as exc:  # the one boundary where provider errors are translated
            raise ModelError(f"the model call failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(reply, AIMessage):
            raise ModelError(f"the model answered with a {type(reply).__name__}, not an AIMessage")
        return reply


def as_model_chain(model: ModelChain | BaseChatModel) -> ModelChain:
    return model if isinstance(model, ModelChain) else ModelChain(model)


