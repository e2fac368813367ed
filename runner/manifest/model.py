"""The chat model of an agent: an id, its fallbacks and what the provider needs."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, model_validator

from runner.manifest.basics import Duration, EnvName, Spec
from runner.manifest.model_calls import DEFAULT_TIMEOUT, RetrySpec
from runner.manifest.spending import PricingSpec


class ModelSpec(Spec):
    id: str = Field(
        min_length=1,
        description="init_chat_model id (provider:model), or the built-in 'offline' / 'scripted'.",
    )
    fallbacks: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="Model ids tried in order when the model call fails."
    )
    params: dict[str, Any] = Field(default_factory=dict, description="Passed to the model.")
    base_url: str | None = Field(None, description="Endpoint of an OpenAI-compatible server.")
    api_key_env: EnvName | None = Field(None, description="Variable holding the API key.")
    script: str | None = Field(None, description="Turns file of the 'scripted' model.")
    timeout: Duration = Field(
        DEFAULT_TIMEOUT,
        description="Seconds one request may wait for the model's answer to begin, or for the next "
                    "piece of a streamed answer; then it is retried.",
    )
    retries: RetrySpec = Field(default_factory=RetrySpec, description="Retries of a failed request.")
    pricing: PricingSpec | None = Field(None, description="Prices of this model (else the price library's).")

    @model_validator(mode="after")
    def _script_for_scripted(self) -> ModelSpec:
        if self.id == "scripted" and not self.script:
            raise ValueError("the 'scripted' model needs 'script: path/to/turns.yaml'")
        if self.script and self.id != "scripted":
            raise ValueError("'script' is only used by the 'scripted' model")
        return self


def _model_from_id(value: Any) -> Any:
    return {"id": value} if isinstance(value, str) else value


ModelField = Annotated[
    ModelSpec, BeforeValidator(_model_from_id, json_schema_input_type=str | ModelSpec)
]  # an id string, or the mapping
