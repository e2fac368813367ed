"""What a model id needs before it can be created, for the manifest checks (``mcp-run validate``
and every command that loads a manifest): which provider it names, from ``init_chat_model``'s own
registry (a ``provider:`` prefix it knows, or a model name it can infer a provider from), that
provider's package, and the API key variable (:data:`API_KEY_VARIABLES`). Answered without
importing LangChain's chat models where the id names its provider.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import warnings
from collections.abc import Mapping
from functools import cache

from runner import sdk
from runner.errors import ModelError
from runner.manifest import OFFLINE_ID, SCRIPTED_ID, ModelSpec, did_you_mean

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


@cache
def _registry() -> dict[str, str]:
    """init_chat_model's providers: name -> the module of its chat model class (LangChain's
    private table, read by :func:`runner.sdk.chat_model_providers` without importing it)."""
    return sdk.chat_model_providers()


def known_providers() -> list[str]:
    """The ``provider:`` prefixes init_chat_model knows."""
    return sorted(_registry())


def provider_of(model_id: str) -> str:
    """The provider ``model_id`` names (``openai:gpt-4.1-mini``) or implies (``gpt-4.1-mini``), as
    ``init_chat_model`` reads it; ModelError naming the known providers when there is none."""
    prefix = model_id.split(":", 1)[0]
    if ":" in model_id and prefix in _registry():
        return prefix  # init_chat_model's first rule; only inferring needs LangChain itself
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the notice about inferring Vertex AI for 'gemini…'
        try:
            return sdk.inferred_provider(model_id)
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
    module = _registry()[provider]
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
    module = _registry()[provider].split(".", 1)[0]
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


def profile_window(model_id: str) -> int | None:
    """The input window (tokens) LangChain's model profile gives ``model_id``, read without
    creating the model; None for the built-in models and where the profile does not say."""
    if model_id in (OFFLINE_ID, SCRIPTED_ID):
        return None
    try:
        provider = provider_of(model_id)
    except ModelError:
        return None
    package = _registry()[provider].split(".", 1)[0]
    if importlib.util.find_spec(package) is None:
        return None
    profile = sdk.partner_model_profile(package, model_id.split(":", 1)[-1] if ":" in model_id else model_id)
    window = (profile or {}).get("max_input_tokens")
    return window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None
