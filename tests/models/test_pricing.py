"""What a model step costs: the manifest's model.pricing, genai-prices' data for a known model, and
no number at all where no price is known."""

from __future__ import annotations

from typing import Any

import pytest

from runner.manifest import ModelSpec
from runner.models.pricing import Pricer, TokenCounts

STEP = TokenCounts(input=1_000_000, output=100_000, cached=200_000)


def spec(model_id: str, **more: Any) -> ModelSpec:
    return ModelSpec.model_validate({"id": model_id, **more})


def test_a_known_model_id_is_priced_from_genai_prices_cached_input_at_its_cached_price() -> None:
    # gpt-4.1-mini: $0.40 input, $0.10 cached input, $1.60 output per million tokens
    assert Pricer(spec("openai:gpt-4.1-mini")).cost(STEP, {}) == pytest.approx(0.8 * 0.4 + 0.2 * 0.1 + 0.16)


def test_the_model_the_provider_says_answered_is_the_one_priced() -> None:
    pricer = Pricer(spec("openai:gpt-4.1-mini"))
    dated = pricer.cost(STEP, {"model_name": "gpt-4.1-mini-2025-04-14", "model_provider": "openai"})
    assert dated == pytest.approx(0.8 * 0.4 + 0.2 * 0.1 + 0.16)
    bigger = pricer.cost(STEP, {"model_name": "gpt-4.1", "model_provider": "openai"})
    assert bigger is not None and bigger > dated


def test_manifest_pricing_replaces_the_librarys_and_prices_cached_input_apart_only_when_given() -> None:
    own = {"input_per_mtok": 3, "output_per_mtok": 15}
    assert Pricer(spec("openai:gpt-4.1-mini", pricing=own)).cost(STEP, {}) == pytest.approx(3 + 1.5)
    cached = {**own, "cached_input_per_mtok": 0.3}
    assert Pricer(spec("offline", pricing=cached)).cost(STEP, {}) == pytest.approx(0.8 * 3 + 0.2 * 0.3 + 1.5)


def test_a_fallback_is_priced_by_the_library_not_by_the_primarys_pricing() -> None:
    pricer = Pricer(spec("openai:my-private-model", fallbacks=["openai:gpt-4.1-mini"],
                         pricing={"input_per_mtok": 100, "output_per_mtok": 100}))
    library = pricer.cost(STEP, {"model_name": "gpt-4.1-mini-2025-04-14"})
    assert library == pytest.approx(0.8 * 0.4 + 0.2 * 0.1 + 0.16)
    assert pricer.cost(STEP, {"model_name": "my-private-model"}) == pytest.approx(110)


@pytest.mark.parametrize("model_id", ["offline", "openai:no-such-model-here", "ollama:llama3.1",
                                      "scripted"])
def test_no_price_is_made_up_for_a_model_no_price_is_known_for(model_id: str) -> None:
    extra = {"script": "turns.yaml"} if model_id == "scripted" else {}
    assert Pricer(spec(model_id, **extra)).cost(STEP, {}) is None


def test_a_model_behind_a_base_url_the_library_does_not_know_has_no_price() -> None:
    local = spec("openai:gpt-4.1-mini", base_url="http://127.0.0.1:8000/v1")
    assert Pricer(local).cost(STEP, {}) is None


def test_token_counts_come_from_langchains_usage_metadata_and_none_when_there_is_none() -> None:
    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
             "input_token_details": {"cache_read": 4, "cache_creation": 2},
             "output_token_details": {"reasoning": 3}}
    assert TokenCounts.of(usage) == TokenCounts(input=10, output=5, cached=4, cache_write=2, reasoning=3)
    assert TokenCounts.of(None) is None and TokenCounts.of({}) is None
