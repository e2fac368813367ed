"""A tool's ``inputSchema`` in the generic form every provider pass starts from.

:func:`normalise_schema` returns a new schema (the input is never changed) that

- is an object schema at the root (a missing root, ``true`` or ``{}`` means "no arguments"; a root
  made of ``allOf`` / ``anyOf`` / ``oneOf`` object shapes is merged into one object),
- has no ``$ref``: local references (``#/$defs/X``, ``#/definitions/X``, ``#``, any JSON pointer)
  are inlined; a recursive reference is followed ``recursion_depth`` more times and then replaced
  by a plain object whose description says so,
- has no ``$schema`` / ``$defs`` / ``$id`` / ``$comment``,
- says in each description which constraints apply (``Must be >= 1 and <= 100.``), because many
  providers drop ``minimum``, ``pattern``, ``format``, ... silently; the keywords themselves stay
  for the providers that do use them. Enums and defaults are kept.

A schema that cannot be turned into this form raises :class:`UnusableSchemaError`; the caller
skips that tool with a warning. Arguments are still validated against the original schema
(:mod:`runner.tools.arguments`), not against this one.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote

from runner.errors import UnusableSchemaError

Schema = dict[str, Any]
MAX_NESTING = 128  # objects and arrays in one another: deeper, and validators run out of stack

MAX_INLINED_NODES = 20_000
DROPPED_KEYWORDS = (
    "$schema",
    "$id",
    "$comment",
    "$defs",
    "definitions",
    "$anchor",
    "$dynamicAnchor",
    "$vocabulary",
)

# keyword -> how its value holds subschemas
_SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_SINGLES = (
    "additionalProperties",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
)


_MAP_KEYS, _LIST_KEYS = frozenset(_SCHEMA_MAPS), frozenset(_SCHEMA_LISTS)
_SUBSCHEMA_KEYS = _MAP_KEYS | _LIST_KEYS | frozenset(_SCHEMA_SINGLES) | {"items"}


def map_subschemas(node: Schema, function: Callable[[Any], Any]) -> Schema:
    """A shallow copy of ``node`` with ``function`` applied to each direct subschema.

    Values that are data rather than schemas (``enum``, ``const``, ``default``, ``examples``)
    are never visited.
    """
    result = dict(node)
    # Only the keywords present are looked at: this runs for every node of every schema.
    for key in _SUBSCHEMA_KEYS.intersection(node):
        value = node[key]
        if key in _MAP_KEYS:
            if isinstance(value, dict):
                result[key] = {name: function(child) for name, child in value.items()}
        elif key in _LIST_KEYS or (key == "items" and isinstance(value, list)):  # items: draft 4-7 tuples
            if isinstance(value, list):
                result[key] = [function(child) for child in value]
        elif isinstance(value, dict | bool):
            result[key] = function(value)
    return result


def transform_tree(node: Any, function: Callable[[Schema], Schema]) -> Any:
    """Apply ``function`` to every schema object in the tree, parents before children."""
    if not isinstance(node, dict):
        return node
    return map_subschemas(function(node), lambda child: transform_tree(child, function))


def append_description(node: Schema, sentence: str) -> Schema:
    """``node`` with ``sentence`` added to its description (once: the passes are idempotent)."""
    current = node.get("description")
    if isinstance(current, str) and sentence in current:
        return node
    text = f"{current.rstrip()} {sentence}" if isinstance(current, str) and current.strip() else sentence
    return {**node, "description": text}


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


# --- references ---------------------------------------------------------------------------------


def _resolve_pointer(root: Schema, ref: str) -> Any:
    if not ref.startswith("#"):
        raise UnusableSchemaError(f"reference '{ref}' points outside the schema")
    fragment = unquote(ref[1:])
    if fragment and not fragment.startswith("/"):
        raise UnusableSchemaError(f"reference '{ref}' uses an anchor, which is not supported")
    target: Any = root
    for raw in fragment.split("/")[1:] if fragment else []:
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and token in target:
            target = target[token]
        elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
            target = target[int(token)]
        else:
            raise UnusableSchemaError(f"reference '{ref}' points to nothing")
    return target


# Keywords whose subschemas apply to the very value their schema applies to: a reference reached
# again through these and ``$ref`` alone is a loop a validator follows without end.
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_SINGLES = ("not", "if", "then", "else")


def _in_place_references(node: Any) -> list[str]:
    """The references that apply to the same value as ``node`` (without descending into it)."""
    found, pending = [], [node]
    while pending:
        current = pending.pop()
        if not isinstance(current, dict):
            continue
        if isinstance(current.get("$ref"), str):
            found.append(current["$ref"])
        for key in _IN_PLACE_LISTS:
            if isinstance(current.get(key), list):
                pending.extend(current[key])
        pending.extend(current.get(key) for key in _IN_PLACE_SINGLES)
        if isinstance(current.get("dependentSchemas"), dict):
            pending.extend(current["dependentSchemas"].values())
    return found


def _references_within(root: Any, limit: int) -> list[str] | None:
    """Every ``$ref`` in ``root``, or None when its objects and arrays nest more than ``limit``
    levels deep. One walk, level by level and without recursion (a schema may be as deep as a JSON
    parser allows), for each tool a server lists: containers only are queued, with exact type
    checks, since parsed JSON holds plain dicts and lists."""
    found: list[str] = []
    level: list[Any] = [root]
    for _ in range(limit):
        below: list[Any] = []
        for node in level:
            if type(node) is dict:
                if type(reference := node.get("$ref")) is str:
                    found.append(reference)
                children: Iterable[Any] = node.values()
            else:
                children = node
            below += [child for child in children if type(child) is dict or type(child) is list]
        if not below:
            return found
        level = below
    return None


def nests_too_deeply(root: Any, limit: int = MAX_NESTING) -> bool:
    """Whether JSON objects and arrays nest in ``root`` more than ``limit`` levels deep."""
    return _references_within(root, limit) is None


def listing_problem(root: Schema) -> str | None:
    """Why a listed tool's input schema cannot be offered (it nests past MAX_NESTING, or its
    references loop), said as the warning that skips it; None when it can."""
    references = _references_within(root, MAX_NESTING)
    if references is None:
        return f"its input schema nests deeper than {MAX_NESTING} levels"
    loop = _loop_among(root, references) if references else None
    return f"its input schema's references loop without end ({' -> '.join(loop)})" if loop else None


def reference_loop(root: Schema) -> list[str] | None:
    """References that lead back to the first without ever descending into the value (``a`` is
    ``b``, ``b`` is ``a``), which a validator would follow until it runs out of stack; None when
    there is none. Recursion through ``properties`` or ``items`` is fine: it ends with the value."""
    return _loop_among(root, _references_within(root, sys.getrecursionlimit()) or [])


def _loop_among(root: Schema, references: list[str]) -> list[str] | None:
    following: dict[str, list[str]] = {}

    def next_of(ref: str) -> list[str]:
        if ref not in following:
            try:
                following[ref] = _in_place_references(_resolve_pointer(root, ref))
            except UnusableSchemaError:  # said by the inliner, in its own words
                following[ref] = []
        return following[ref]

    done: set[str] = set()
    for start in references:
        if start in done:
            continue
        path, on_path, branches = [start], {start}, [iter(next_of(start))]
        while branches:  # depth first, without recursion: a schema may be deep
            ref = next(branches[-1], None)
            if ref is None:
                finished = path.pop()
                done.add(finished)
                on_path.discard(finished)
                branches.pop()
                continue
            if ref in on_path:
                return [*path[path.index(ref):], ref]
            if ref not in done:
                path.append(ref)
                on_path.add(ref)
                branches.append(iter(next_of(ref)))
    return None


class _Inliner:
    def __init__(self, root: Schema, recursion_depth: int) -> None:
        self.root = root
        self.recursion_depth = recursion_depth
        self.nodes = 0

    def inline(self, node: Any, active: tuple[str, ...]) -> Any:
        self.nodes += 1
        if self.nodes > MAX_INLINED_NODES:
            raise UnusableSchemaError("the schema is too large once its references are inlined")
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            if active.count(ref) > self.recursion_depth:
                return _recursion_cut(node, ref)
            target = _resolve_pointer(self.root, ref)
            siblings = {key: value for key, value in node.items() if key != "$ref"}
            if isinstance(target, bool):
                target = {} if target else {"not": {}}
            if not isinstance(target, dict):
                raise UnusableSchemaError(f"reference '{ref}' does not point to a schema")
            expanded = self.inline(target, (*active, ref))
            sibling_schema = map_subschemas(siblings, lambda child: self.inline(child, active))
            return _strip(_merge_siblings(expanded, sibling_schema))
        return _strip(map_subschemas(node, lambda child: self.inline(child, active)))


def _recursion_cut(node: Schema, ref: str) -> Schema:
    name = "the root" if ref == "#" else f"'{ref.rsplit('/', 1)[-1]}'"
    cut: Schema = {"type": "object"}
    if isinstance(node.get("description"), str):
        cut["description"] = node["description"]
    return append_description(cut, f"(Recursive structure {name}; deeper levels are not described.)")


def _merge_siblings(target: Schema, siblings: Schema) -> Schema:
    """Keywords next to a ``$ref`` win over the referenced schema's, except that two sets of
    constraints both apply, so those are combined with ``allOf``."""
    if not siblings:
        return target
    combined = {**target, **siblings}
    clashing = [
        key
        for key in siblings
        if key in target and key not in ("description", "title", "default", "examples")
    ]
    if clashing:
        return {key: value for key, value in siblings.items() if key not in clashing} | {
            "allOf": [target, {key: siblings[key] for key in clashing}]
        }
    return combined


def _strip(node: Schema) -> Schema:
    return {key: value for key, value in node.items() if key not in DROPPED_KEYWORDS}


# --- merging combinators ------------------------------------------------------------------------


_OBJECT_KEYWORDS = frozenset(
    "type properties required additionalProperties patternProperties minProperties "
    "maxProperties propertyNames unevaluatedProperties dependentRequired description title "
    "default examples".split()
)
_ROOT_ONLY_VALIDATION = ("not", "if", "then", "else", "dependentRequired", "dependentSchemas")


def _is_object_shape(node: Any) -> bool:
    """An object schema made only of object keywords (``{"required": ["a"]}`` counts)."""
    return (
        isinstance(node, dict)
        and bool(node)
        and node.get("type", "object") == "object"
        and set(node) <= _OBJECT_KEYWORDS
    )


def merge_all_of(node: Schema) -> Schema:
    """Fold ``allOf`` members that are object shapes into ``node``: properties and ``required``
    are united. Members that are not object shapes are kept in ``allOf``."""
    members = node.get("allOf")
    if not isinstance(members, list):
        return node
    merged = {key: value for key, value in node.items() if key != "allOf"}
    rest = []
    for member in members:
        if not _is_object_shape(member):
            rest.append(member)
            continue
        for key, value in member.items():
            if key == "properties":
                merged["properties"] = {**merged.get("properties", {}), **value}
            elif key == "required":
                merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
            else:
                merged.setdefault(key, value)
    if rest:
        merged["allOf"] = rest
    return merged


def merge_alternatives(node: Schema, keyword: str) -> Schema:
    """Fold ``anyOf`` / ``oneOf`` object shapes into one object: every property of every shape,
    required only when every shape requires it. Used where a provider needs one object."""
    members = node.get(keyword)
    if not isinstance(members, list) or not members or not all(_is_object_shape(m) for m in members):
        return node
    merged: Schema = {key: value for key, value in node.items() if key != keyword}
    merged["type"] = "object"
    properties: dict[str, Any] = dict(merged.get("properties", {}))
    required_sets = []
    for member in members:
        properties.update(member.get("properties", {}))
        required_sets.append(set(member.get("required", [])))
    merged["properties"] = properties
    required_everywhere = set.intersection(*required_sets) | set(merged.get("required", []))
    merged["required"] = [name for name in properties if name in required_everywhere]
    return append_description(merged, "Accepts one of several argument shapes; give the fields of one.")


# --- constraints --------------------------------------------------------------------------------


def _number(value: Any) -> str:
    return compact_json(value)


def constraint_sentences(node: Schema) -> list[str]:
    """Plain-language sentences for the constraints in ``node`` (no side effects)."""
    sentences = []
    bounds = []
    exclusive_min, exclusive_max = node.get("exclusiveMinimum"), node.get("exclusiveMaximum")
    if "minimum" in node:
        bounds.append(f"{'>' if exclusive_min is True else '>='} {_number(node['minimum'])}")
    if isinstance(exclusive_min, int | float) and not isinstance(exclusive_min, bool):
        bounds.append(f"> {_number(exclusive_min)}")
    if "maximum" in node:
        bounds.append(f"{'<' if exclusive_max is True else '<='} {_number(node['maximum'])}")
    if isinstance(exclusive_max, int | float) and not isinstance(exclusive_max, bool):
        bounds.append(f"< {_number(exclusive_max)}")
    if "multipleOf" in node:
        bounds.append(f"a multiple of {_number(node['multipleOf'])}")
    if bounds:
        sentences.append(f"Must be {' and '.join(bounds)}.")
    if (length := _range(node, "minLength", "maxLength", "character")) is not None:
        sentences.append(f"Must be {length} long.")
    if isinstance(node.get("pattern"), str):
        sentences.append(f"Must match the pattern {node['pattern']}.")
    if (count := _range(node, "minItems", "maxItems", "item")) is not None:
        sentences.append(f"Must have {count}.")
    if isinstance(node.get("format"), str):
        sentences.append(f"Format: {node['format']}.")
    return sentences


def _range(node: Schema, low_key: str, high_key: str, unit: str) -> str | None:
    low, high = node.get(low_key), node.get(high_key)
    low = low if isinstance(low, int) and not isinstance(low, bool) else None
    high = high if isinstance(high, int) and not isinstance(high, bool) else None
    if low is None and high is None:
        return None
    if low is not None and high is not None:
        return f"{low} {unit}" if low == high and high == 1 else f"between {low} and {high} {unit}s"
    if low is not None:
        return f"at least {low} {unit}{'' if low == 1 else 's'}"
    return f"at most {high} {unit}{'' if high == 1 else 's'}"


def describe_constraints(node: Schema) -> Schema:
    for sentence in constraint_sentences(node):
        node = append_description(node, sentence)
    return node


def describe_default(node: Schema) -> Schema:
    """Move ``default`` into the description, for providers that reject the keyword."""
    if "default" not in node:
        return node
    described = append_description(node, f"Default: {compact_json(node['default'])}.")
    return {key: value for key, value in described.items() if key != "default"}


# --- the generic form ---------------------------------------------------------------------------


def _object_root(schema: Schema) -> Schema:
    # Validation-only keywords at the root are dropped: providers reject some of them there, and
    # the arguments are validated against the original schema anyway.
    root = merge_all_of({key: value for key, value in schema.items() if key not in _ROOT_ONLY_VALIDATION})
    for keyword in ("anyOf", "oneOf"):
        root = merge_alternatives(root, keyword)
    declared = root.get("type")
    if declared is None:
        root = {"type": "object", **root}
    elif isinstance(declared, list) and "object" in declared:
        root = {**root, "type": "object"}
    elif declared != "object":
        raise UnusableSchemaError(
            f"the arguments must be an object, but the schema says {compact_json(declared)}"
        )
    if any(keyword in root for keyword in ("anyOf", "oneOf", "allOf")):
        raise UnusableSchemaError("the root combines shapes that cannot be merged into one object")
    if not isinstance(root.get("properties", {}), dict):
        raise UnusableSchemaError("'properties' is not a mapping")
    root.setdefault("properties", {})
    return root


def normalise_schema(schema: Any, *, recursion_depth: int = 2) -> Schema:
    """The generic form of an MCP tool's ``inputSchema`` (see the module docstring)."""
    if schema is None or schema is True:
        schema = {}
    if schema is False:
        raise UnusableSchemaError("the schema accepts no arguments at all (false)")
    if not isinstance(schema, dict):
        raise UnusableSchemaError(f"expected a JSON object, got {type(schema).__name__}")
    try:  # a JSON round trip copies JSON data several times faster than copy.deepcopy
        source = json.loads(json.dumps(schema))
    except (TypeError, ValueError):  # not plain JSON (NaN, objects): copy it the slow way
        source = copy.deepcopy(schema)
    try:
        inlined = _Inliner(source, recursion_depth).inline(source, ("#",))
    except RecursionError as exc:
        raise UnusableSchemaError("the schema nests too deeply") from exc
    return transform_tree(_object_root(inlined), describe_constraints)
