"""The schema of ``output:`` read and checked (inline, or from a file next to the manifest), and
the object checked against it: what :mod:`runner.agent.checks` reports at load and what
:mod:`runner.agent.structured` tells the model when its answer does not validate.

Kept light (jsonschema, imported for a manifest with ``output:`` only, and YAML) so ``mcp-run
validate`` stays quick.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from runner.errors import ManifestError, Problem
from runner.manifest import OFFLINE_ID, SCRIPTED_ID, ModelSpec, OutputSpec, did_you_mean
from runner.manifest.loading import LoadedManifest, SourceMap, read_document, read_located_yaml

SCHEMA_PATH = ("output", "schema")
JSON_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
MAX_REPORTED = 10  # validation errors told to the model (and in the turn's failure) at most
# Providers whose chat models take response_format json_schema (OpenAI's Chat Completions).
NATIVE_PROVIDERS = frozenset({"openai", "azure_openai"})


@dataclass(frozen=True)
class OutputContract:
    """What the final answer must be: an object valid against ``schema``, after at most
    ``retries`` answers sent back with their validation errors."""

    schema: dict[str, Any]
    retries: int = 2
    method: Literal["auto", "native", "tool"] = "auto"
    _validator: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        import jsonschema  # a manifest with ``output:`` only: listing and calling tools go without it

        cls = jsonschema.validators.validator_for(self.schema, default=jsonschema.Draft202012Validator)
        object.__setattr__(self, "_validator", cls(self.schema, format_checker=cls.FORMAT_CHECKER))

    def problems(self, value: Any) -> list[str]:
        """Why ``value`` does not validate, each located (``at items/0/price: ...``); empty if it does."""
        errors = sorted(self._validator.iter_errors(value),
                        key=lambda error: (list(map(str, error.absolute_path)), error.message))
        return [f"at {_where(error.absolute_path)}: {error.message}" for error in errors[:MAX_REPORTED]]

    def native_for(self, model: ModelSpec) -> bool:
        """Whether the model is asked with its provider's structured output (else a final_answer tool):
        ``method`` when set; on auto, when every model of the chain takes response_format."""
        if self.method != "auto":
            return self.method == "native"
        return all(_takes_response_format(model_id, model) for model_id in (model.id, *model.fallbacks))


def _where(path: Any) -> str:
    return "/".join(map(str, path)) or "the root"


def _takes_response_format(model_id: str, spec: ModelSpec) -> bool:
    if model_id in (OFFLINE_ID, SCRIPTED_ID):
        return True
    if model_id == spec.id and spec.base_url:  # an OpenAI-compatible server
        return True
    from runner.models.registry import provider_of  # init_chat_model's own reading of the id

    return provider_of(model_id) in NATIVE_PROVIDERS


def output_contract(loaded: LoadedManifest) -> OutputContract | None:
    """The manifest's ``output:`` with its schema read and checked; ManifestError locating each
    problem (in the manifest for an inline schema, in the schema file for a file)."""
    spec = loaded.manifest.output
    if spec is None:
        return None
    schema, source, root = _schema_source(spec, loaded)
    problems = schema_problems(schema, source, root)
    if problems:
        raise ManifestError(problems)
    return OutputContract(schema, spec.retries, spec.method)


def _schema_source(spec: OutputSpec, loaded: LoadedManifest
                   ) -> tuple[dict[str, Any], SourceMap, tuple[str | int, ...]]:
    if spec.schema_file is None:
        assert isinstance(spec.schema_, dict)
        return spec.schema_, loaded.source, SCHEMA_PATH
    path = loaded.base_dir / spec.schema_file
    if not path.is_file():
        missing = f"schema file '{spec.schema_file}' not found"
        raise ManifestError([loaded.source.problem(SCHEMA_PATH, missing)])
    data, source, problems = read_located_yaml(read_document(path, "the schema file"),
                                               file=str(path), environ={})
    if problems:
        raise ManifestError(problems)
    return data, source, ()


def schema_problems(schema: Any, source: SourceMap, root: tuple[str | int, ...]) -> list[Problem]:
    """Why ``schema`` cannot be an output schema: not a valid JSON Schema (located at the part that
    is wrong), or its root not an object (a final answer is an object: tool arguments, MCP
    structured content)."""
    if not isinstance(schema, dict):
        return [source.problem(root, "a JSON Schema is a mapping")]
    import jsonschema  # a manifest with ``output:`` only: listing and calling tools go without it

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = (*root, *exc.absolute_path)
        message = exc.message
        if where[-1:] == ("type",) and isinstance(exc.instance, str):  # a misspelt type name
            message = f"unknown type '{exc.instance}'{did_you_mean(exc.instance, JSON_TYPES)}; one of " \
                      f"{', '.join(JSON_TYPES)}"
        return [source.problem(where, f"not a valid JSON Schema: {message}")]
    if schema.get("type") != "object":
        return [source.problem((*root, "type") if "type" in schema else root,
                               "the output schema's root is an object: give it 'type: object' "
                               "(and its fields under 'properties')")]
    return []


def contract_files(loaded: LoadedManifest) -> frozenset[Path]:
    """The schema file ``output:`` names (watch mode follows it), resolved."""
    spec = loaded.manifest.output
    if spec is None or spec.schema_file is None:
        return frozenset()
    return frozenset({(loaded.base_dir / spec.schema_file).resolve()})
