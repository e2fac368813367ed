"""Chat models from the manifest: provider models through ``init_chat_model``, the built-in
ones, fallbacks, and tool binding per call (:class:`ModelChain`).

What a model id needs before it can be created (:func:`provider_of`, :func:`model_requirements`) is
answered here too, for ``mcp-run validate``: the provider comes from ``init_chat_model``'s own
registry (a ``provider:`` prefix it knows, or a model name it can infer a provider from), the
package from the same registry, and the API key variable from :data:`API_KEY_VARIABLES`.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool

from runner import telemetry
from runner.errors import ModelError, RunnerError
from runner.manifest import ModelSpec, did_you_mean
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


# --------------------------------------------------------------------------- what a model id needs

# The variable each provider's client reads its API key from (alternatives in order). Providers
# that authenticate otherwise (cloud credentials, local servers) are absent: nothing to warn about.
API_KEY_VARIABLES: dict[str, tuple[str, ...]] = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "cohere": ("COHERE_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "fireworks": ("FIREWORKS_API_KEY",),
    "google_genai": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "groq": ("GROQ_API_KEY",),
    "langsmith": ("LANGSMITH_GATEWAY_API_KEY", "LANGSMITH_API_KEY"),
    "mistralai": ("MISTRAL_API_KEY",),
    "nvidia": ("NVIDIA_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "perplexity": ("PPLX_API_KEY", "PERPLEXITY_API_KEY"),
    "together": ("TOGETHER_API_KEY",),
    "upstage": ("UPSTAGE_API_KEY",),
    "xai": ("XAI_API_KEY",),
}
# Older integrations that stand in for a provider's package (as init_chat_model accepts them).
_STAND_INS = {"ollama": "langchain_community"}


def _registry() -> dict[str, tuple[str, str, Any]]:
    """init_chat_model's providers: name -> (module, class name, factory).

    This and ``_parse_model`` are private names of ``langchain.chat_models.base``, used so that
    validate agrees with init_chat_model exactly; tests/test_models.py pins what they answer.
    """
    from langchain.chat_models import base

    return base._BUILTIN_PROVIDERS


def known_providers() -> list[str]:
    """The ``provider:`` prefixes init_chat_model knows."""
    return sorted(_registry())


def provider_of(model_id: str) -> str:
    """The provider ``model_id`` names (``openai:gpt-4.1-mini``) or implies (``gpt-4.1-mini``), as
    ``init_chat_model`` reads it; ModelError naming the known providers when there is none."""
    from langchain.chat_models import base

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the notice about inferring Vertex AI for 'gemini…'
        try:
            return base._parse_model(model_id, None)[1]
        except ValueError:
            pass
    known = known_providers()
    builtin = f"or the built-in '{OFFLINE_ID}' / '{SCRIPTED_ID}'"
    if ":" in model_id:
        prefix = model_id.split(":", 1)[0]
        raise ModelError(f"unknown model provider '{prefix}'{did_you_mean(prefix, known)}: use "
                         f"provider:model with one of {', '.join(known)}, {builtin}")
    raise ModelError(f"model '{model_id}' names no provider and none can be inferred from it: use "
                     f"provider:model, e.g. openai:gpt-4.1-mini, anthropic:claude-sonnet-4-5, "
                     f"ollama:llama3.1, {builtin}; providers: {', '.join(known)}")


def provider_package(provider: str) -> str:
    """The pip name of ``provider``'s integration package (``langchain-openai``)."""
    module = _registry()[provider][0]
    return module.split(".", 1)[0].replace("_", "-")


def install_hint(package: str) -> str:
    """``pip install 'mcp-run[openai]'`` when an extra of mcp-run brings ``package`` alone, else
    ``pip install package``."""
    try:
        requirements = importlib.metadata.requires("mcp-run") or []
    except importlib.metadata.PackageNotFoundError:
        requirements = []
    extras: dict[str, set[str]] = {}
    for requirement in requirements:  # 'langchain-openai>=1.0; extra == "openai"'
        name, _, marker = requirement.partition(";")
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
        if extra:
            extras.setdefault(extra.group(1), set()).add(_normalised(re.split(r"[\s<>=!~\[]", name)[0]))
    fitting = sorted(extra for extra, names in extras.items() if names == {_normalised(package)})
    return f"pip install 'mcp-run[{fitting[0]}]'" if fitting else f"pip install {package}"


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def model_requirements(
    model_id: str, provider: str, *, spec: ModelSpec | None, environ: Mapping[str, str]
) -> list[str]:
    """What is missing here for ``model_id`` to be created: its package, its API key variable.

    ``spec`` is given for the manifest's primary model, whose ``api_key_env`` and ``params`` apply.
    """
    missing: list[str] = []
    module = _registry()[provider][0].split(".", 1)[0]
    stand_in = _STAND_INS.get(provider)
    if importlib.util.find_spec(module) is None and not (stand_in and importlib.util.find_spec(stand_in)):
        package = provider_package(provider)
        missing.append(f"model '{model_id}' needs the {package} package, which is not installed: "
                       f"{install_hint(package)}")
    if spec is not None and spec.api_key_env:
        if not environ.get(spec.api_key_env):
            missing.append(f"model '{model_id}' reads its API key from {spec.api_key_env} "
                           f"(model.api_key_env), which is not set: export {spec.api_key_env}=…")
        return missing
    if spec is not None and any(name.endswith("api_key") for name in spec.params):
        return missing
    variables = API_KEY_VARIABLES.get(provider, ())
    if variables and not any(environ.get(name) for name in variables):
        other = " (or name another variable with model.api_key_env)" if spec is not None else ""
        unset = "which is not set" if len(variables) == 1 else "none of which is set"
        missing.append(f"model '{model_id}' reads its API key from {' or '.join(variables)}, {unset}: "
                       f"export {variables[0]}=…{other}")
    return missing


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


