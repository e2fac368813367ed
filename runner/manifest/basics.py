"""Building blocks of the manifest models: the base model, durations, name rules, filters and
the ``RESTARTS`` marker, shared by the server and agent models."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)

SERVER_KEY_PATTERN = r"^[a-z][a-z0-9-]{0,31}$"
SERVER_KEY_RULE = (
    "server keys become tool name prefixes, so they must start with a lowercase letter and use only "
    "lowercase letters, digits and '-' (at most 32 characters)"
)
IMPORT_PATH_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
TEMPLATE_SUFFIXES = (".j2", ".jinja", ".jinja2", ".md", ".txt")
# A stdio command spelled like this runs the interpreter running mcp-run (and its packages).
PYTHON_COMMANDS = ("python", "python3")
# The built-in models (no provider, no network).
OFFLINE_ID = "offline"
SCRIPTED_ID = "scripted"
# The chat's own commands (``/help`` ...): a prompt command may not take one of these names.
CHAT_COMMANDS = ("help", "tools", "prompts", "agents", "agent", "call", "thread", "resume", "reload", "save",
                 "media", "usage", "context", "exit", "quit")


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(value: Any) -> float:
    """``500ms``, ``30s``, ``2m``, ``1h`` or a number of seconds -> seconds (must be positive)."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 500ms, 30s, 2m or a number of seconds")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.match(value)):
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    else:
        if isinstance(value, str) and value.strip().startswith("-"):
            raise ValueError("a duration must be positive")
        raise ValueError("expected a duration such as 500ms, 30s, 2m or a number of seconds")
    if not 0 < seconds < float("inf"):  # also refuses NaN
        raise ValueError("a duration must be positive and finite")
    return seconds


Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    WithJsonSchema({
        "anyOf": [
            {"type": "number", "exclusiveMinimum": 0},
            {"type": "string", "pattern": r"^\d+(\.\d+)?(ms|s|m|h)?$"},
        ],
    }),
]
PositiveInt = Annotated[int, Field(gt=0, strict=True)]
ImportPath = Annotated[
    str,
    Field(pattern=IMPORT_PATH_PATTERN, description="Python import path 'package.module:function'"),
]
EnvName = Annotated[str, Field(pattern=ENV_NAME_PATTERN)]


def _unique(items: list[str]) -> list[str]:
    duplicates = sorted({item for item in items if items.count(item) > 1})
    if duplicates:
        raise ValueError(f"listed more than once: {', '.join(duplicates)}")
    return items


UniqueNames = Annotated[list[Annotated[str, Field(min_length=1)]], AfterValidator(_unique)]


class Spec(BaseModel):
    """Base of every manifest model: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class HeartbeatSpec(Spec):
    interval: Duration = Field(15.0, description="Seconds between liveness checks.")
    stale_after: Duration = Field(
        45.0, description="A server silent this long is considered stale and restarted."
    )

    @model_validator(mode="after")
    def _stale_after_interval(self) -> HeartbeatSpec:
        if self.stale_after < self.interval:
            raise ValueError("stale_after must be at least interval")
        return self


class RestartSpec(Spec):
    max_attempts: PositiveInt = Field(5, description="Restarts tried before the server is failed.")
    backoff: Duration = Field(1.0, description="First delay between restarts; doubles each time.")
    max_backoff: Duration = Field(30.0, description="Upper bound of the delay between restarts.")


class NameFilterSpec(Spec):
    """Which names a server contributes: exact names or shell-style globs."""

    only: UniqueNames | None = Field(None, description="Keep only these names (exact or glob).")
    except_: UniqueNames | None = Field(
        None, alias="except", description="Drop these names (exact or glob)."
    )

    @model_validator(mode="after")
    def _only_or_except(self) -> NameFilterSpec:
        if self.only is not None and self.except_ is not None:
            raise ValueError("'only' and 'except' cannot be used together; pick one")
        return self


class ToolFilterSpec(NameFilterSpec):
    filter: ImportPath | None = Field(
        None, description="Function called with each MCP tool definition; keeps it if truthy."
    )
    approve: UniqueNames = Field(
        default_factory=list, description="Globs of tools that need approval before each call."
    )
    pin: UniqueNames = Field(
        default_factory=list,
        description="Globs of tools always offered to the model, also when tool search is on.",
    )
    rename: dict[str, Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")]] = Field(
        default_factory=dict, description="Original tool name -> name shown to the model."
    )
    timeouts: dict[str, Duration] = Field(
        default_factory=dict, description="Per-tool request timeouts, by original tool name."
    )


class _Restarts:
    """Marks a server field whose change needs a new connection (see :func:`restart_fields`)."""

    def __repr__(self) -> str:
        return "RESTARTS"


RESTARTS = _Restarts()  # ``Annotated[T, RESTARTS]``: editing the field restarts the server


def restart_fields(spec_type: type[BaseModel]) -> frozenset[str]:
    """The fields of a server spec whose change restarts the server; the others apply live."""
    return frozenset(
        name for name, info in spec_type.model_fields.items() if any(m is RESTARTS for m in info.metadata)
    )
