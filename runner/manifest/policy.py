"""``policy:``: ordered rules deciding whether a tool call runs, is put to the user first, or is
refused — by the tool's generated name (a glob) and, optionally, by its arguments.

A rule's ``tool`` is a shell-style glob over the names the model sees (``server__tool``, local
tools by their own name); ``args`` maps an argument path (``path``, or ``options.mode`` into a
nested object) to a glob over the value (``"/etc/**"``), an exact number or true/false, or
``{regex: ...}``. Every path of a rule must match; the first rule that matches a call decides
(:mod:`runner.tools.policy` applies them). Kept in its own module so an agent of a manifest with
several can later declare the same block.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_serializer, model_validator

from runner.manifest.basics import Spec

PolicyAction = Literal["allow", "deny", "ask"]


class ArgumentMatchSpec(Spec):
    """How one argument is matched: a glob over its text (a number or true/false is written as
    the glob itself and matches the argument's JSON text), or a regular expression searched in it
    (anchor it with ^...$ to match all of it)."""

    glob: str | None = Field(None, description="Shell-style glob over the value's text ('*' crosses '/').")
    regex: Annotated[str, Field(min_length=1)] | None = Field(
        None, description="Python regular expression searched in the value's text."
    )

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
        return value

    @model_serializer
    def _as_written(self) -> str | dict[str, str]:
        # Shown (``mcp-run config``) as a manifest writes it: the glob's text, or {regex: ...}.
        return self.glob if self.glob is not None else {"regex": self.regex or ""}

    @model_validator(mode="after")
    def _one_way(self) -> ArgumentMatchSpec:
        if (self.glob is None) == (self.regex is None):
            raise ValueError("give the value's glob as text, or {regex: ...}")
        return self


def _matcher(value: Any) -> Any:
    """A glob (text), a number or true/false (matched as the argument's JSON text), or {regex: ...}."""
    if isinstance(value, bool):
        return {"glob": "true" if value else "false"}
    if isinstance(value, int | float | str):
        return {"glob": str(value)}
    if isinstance(value, dict | ArgumentMatchSpec):
        return value
    raise ValueError("an argument matcher is a glob (text), a number, true/false or {regex: ...}")


ArgumentMatcher = Annotated[
    ArgumentMatchSpec,
    BeforeValidator(_matcher, json_schema_input_type=str | int | float | bool | ArgumentMatchSpec),
]
ArgumentPath = Annotated[str, Field(pattern=r"^[^.\s]+(\.[^.\s]+)*$")]


class PolicyRuleSpec(Spec):
    """One rule: which calls it matches and what happens to them."""

    tool: str = Field(min_length=1, description="Glob over generated tool names (server__tool).")
    args: dict[ArgumentPath, ArgumentMatcher] = Field(
        default_factory=dict,
        description="Argument path (a.b for nested) -> glob, number, true/false or {regex: ...}; "
        "all must match.",
    )
    action: PolicyAction = Field(
        description="allow: run without asking; deny: refuse; ask: the user decides.")
    reason: Annotated[str, Field(min_length=1)] | None = Field(
        None, description="Said with the decision (the model hears it when a call is denied)."
    )


PolicySpec = list[PolicyRuleSpec]
