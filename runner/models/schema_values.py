"""Values that fit a JSON Schema, made without a model: what the ``offline`` model answers when the
manifest asks for structured output (``output:``). A field's ``const``, first ``enum`` value,
``default`` or first ``examples`` value is taken as given; otherwise the smallest value of its
type that meets its bounds, and text fields get the answer's text.
"""

from __future__ import annotations

from typing import Any

# The tool by which a model without its provider's structured output gives the answer object (its
# arguments), offered by runner.agent.structured and answered by the built-in models.
FINAL_ANSWER_TOOL = "final_answer"
MAX_DEPTH = 16  # nested schemas followed at most ($ref loops end here with null)


def fitting_value(schema: Any, text: str = "", *, root: Any = None, depth: int = 0) -> Any:
    """A value valid against ``schema`` where the schema can be met simply; ``text`` fills strings."""
    root = schema if root is None else root
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return None
    if "$ref" in schema:
        return fitting_value(_resolve(root, schema["$ref"]), text, root=root, depth=depth + 1)
    for given in ("const", "default"):
        if given in schema:
            return schema[given]
    for listed in ("enum", "examples"):
        if schema.get(listed):
            return schema[listed][0]
    for choice in ("anyOf", "oneOf"):
        if schema.get(choice):
            return fitting_value(schema[choice][0], text, root=root, depth=depth + 1)
    if schema.get("allOf"):
        merged: dict[str, Any] = {key: value for key, value in schema.items() if key != "allOf"}
        for part in schema["allOf"]:
            if isinstance(part, dict):
                merged.update(part)
        return fitting_value(merged, text, root=root, depth=depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: fitting_value(properties.get(name, {}), text, root=root, depth=depth + 1)
                for name in schema.get("required") or []}
    if kind == "array":
        item = schema.get("items") or {}
        return [fitting_value(item, text, root=root, depth=depth + 1)
                for _ in range(int(schema.get("minItems", 0)))]
    if kind in ("integer", "number"):
        return _number(schema, integer=kind == "integer")
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    value = text if "format" not in schema and "pattern" not in schema else ""
    value = value[: schema["maxLength"]] if "maxLength" in schema else value
    return value.ljust(int(schema.get("minLength", 0)), "-")


def _number(schema: dict[str, Any], *, integer: bool) -> float | int:
    """0, or the bound nearest to it."""
    value: float = 0
    if isinstance(low := schema.get("minimum"), int | float):
        value = max(value, low)
    if isinstance(above := schema.get("exclusiveMinimum"), int | float) and value <= above:
        value = above + 1
    if isinstance(high := schema.get("maximum"), int | float):
        value = min(value, high)
    if isinstance(below := schema.get("exclusiveMaximum"), int | float) and value >= below:
        value = below - 1
    return int(value) if integer else value


def _resolve(root: Any, ref: str) -> Any:
    """A local ``#/...`` reference inside ``root`` (others resolve to nothing)."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node = root
    for part in ref.lstrip("#").strip("/").split("/"):
        if not part:
            continue
        part = part.replace("~1", "/").replace("~0", "~")
        node = node.get(part) if isinstance(node, dict) else None
    return node
