"""Chat models from the manifest: provider models through ``init_chat_model``, the built-in
ones, fallbacks, and tool binding per call (:class:`ModelChain`).

What a model id needs before it can be created (:func:`provider_of`, :func:`model_requirements`) is
answered by :mod:`runner.models.registry`.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool

from runner import telemetry
from runner.errors import ModelError, RunnerError
from runner.manifest import OFFLINE_ID, SCRIPTED_ID, ModelSpec
from runner.models.builtin import OfflineChatModel, ScriptedChatModel
from runner.models.registry import install_hint, provider_of

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

    provider_of(model_id)  # an unknown provider gets the same message as in validate
    try:
        return init_chat_model(model_id, **kwargs)
    except ImportError as exc:
        package = re.search(r"pip install ([^\s`'\"]+)", str(exc))
        if package is None:
            raise ModelError(f"model '{model_id}' cannot be loaded: {exc}") from exc
        raise ModelError(
            f"model '{model_id}' needs the {package.group(1)} package: {install_hint(package.group(1))}"
        ) from exc
    except ValueError as exc:
        raise ModelError(f"model '{model_id}' cannot be created: {exc}") from exc
    except Exception as exc:  # provider clients fail in their own ways (missing key, bad params)
        raise ModelError(f"model '{model_id}' cannot be created: {type(exc).__name__}: {exc}") from exc


def build_model_chain(spec: ModelSpec, *, base_dir: Path) -> ModelChain:
    """The primary model of ``spec`` followed by its fallbacks."""
    primary = build_chat_model(spec, base_dir=base_dir)
    fallbacks = [build_chat_model(spec, base_dir=base_dir, model_id=i) for i in spec.fallbacks]
    logger.debug("model %s with fallbacks %s", spec.id, spec.fallbacks)
    return ModelChain(primary, fallbacks)


BOUND_KEPT = 8  # tool sets a ModelChain keeps bound: a generation's, and its found-tool sets
_Bound = Runnable[LanguageModelInput, BaseMessage]


class ModelChain:
    """A primary chat model and the models tried in order when a call to it fails."""

    def __init__(self, primary: BaseChatModel, fallbacks: Sequence[BaseChatModel] = ()) -> None:
        self.primary = primary
        self.fallbacks = list(fallbacks)
        # The models bound to recent tool sets, by the tools' identities (the tools are kept
        # with them, so an identity is not reused while its entry lasts): binding converts every
        # tool, and the steps of a turn offer the same tools again.
        self._bound: dict[tuple[Any, ...], tuple[tuple[BaseTool, ...], _Bound]] = {}

    def __repr__(self) -> str:
        names = [type(m).__name__ for m in (self.primary, *self.fallbacks)]
        return f"ModelChain({' -> '.join(names)})"

    def bind_tools(
        self, tools: Sequence[BaseTool | dict[str, Any]], tool_choice: str | None = None
    ) -> Runnable[LanguageModelInput, BaseMessage]:
        """Every model bound to ``tools`` (none bound when empty), chained as fallbacks;
        ``tool_choice="any"`` makes each call one of them."""
        choice = {"tool_choice": tool_choice} if tool_choice else {}
        bound = [m.bind_tools(list(tools), **choice) if tools else m for m in (self.primary, *self.fallbacks)]
        return bound[0].with_fallbacks(bound[1:]) if len(bound) > 1 else bound[0]

    def _bound_to(
        self, tools: Sequence[BaseTool | dict[str, Any]], tool_choice: str | None
    ) -> Runnable[LanguageModelInput, BaseMessage]:
        """``bind_tools``, kept for the last ``BOUND_KEPT`` sets of LangChain tools."""
        if not all(isinstance(tool, BaseTool) for tool in tools):  # definitions made per call
            return self.bind_tools(tools, tool_choice)
        key = (tool_choice, *map(id, tools))
        kept = self._bound.get(key)
        if kept is not None:
            return kept[1]
        runnable = self.bind_tools(tools, tool_choice)
        if len(self._bound) >= BOUND_KEPT:
            del self._bound[next(iter(self._bound))]  # the oldest
        self._bound[key] = (tuple(tools), runnable)  # type: ignore[arg-type]
        return runnable

    async def ainvoke(
        self,
        messages: Sequence[BaseMessage],
        *,
        tools: Sequence[BaseTool | dict[str, Any]],
        config: RunnableConfig | None = None,
        options: Mapping[str, Any] | None = None,
        tool_choice: str | None = None,
    ) -> AIMessage:
        """One model call offering ``tools``; failures of the whole chain become ModelError.
        ``options`` (``max_tokens``, ``stop``) are passed to the provider's call."""
        try:
            runnable = self._bound_to(tools, tool_choice)
            if options:
                runnable = runnable.bind(**options)
            reply = await telemetry.model_step(self.primary, runnable.ainvoke(list(messages), config))
        except RunnerError:
            raise
        except Exception as exc:  # the one boundary where provider errors are translated
            raise ModelError(f"the model call failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(reply, AIMessage):
            raise ModelError(f"the model answered with a {type(reply).__name__}, not an AIMessage")
        return reply


def as_model_chain(model: ModelChain | BaseChatModel) -> ModelChain:
    return model if isinstance(model, ModelChain) else ModelChain(model)


