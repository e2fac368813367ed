"""``output:`` — the agent's final answer is an object that validates against a JSON Schema.

A per-agent setting (one field of :class:`runner.manifest.Manifest`), so several agents of one
manifest can each declare their own. The schema itself is checked where it is read
(:mod:`runner.agent.output_contract`): inline, or from a file next to the manifest.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from runner.manifest.basics import Spec

SCHEMA_FILE_SUFFIXES = (".json", ".yaml", ".yml")
OUTPUT_METHODS = ("auto", "native", "tool")


class OutputSpec(Spec):
    """The final answer's JSON Schema, how the model is asked for it, and how often it may retry."""

    schema_: dict[str, Any] | Annotated[str, Field(min_length=1)] = Field(
        alias="schema",
        description="A JSON Schema (its root an object) inline, or a .json / .yaml file relative "
        "to the manifest.",
    )
    retries: Annotated[int, Field(ge=0, le=10, strict=True)] = Field(
        2, description="Times an answer that does not validate is sent back to the model with the "
        "validation errors before the turn fails."
    )
    method: Literal["auto", "native", "tool"] = Field(
        "auto",
        description="native: the provider's structured output (response_format json_schema); "
        "tool: a final_answer tool the model calls; auto: native for OpenAI-compatible models "
        "and the built-in ones, tool for the others.",
    )

    @field_validator("schema_")
    @classmethod
    def _file_name(cls, value: dict[str, Any] | str) -> dict[str, Any] | str:
        if isinstance(value, str) and not value.strip().endswith(SCHEMA_FILE_SUFFIXES):
            raise ValueError("a schema file ends in .json, .yaml or .yml (or give the schema inline)")
        return value

    @property
    def schema_file(self) -> str | None:
        return self.schema_.strip() if isinstance(self.schema_, str) else None
