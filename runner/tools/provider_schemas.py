"""Per-provider passes over the generic schema form (:func:`runner.tools.schemas.normalise_schema`).

- ``openai``: the generic form, plus ``items`` on every array (the API rejects arrays without it).
  With ``strict=True`` (OpenAI structured outputs): every object lists all its properties as
  required and has ``additionalProperties: false``; optional properties become nullable (the
  caller drops the nulls again with :func:`runner.tools.arguments.drop_strict_nulls`); ``default``,
  unsupported formats and keywords are removed (their meaning is already in the description);
  ``oneOf`` becomes ``anyOf``. A schema strict mode cannot express raises
  :class:`StrictSchemaError`, so the caller can offer that tool without ``strict``.
- ``anthropic``: the generic form; the root is ``type: object`` (``input_schema`` requires it).
- ``google`` (Gemini, an OpenAPI 3.0 subset): only the keywords Gemini knows; ``const`` becomes a
  one-value enum; enums are strings; type arrays and ``null`` alternatives become one type plus
  ``nullable``; ``oneOf`` becomes ``anyOf``, ``allOf`` is merged; no ``additionalProperties``.
- ``generic``: every other model (and the built-in offline / scripted ones).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from runner.errors import StrictSchemaError
from runner.tools.schemas import (
    Schema,
    append_description,
    compact_json,
    describe_default,
    map_subschemas,
    merge_all_of,
    normalise_schema,
    transform_tree,
)

Provider = Literal["openai", "anthropic", "google", "generic"]

_PROVIDER_PREFIXES: dict[str, Provider] = {
    "openai": "openai",
    "azure_openai": "openai",
    "anthropic": "anthropic",
    "google_anthropic_vertex": "anthropic",
    "google_genai": "google",
    "google_vertexai": "google",
    "gemini": "google",
}
_MODEL_NAME_PREFIXES: tuple[tuple[tuple[str, ...], Provider], ...] = (
    (("gpt-", "o1", "o3", "o4", "chatgpt"), "openai"),
    (("claude",), "anthropic"),
    (("gemini",), "google"),
)


# How many tools one request may offer, where a provider says so.
TOOL_LIMITS: dict[str, int] = {"openai": 128}


def tool_limit(provider: str) -> int | None:
    """The most tools ``provider`` accepts in one request (None: no known limit)."""
    return TOOL_LIMITS.get(provider)


def provider_for_model(model_id: str) -> Provider:
    """Which schema pass a model id (``provider:model`` as in ``init_chat_model``) needs.

    Without a provider prefix the model name decides, as ``init_chat_model`` infers it.
    """
    prefix, separator, _ = model_id.partition(":")
    if separator:
        return _PROVIDER_PREFIXES.get(prefix.strip().lower(), "generic")
    lowered = model_id.strip().lower()
    for name_prefixes, provider in _MODEL_NAME_PREFIXES:
        if lowered.startswith(name_prefixes):
            return provider
    return "generic"


def schema_for_provider(schema: Any, provider: str, *, strict: bool = False) -> Schema:
    """The tool's ``inputSchema`` as ``provider`` should receive it (any unknown provider gets the
    generic form). Raises :class:`UnusableSchemaError` (or :class:`StrictSchemaError`)."""
    generic = normalise_schema(schema)
    if provider == "openai":
        return openai_strict_schema(generic) if strict else openai_schema(generic)
    if provider == "google":
        return gemini_schema(generic)
    if provider == "anthropic":
        return {**generic, "type": "object"}
    return generic


def _with_array_items(node: Schema) -> Schema:
    if node.get("type") == "array" and "items" not in node and "prefixItems" not in node:
        return {**node, "items": {}}
    return node


def openai_schema(generic: Schema) -> Schema:
    return transform_tree(generic, _with_array_items)


# --- OpenAI strict mode -------------------------------------------------------------------------

_STRICT_KEYWORDS = frozenset(
    "type description properties required additionalProperties items enum const anyOf "
    "pattern format multipleOf maximum exclusiveMaximum minimum exclusiveMinimum minItems "
    "maxItems".split()
)
_STRICT_FORMATS = frozenset("date-time time date duration email hostname ipv4 ipv6 uuid".split())
_LOOKAROUND = re.compile(r"(?<!\\)\(\?<?[=!]")
STRICT_MAX_DEPTH = 10
_JSON_TYPES = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (type(None), "null"),
)


def _json_type(value: Any) -> str | None:
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), None)


def _split_type_list(node: Schema) -> Schema:
    """``type: [a, b, null]`` -> ``anyOf`` of single types (kept as a list when it is ``[a, null]``)."""
    declared = node.get("type")
    if not isinstance(declared, list):
        return node
    concrete = [kind for kind in declared if kind != "null"]
    if len(declared) == 1:
        return {**node, "type": declared[0]}
    if len(concrete) <= 1:
        return node
    branches = [{"type": kind} for kind in concrete] + ([{"type": "null"}] if "null" in declared else [])
    keep = {key: node[key] for key in ("description",) if key in node}
    return {**keep, "anyOf": branches}


def _nullable(node: Schema) -> Schema:
    declared = node.get("type")
    if "anyOf" in node:
        branches = node["anyOf"]
        if any(branch.get("type") == "null" for branch in branches):
            return node
        return {**node, "anyOf": [*branches, {"type": "null"}]}
    if "const" in node:
        constant = {key: node[key] for key in ("type", "const") if key in node}
        rest = {key: value for key, value in node.items() if key not in ("const", "type")}
        return {**rest, "anyOf": [constant, {"type": "null"}]}
    if isinstance(declared, str) and declared != "null":
        node = {**node, "type": [declared, "null"]}
    elif isinstance(declared, list) and "null" not in declared:
        node = {**node, "type": [*declared, "null"]}
    if isinstance(node.get("enum"), list) and None not in node["enum"]:
        node = {**node, "enum": [*node["enum"], None]}
    return node


def _strict_node(node: Schema, where: str) -> Schema:
    node = merge_all_of(node)
    if "allOf" in node:
        raise StrictSchemaError(f"{where} combines schemas with allOf in a way strict mode cannot express")
    if "oneOf" in node:
        node = {**{k: v for k, v in node.items() if k != "oneOf"}, "anyOf": node["oneOf"]}
    node = describe_default(_split_type_list(node))
    if "format" in node and node["format"] not in _STRICT_FORMATS:
        node = {key: value for key, value in node.items() if key != "format"}
    if isinstance(node.get("pattern"), str) and _LOOKAROUND.search(node["pattern"]):
        node = {key: value for key, value in node.items() if key != "pattern"}
    if "type" not in node and ("const" in node or isinstance(node.get("enum"), list)):
        kinds = {_json_type(value) for value in (node["enum"] if "enum" in node else [node["const"]])}
        if len(kinds) == 1 and None not in kinds:
            node = {**node, "type": kinds.pop()}
    if not any(key in node for key in ("type", "anyOf", "enum", "const")):
        raise StrictSchemaError(f"{where} accepts any value, which strict mode cannot express")
    return {key: value for key, value in node.items() if key in _STRICT_KEYWORDS}


def _strict_tree(node: Any, where: str, depth: int, *, root: bool = False) -> Schema:
    if not isinstance(node, dict):
        raise StrictSchemaError(f"{where} is a boolean schema, which strict mode cannot express")
    if depth > STRICT_MAX_DEPTH:
        raise StrictSchemaError(f"the schema nests deeper than {STRICT_MAX_DEPTH} levels")
    node = _strict_node(node, where)
    types = node.get("type") if isinstance(node.get("type"), list) else [node.get("type")]
    if "object" in types:
        properties = node.get("properties", {})
        extra = node.get("additionalProperties", True)
        if not properties and not root and extra is not False:
            raise StrictSchemaError(f"{where} is a free-form object, which strict mode cannot express")
        required = set(node.get("required", []))
        strict_properties = {}
        for name, child in properties.items():
            converted = _strict_tree(child, f"{where}.{name}", depth + 1)
            strict_properties[name] = converted if name in required else _nullable(converted)
        node = {
            **node,
            "properties": strict_properties,
            "required": list(properties),
            "additionalProperties": False,
        }
    if "array" in types:
        items = node.get("items")
        if not isinstance(items, dict) or not items:
            raise StrictSchemaError(f"{where} is an array of untyped items, which strict mode cannot express")
        node = {**node, "items": _strict_tree(items, f"{where}[]", depth + 1)}
    if "anyOf" in node:
        node = {**node, "anyOf": [_strict_tree(branch, where, depth + 1) for branch in node["anyOf"]]}
    return node


def openai_strict_schema(generic: Schema) -> Schema:
    """OpenAI strict-mode form of a generic schema; raises :class:`StrictSchemaError`."""
    return _strict_tree(generic, "arguments", 1, root=True)


# --- Gemini -------------------------------------------------------------------------------------

_GEMINI_KEYWORDS = frozenset(
    "type format description nullable enum properties required items minItems maxItems "
    "minimum maximum minLength maxLength pattern anyOf minProperties maxProperties "
    "propertyOrdering".split()
)
_GEMINI_NUMBER_FORMATS = frozenset({"int32", "int64", "float", "double"})


def _gemini_enum(node: Schema) -> Schema:
    """Gemini enums are strings: string choices stay an enum; other choices (numbers, booleans)
    keep their type and move into the description, so the model still sends the right type."""
    values = [node["const"]] if "const" in node else node.get("enum")
    if not isinstance(values, list):
        return node
    node = {key: value for key, value in node.items() if key not in ("const", "enum")}
    if None in values:
        node["nullable"] = True
    values = [value for value in values if value is not None]
    if values and all(isinstance(value, str) for value in values):
        return {**node, "type": "string", "enum": values}
    kinds = {_json_type(value) for value in values}
    if "type" not in node and len(kinds) == 1:
        node["type"] = kinds.pop()
    choices = ", ".join(compact_json(value) for value in values)
    return append_description(
        node, f"Must be {choices}." if len(values) == 1 else f"Must be one of {choices}."
    )


def _gemini_null_alternatives(node: Schema) -> Schema:
    declared = node.get("type")
    if isinstance(declared, list):
        concrete = [kind for kind in declared if kind != "null"]
        node = {**node, **({"nullable": True} if "null" in declared else {})}
        if len(concrete) == 1:
            node["type"] = concrete[0]
        else:
            node = {key: value for key, value in node.items() if key != "type"}
            node["anyOf"] = [{"type": kind} for kind in concrete]
    branches = node.get("anyOf")
    if isinstance(branches, list):
        concrete_branches = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
        if len(concrete_branches) < len(branches):
            node = {**node, "nullable": True, "anyOf": concrete_branches}
        if len(concrete_branches) == 1 and isinstance(concrete_branches[0], dict):
            rest = {key: value for key, value in node.items() if key != "anyOf"}
            node = {**concrete_branches[0], **rest}
    return node


def _gemini_node(node: Any) -> Schema:
    if not isinstance(node, dict):
        return {}
    node = dict(merge_all_of(node))
    if isinstance(node.get("items"), list):  # tuple form: Gemini has one item schema
        tuple_items = node["items"]
        node["items"] = (
            tuple_items[0] if len(tuple_items) == 1 else {"anyOf": tuple_items} if tuple_items else {}
        )
    for member in node.pop("allOf", []):  # what could not be merged: keep its description only
        if isinstance(member, dict) and isinstance(member.get("description"), str):
            node = append_description(node, member["description"])
    if "oneOf" in node:
        node = {**{k: v for k, v in node.items() if k != "oneOf"}, "anyOf": node["oneOf"]}
    node = describe_default(_gemini_null_alternatives(_gemini_enum(node)))
    fmt = node.get("format")
    if fmt is not None and not (node.get("type") in ("number", "integer") and fmt in _GEMINI_NUMBER_FORMATS):
        node.pop("format")
    if node.get("type") == "array" and "items" not in node:
        node["items"] = {}
    if isinstance(node.get("required"), list):
        node["required"] = [name for name in node["required"] if name in node.get("properties", {})]
    return {key: value for key, value in node.items() if key in _GEMINI_KEYWORDS}


def gemini_schema(generic: Schema) -> Schema:
    """Gemini (OpenAPI subset) form of a generic schema."""

    def walk(node: Any) -> Any:
        return map_subschemas(_gemini_node(node), walk)

    return walk(generic)
