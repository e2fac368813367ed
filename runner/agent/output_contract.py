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


def output_warnings(loaded: LoadedManifest) -> list[Problem]:
    """Keywords of the output schema whose value is null (no JSON Schema keyword takes null), each
    located: usually YAML flow style split at a comma (``{description: Found, in short}`` makes a
    key ``in short``). The meta-schema allows unknown keywords, so these are warnings."""
    spec = loaded.manifest.output
    if spec is None:
        return []
    schema, source, root = _schema_source(spec, loaded)
    found: list[Problem] = []

    def walk(node: Any, where: tuple[str | int, ...]) -> None:
        if isinstance(node, list):
            for index, item in enumerate(node):
                walk(item, (*where, index))
        elif isinstance(node, dict):
            for key, value in node.items():
                if value is None:
                    found.append(source.problem((*root, *where, key), f"'{key}' has no value (null), and "
                                                "no JSON Schema keyword takes null: a comma in a YAML flow "
                                                "mapping ({...}) splits it; quote the text or use block "
                                                "style"))
                elif key not in _DATA_KEYWORDS:
                    walk(value, (*where, key))

    walk(schema, ())
    return found


def _schema_source(spec: OutputSpec, loaded: LoadedManifest
                   ) -> tuple[dict[str, Any], SourceMap, tuple[str | int, ...]]:
    if spec.schema_file is None:
        assert isinstance(spec.schema_, dict)
        return spec.schema_, loaded.source, SCHEMA_PATH
    data, source = read_schema_file(loaded.base_dir, spec.schema_file, loaded.source)
    return data, source, ()


def read_schema_file(base_dir: Path, name: str, manifest: SourceMap) -> tuple[Any, SourceMap]:
    """The schema file ``name`` (relative to ``base_dir``, the manifest's folder) read with the
    positions of its parts; ManifestError locating a missing file at ``output.schema`` in
    ``manifest``, and a file that is not YAML or JSON in that file."""
    path = base_dir / name
    if not path.is_file():
        raise ManifestError([manifest.problem(SCHEMA_PATH, f"schema file '{name}' not found")])
    data, source, problems = read_located_yaml(read_document(path, "the schema file"),
                                               file=str(path), environ={})
    if problems:
        raise ManifestError(problems)
    return data, source


def schema_file_problems(base_dir: Path, name: str, manifest: SourceMap) -> list[Problem]:
    """Every problem of the schema file ``name`` (:func:`read_schema_file`, :func:`schema_problems`),
    each located: in the manifest for a missing file, in the file for the rest."""
    try:
        data, source = read_schema_file(base_dir, name, manifest)
    except ManifestError as exc:
        return exc.problems
    return schema_problems(data, source, ())


def schema_problems(schema: Any, source: SourceMap, root: tuple[str | int, ...]) -> list[Problem]:
    """Why ``schema`` cannot be an output schema, every problem located at the part that is wrong:
    not a valid JSON Schema, a ``$ref`` that resolves to nothing inside it (nothing is fetched), or
    its root not an object (a final answer is an object: tool arguments, MCP structured content)."""
    if not isinstance(schema, dict):
        return [source.problem(root, "a JSON Schema is a mapping")]
    import jsonschema  # a manifest with ``output:`` only: listing and calling tools go without it

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    meta_errors = _meta_schema_errors(cls, schema)
    problems = [source.problem((*root, *where), f"not a valid JSON Schema: {message}")
                for where, message in meta_errors]
    if not any(where[-1:] in _RESOURCE_KEYWORDS for where, _ in meta_errors):  # else refs have no base
        problems += [source.problem((*root, *where), message)
                     for where, message in _unresolved_refs(cls, schema)]
    if schema.get("type") != "object":
        problems.append(source.problem((*root, "type") if "type" in schema else root,
                                       "the output schema's root is an object: give it 'type: object' "
                                       "(and its fields under 'properties')"))
    return problems


def _meta_schema_errors(cls: Any, schema: dict[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    """Each place where ``schema`` breaks its dialect's meta-schema, with the most telling error there."""
    import jsonschema

    by_place: dict[tuple[str | int, ...], list[Any]] = {}
    for error in cls(cls.META_SCHEMA).iter_errors(schema):
        by_place.setdefault(tuple(error.absolute_path), []).append(error)
    found = []
    for where, errors in sorted(by_place.items(), key=lambda item: list(map(str, item[0]))):
        error = jsonschema.exceptions.best_match(errors)
        message = error.message
        if where[-1:] == ("type",) and isinstance(error.instance, str):  # a misspelt type name
            message = f"unknown type '{error.instance}'{did_you_mean(error.instance, JSON_TYPES)}; one of " \
                      f"{', '.join(JSON_TYPES)}"
        found.append((where, message))
    return found


# Keywords that place a schema among others; when one is malformed, its references cannot be resolved.
_RESOURCE_KEYWORDS = frozenset({("$id",), ("$anchor",), ("$dynamicAnchor",), ("$schema",), ("id",)})
# Keywords whose values are data, not schemas: a "$ref" key inside them is no reference.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})


def _unresolved_refs(cls: Any, schema: dict[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    """Each ``$ref`` of ``schema`` that points at nothing in it. References are resolved as the
    validator would, but only within the schema: a remote one is never fetched, so it is reported."""
    from referencing import Registry
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import specification_with

    specification = specification_with(cls.META_SCHEMA.get("$schema", ""))
    resource = specification.create_resource(schema)
    registry: Registry[Any] = Registry().with_resource(resource.id() or "", resource).crawl()
    found: list[tuple[tuple[str | int, ...], str]] = []

    def walk(node: Any, where: tuple[str | int, ...], resolver: Any) -> None:
        if isinstance(node, list):
            for index, item in enumerate(node):
                walk(item, (*where, index), resolver)
            return
        if not isinstance(node, dict):
            return
        if isinstance(node.get("$id", ""), str):  # an $id changes the base of the refs below it
            resolver = resolver.in_subresource(specification.create_resource(node))
        ref = node.get("$ref")
        if isinstance(ref, str):
            try:
                resolver.lookup(ref)
            except Unresolvable:
                found.append(((*where, "$ref"), f"$ref '{ref}' resolves to nothing in the schema "
                                                f"(references outside it are not fetched)"))
        for key, value in node.items():
            if key not in _DATA_KEYWORDS:
                walk(value, (*where, key), resolver)

    walk(schema, (), registry.resolver(base_uri=resource.id() or ""))
    return found


def contract_files(loaded: LoadedManifest) -> frozenset[Path]:
    """The schema file ``output:`` names (watch mode follows it), resolved."""
    spec = loaded.manifest.output
    if spec is None or spec.schema_file is None:
        return frozenset()
    return frozenset({(loaded.base_dir / spec.schema_file).resolve()})
