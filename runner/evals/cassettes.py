"""Cassettes: what a case's run saw, written next to the case so it can be replayed with no model
and no servers.

A cassette (``evals/cassettes/NAME.yaml``) holds the servers' listings (tools, prompts,
resources, instructions), each model call (the system prompt, a fingerprint of every tool schema
offered and of the conversation so far, and the reply), each tool call with its result, and the
judge's verdict. Values of the environment variables the manifest references are replaced by
``${NAME}`` before anything is written, so secrets never reach the file.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.errors import CassetteMissing, ManifestError, Problem
from runner.manifest.expansion import referenced_variables
from runner.manifest.loading import LoadedManifest

CASSETTE_VERSION = 1
MIN_SECRET_CHARS = 4  # shorter values (a port, "UTC") would blot out ordinary text
HEADER = "# Recorded by `mcp-run test --record`; replayed by `mcp-run test --replay`.\n"


class _CassetteModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ServerListing(_CassetteModel):
    instructions: str | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list)
    prompts: list[dict[str, Any]] = Field(default_factory=list)
    resources: list[dict[str, Any]] = Field(default_factory=list)
    resource_templates: list[dict[str, Any]] = Field(default_factory=list)


class RecordedReply(_CassetteModel):
    text: str = ""
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    reason: str | None = None
    # The reply's token counts (LangChain's usage_metadata), replayed so a replayed case spends as
    # the recorded one did; absent in recordings made before it was kept.
    usage: dict[str, Any] | None = None


class ModelCall(_CassetteModel):
    system: str | None = None  # omitted when the same as the previous call's
    tools: dict[str, str] = Field(default_factory=dict)  # offered name -> schema fingerprint
    conversation: str = ""  # fingerprint of the messages after the system prompt
    reply: RecordedReply


class RecordedToolCall(_CassetteModel):
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    content: Any = ""
    error: bool = False


class Verdict(_CassetteModel):
    passed: bool
    reasoning: str = ""


class Cassette(_CassetteModel):
    version: int = CASSETTE_VERSION
    case: str
    now: datetime  # the time the system prompt's templates saw
    servers: dict[str, ServerListing] = Field(default_factory=dict)
    model_calls: list[ModelCall] = Field(default_factory=list)
    tool_calls: list[RecordedToolCall] = Field(default_factory=list)
    judge: Verdict | None = None


# --------------------------------------------------------------------------- fingerprints


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def tool_fingerprints(tools: Sequence[BaseTool]) -> dict[str, str]:
    """Each offered tool's name with a fingerprint of the parameters the model sees."""
    return {tool.name: _digest(convert_to_openai_tool(tool)["function"].get("parameters"))
            for tool in tools}


def conversation_fingerprint(messages: Sequence[BaseMessage], secrets: Secrets) -> str:
    """A fingerprint of what the model was sent after the system prompt (call ids left out)."""
    parts = []
    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        calls = [(c["name"], c["args"]) for c in message.tool_calls] if isinstance(message, AIMessage) else []
        status = message.status if isinstance(message, ToolMessage) else None
        parts.append((message.type, str(message.text), calls, status))
    return _digest(secrets.scrub(parts))


# --------------------------------------------------------------------------- secrets


class Secrets:
    """The values of the environment variables a manifest references, to scrub from cassettes."""

    def __init__(self, values: Mapping[str, str]) -> None:
        # Longest first, so a value containing another is replaced whole.
        self.values = sorted(((v, k) for k, v in values.items() if len(v) >= MIN_SECRET_CHARS),
                             key=lambda pair: -len(pair[0]))

    @classmethod
    def of(cls, loaded: LoadedManifest, environ: Mapping[str, str]) -> Secrets:
        names = referenced_variables(loaded.path.read_text(encoding="utf-8"))
        api_key_env = loaded.manifest.model.api_key_env
        if api_key_env:
            names.add(api_key_env)
        return cls({name: environ[name] for name in names if name in environ})

    def scrub(self, value: Any) -> Any:
        if isinstance(value, str):
            for secret, name in self.values:
                value = value.replace(secret, f"${{{name}}}")
            return value
        if isinstance(value, Mapping):
            return {self.scrub(k): self.scrub(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.scrub(v) for v in value]
        return value


# --------------------------------------------------------------------------- files


class _ReadableDumper(yaml.SafeDumper):
    """Multi-line text (prompts, answers) as ``|`` blocks, so a cassette reads like its source."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ReadableDumper.add_representer(str, _text)


def write_cassette(path: Path, cassette: Cassette, secrets: Secrets) -> None:
    data = secrets.scrub(cassette.model_dump(mode="json", exclude_none=True))
    path.parent.mkdir(parents=True, exist_ok=True)
    text = HEADER + yaml.dump(data, Dumper=_ReadableDumper, sort_keys=False, allow_unicode=True,
                              width=100)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


def read_cassette(path: Path, manifest: Path) -> Cassette:
    """The cassette at ``path``; a missing one is CassetteMissing (saying how to record it for
    ``manifest``), an unreadable one a located ManifestError."""
    display = str(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        # Only this case (the cassette is named after it): --record alone would record them all.
        raise CassetteMissing(f"{display}: no cassette: record one with `mcp-run test "
                              f"{shlex.quote(str(manifest))} --record -k {shlex.quote(path.stem)}`") from None
    except (OSError, yaml.YAMLError) as exc:
        raise ManifestError([Problem(display, 1, 1, "", f"cannot read the cassette: {exc}")]) from None
    try:
        return Cassette.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ManifestError([Problem(display, 1, 1, where, f"invalid cassette: {first['msg']}; "
                                     "record it again with --record")]) from None
