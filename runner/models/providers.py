"""Chat models from the manifest: provider models through ``init_chat_model``, the built-in
ones, fallbacks, and tool binding per call (:class:`ModelChain`).

What a model id needs before it can be created (:func:`provider_of`, :func:`model_requirements`) is
answered by :mod:`runner.models.registry`.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool

from runner import telemetry
from runner.errors import ModelError, RunnerError
from runner.events import EventSink
from runner.manifest import OFFLINE_ID, SCRIPTED_ID, ModelSpec, RetrySpec
from runner.manifest.model_calls import DEFAULT_TIMEOUT
from runner.models.builtin import OfflineChatModel, ScriptedChatModel
from runner.models.registry import install_hint, provider_of
from runner.models.retries import Attempts, Spent

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
        model = init_chat_model(model_id, **kwargs)
        if "max_retries" in type(model).model_fields and "max_retries" not in kwargs:
            # The client's own hidden retries would multiply ours (runner.models.retries).
            model = init_chat_model(model_id, **kwargs, max_retries=0)
        return model
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


def build_model_chain(
    spec: ModelSpec, *, base_dir: Path, events: Callable[[], EventSink | None] | None = None
) -> ModelChain:
    """The primary model of ``spec`` followed by its fallbacks, each request tried as
    ``spec.timeout`` and ``spec.retries`` say; ``events`` gives the sink of the turn running
    (its ``model_retry`` and ``model_fallback`` events)."""
    if spec.api_key_env and not os.environ.get(spec.api_key_env) and spec.fallbacks:
        return _chain_without_primary(spec, base_dir=base_dir, events=events)
    primary = build_chat_model(spec, base_dir=base_dir)
    fallbacks = [build_chat_model(spec, base_dir=base_dir, model_id=i) for i in spec.fallbacks]
    logger.debug("model %s with fallbacks %s", spec.id, spec.fallbacks)
    attempts = Attempts(spec.retries, spec.timeout, (spec.id, *spec.fallbacks), events)
    return ModelChain(primary, fallbacks, attempts=attempts)


def _chain_without_primary(spec: ModelSpec, *, base_dir: Path,
                           events: Callable[[], EventSink | None] | None) -> ModelChain:
    """The fallbacks of ``spec`` whose primary model cannot be created for want of its API key
    (``model.api_key_env`` unset): each that can be created, in order, with a warning saying why
    the primary (and any fallback left out) was skipped; ModelError naming the variable when none
    can be."""
    skipped = (f"model '{spec.id}' is skipped: its API key variable {spec.api_key_env} "
               f"(model.api_key_env) is not set")
    built: list[tuple[str, BaseChatModel]] = []
    failed: list[str] = []
    for model_id in spec.fallbacks:
        try:
            built.append((model_id, build_chat_model(spec, base_dir=base_dir, model_id=model_id)))
        except ModelError as exc:
            failed.append(str(exc))
    if not built:
        raise ModelError(f"model '{spec.id}' cannot be used: its API key variable {spec.api_key_env} "
                         f"(model.api_key_env) is not set (export {spec.api_key_env}=…), and no fallback "
                         f"can be used instead: {'; '.join(failed)}")
    names = tuple(model_id for model_id, _ in built)
    logger.warning("%s: using %s instead", skipped, " then ".join(names))
    for reason in failed:
        logger.warning("fallback left out: %s", reason)
    attempts = Attempts(spec.retries, spec.timeout, names, events)
    return ModelChain(built[0][1], [model for _, model in built[1:]], attempts=attempts,
                      skipped=f"{skipped}; ")


BOUND_KEPT = 8  # tool sets a ModelChain keeps bound: a generation's, and its found-tool sets
_Bound = Runnable[LanguageModelInput, BaseMessage]


class ModelChain:
    """A primary chat model and the models tried in order when a call to it fails."""

    def __init__(self, primary: BaseChatModel, fallbacks: Sequence[BaseChatModel] = (), *,
                 attempts: Attempts | None = None, skipped: str = "") -> None:
        self.primary = primary
        self._skipped = skipped  # why the manifest's own primary is not in the chain, said on failure
        self.fallbacks = list(fallbacks)
        # Without the manifest's settings (a chain made in code): its defaults, models named by class.
        names = tuple(type(model).__name__ for model in (primary, *self.fallbacks))
        self.attempts = attempts or Attempts(RetrySpec(), DEFAULT_TIMEOUT, names)
        # The models bound to recent tool sets, by the tools' identities (the tools are kept
        # with them, so an identity is not reused while its entry lasts): binding converts every
        # tool, and the steps of a turn offer the same tools again.
        self._bound: dict[tuple[Any, ...], tuple[tuple[BaseTool, ...], list[_Bound]]] = {}

    def __repr__(self) -> str:
        names = [type(m).__name__ for m in (self.primary, *self.fallbacks)]
        return f"ModelChain({' -> '.join(names)})"

    def bind_tools(
        self, tools: Sequence[BaseTool | dict[str, Any]], tool_choice: str | None = None
    ) -> Runnable[LanguageModelInput, BaseMessage]:
        """Every model bound to ``tools`` (none bound when empty), chained as fallbacks;
        ``tool_choice="any"`` makes each call one of them."""
        bound = self._bind_each(tools, tool_choice)
        return bound[0].with_fallbacks(bound[1:]) if len(bound) > 1 else bound[0]

    def _bind_each(
        self, tools: Sequence[BaseTool | dict[str, Any]], tool_choice: str | None
    ) -> list[_Bound]:
        choice = {"tool_choice": tool_choice} if tool_choice else {}
        return [m.bind_tools(list(tools), **choice) if tools else m for m in (self.primary, *self.fallbacks)]

    def _bound_to(
        self, tools: Sequence[BaseTool | dict[str, Any]], tool_choice: str | None
    ) -> list[_Bound]:
        """Each model bound to ``tools``, kept for the last ``BOUND_KEPT`` sets of LangChain tools."""
        if not all(isinstance(tool, BaseTool) for tool in tools):  # definitions made per call
            return self._bind_each(tools, tool_choice)
        key = (tool_choice, *map(id, tools))
        kept = self._bound.get(key)
        if kept is not None:
            return kept[1]
        runnable = self._bind_each(tools, tool_choice)
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
        """One model call offering ``tools``, each model tried (and retried) in turn as
        :class:`~runner.models.retries.Attempts` says; failures of the whole chain become
        ModelError. ``options`` (``max_tokens``, ``stop``) are passed to the provider's call."""
        try:
            runnables = self._bound_to(tools, tool_choice)
        except RunnerError:
            raise
        except Exception as exc:  # binding converts the tools: the provider's package may refuse one
            raise ModelError(f"the model call failed: {type(exc).__name__}: {exc}") from exc
        if options:
            runnables = [runnable.bind(**options) for runnable in runnables]
        answer = self._first_answer(runnables, list(messages), config)
        reply = await telemetry.model_step(self.primary, answer)
        if not isinstance(reply, AIMessage):
            raise ModelError(f"the model answered with a {type(reply).__name__}, not an AIMessage")
        return reply


    async def _first_answer(self, runnables: Sequence[_Bound], messages: list[BaseMessage],
                            config: RunnableConfig | None) -> BaseMessage:
        """The answer of the first model that gives one; ModelError naming what each said."""
        failures: list[Spent] = []
        for index, runnable in enumerate(runnables):
            try:
                return await self.attempts.call(index, partial(_invoke, runnable, messages), config)
            except Spent as spent:
                if isinstance(spent.error, RunnerError) and len(runnables) == 1:
                    raise spent.error from None  # already says what is wrong (a scripted model's)
                failures.append(spent)
                if index + 1 < len(runnables):
                    self.attempts.fell_back(index, spent)
        if len(failures) == 1:
            raise ModelError(f"the model call failed: {self._skipped}{failures[0]}") from failures[0].error
        tried = "; ".join(map(str, failures))
        raise ModelError(f"the model call failed on every model: {self._skipped}{tried}"
                         ) from failures[-1].error


async def _invoke(runnable: _Bound, messages: list[BaseMessage], config: RunnableConfig | None
                  ) -> BaseMessage:
    return await runnable.ainvoke(messages, config)


def as_model_chain(model: ModelChain | BaseChatModel) -> ModelChain:
    return model if isinstance(model, ModelChain) else ModelChain(model)


