"""What a model step cost, in US dollars: the manifest's ``model.pricing`` for the primary model,
else the prices `genai-prices` ships (its data is in the package: no network), else unknown (None).
A model no price is known for is never given a made-up price: local models (``ollama:``), the
built-in models and models behind a ``base_url`` the library does not know have no cost.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from runner.errors import Problem
from runner.manifest import OFFLINE_ID, SCRIPTED_ID, ModelSpec, PricingSpec

if TYPE_CHECKING:
    from runner.manifest.loading import LoadedManifest

logger = logging.getLogger(__name__)

MILLION = Decimal(1_000_000)
# init_chat_model's provider names -> genai-prices' provider ids, where they differ.
PROVIDER_IDS = {
    "anthropic": "anthropic", "azure_openai": "azure", "bedrock": "aws", "bedrock_converse": "aws",
    "cohere": "cohere", "deepseek": "deepseek", "fireworks": "fireworks", "google_anthropic_vertex": "google",
    "google_genai": "google", "google_vertexai": "google", "groq": "groq", "mistralai": "mistral",
    "openai": "openai", "openrouter": "openrouter", "perplexity": "perplexity", "together": "together",
    "xai": "x-ai",
}


@dataclass(frozen=True)
class TokenCounts:
    """One model step's tokens as its provider reported them (input includes the cached ones)."""

    input: int = 0
    output: int = 0
    cached: int = 0  # input tokens read from the provider's cache
    cache_write: int = 0  # input tokens written to it (priced apart by some providers)
    reasoning: int = 0  # output tokens spent reasoning

    @classmethod
    def of(cls, usage: Mapping[str, Any] | None) -> TokenCounts | None:
        """From LangChain's ``usage_metadata``; None when the provider reported none."""
        if not usage:
            return None
        given = usage.get("input_token_details") or {}
        taken = usage.get("output_token_details") or {}
        return cls(input=_count(usage.get("input_tokens")), output=_count(usage.get("output_tokens")),
                   cached=_count(given.get("cache_read")), cache_write=_count(given.get("cache_creation")),
                   reasoning=_count(taken.get("reasoning")))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _split(model_id: str) -> tuple[str | None, str]:
    provider, _, name = model_id.rpartition(":")
    return provider or None, name


class Pricer:
    """Prices the steps of the manifest's model chain (``model.id``, then its fallbacks)."""

    def __init__(self, spec: ModelSpec) -> None:
        self._primary = _split(spec.id)
        self._fallbacks = [_split(model_id) for model_id in spec.fallbacks]
        self._pricing: PricingSpec | None = spec.pricing
        self._base_url = spec.base_url

    def cost(self, tokens: TokenCounts, response: Mapping[str, Any]) -> float | None:
        """The step's cost; ``response`` is the reply's ``response_metadata`` (which model
        answered: ``model_name``, ``model_provider``). None: no price is known."""
        answered = response.get("model_name") or response.get("model")
        answered = answered if isinstance(answered, str) and answered else None
        by_fallback = answered is not None and not answered.startswith(self._primary[1]) and any(
            answered.startswith(name) for _, name in self._fallbacks)
        if self._pricing is not None and not by_fallback:
            return float(_priced(tokens, self._pricing))
        if by_fallback:
            provider, name = next((p, n) for p, n in self._fallbacks if answered and answered.startswith(n))
        else:
            provider, name = self._primary
        reported = response.get("model_provider")
        provider = reported if isinstance(reported, str) and reported else provider
        name = answered or name
        if name in (OFFLINE_ID, SCRIPTED_ID):
            return None
        return _library_cost(tokens, name, provider, None if by_fallback else self._base_url)


def _priced(tokens: TokenCounts, pricing: PricingSpec) -> Decimal:
    cached_price = pricing.cached_input_per_mtok
    cached = min(tokens.cached, tokens.input) if cached_price is not None else 0
    total = (Decimal(tokens.input - cached) * Decimal(str(pricing.input_per_mtok))
             + Decimal(cached) * Decimal(str(cached_price or 0))
             + Decimal(tokens.output) * Decimal(str(pricing.output_per_mtok)))
    return total / MILLION


def _library_cost(tokens: TokenCounts, name: str, provider: str | None, base_url: str | None) -> float | None:
    """The price library's cost, or None when it knows no price for the model (or its provider)."""
    provider_id = PROVIDER_IDS.get(provider or "")
    if provider_id is None and base_url is None:
        return None  # ollama, a local server, a provider the library does not price
    import genai_prices  # 0.2 s to import: only once a step is priced

    usage = genai_prices.Usage(input_tokens=tokens.input, output_tokens=tokens.output,
                               cache_read_tokens=min(tokens.cached, tokens.input),
                               cache_write_tokens=tokens.cache_write)
    try:
        if base_url is not None:  # the server at base_url, if the library knows it
            result = genai_prices.calc_price(usage, name, provider_api_url=base_url)
        else:
            result = genai_prices.calc_price(usage, name, provider_id=provider_id)
    except LookupError:
        logger.debug("no price is known for model %r (provider %r)", name, provider_id or base_url)
        return None
    return float(result.total_price)


def unpriced_budget_warnings(loaded: LoadedManifest) -> list[Problem]:
    """A ``max_cost`` budget over a model no price is known for can never be reached: a warning
    at each such limit (set ``model.pricing``)."""
    manifest = loaded.manifest
    limits = manifest.limits
    scopes = [scope for scope, budget in (("per_turn", limits.per_turn), ("per_thread", limits.per_thread))
              if budget.max_cost is not None]
    if not scopes or Pricer(manifest.model).cost(TokenCounts(input=1000, output=1000), {}) is not None:
        return []
    message = (f"no price is known for model '{manifest.model.id}', so its cost is unknown and this "
               "limit can never be reached: set model.pricing {input_per_mtok, output_per_mtok}")
    return [loaded.source.problem(("limits", scope, "max_cost"), message) for scope in scopes]
