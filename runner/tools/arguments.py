"""Arguments from the model, checked against the tool's ORIGINAL input schema before the call.

A LangChain tool whose ``args_schema`` is a raw JSON-Schema dict (as MCP tools are) gets its
arguments unchecked: ``langchain_core`` validates only pydantic ``args_schema`` models. So this is
the only check before the server sees them. Every problem is reported, each as ``path: message``,
so the model can fix them all in one retry. The draft comes from ``$schema`` (2020-12 when absent).
A schema that is itself invalid is not used: validation then reports nothing and leaves the
checking to the server, with one warning per schema.

The check is never stricter than the servers that wrote the schemas (:func:`lenient`): a required
property with a ``default`` counts as given (:func:`fill_defaults` sends the default), an object
with ``additionalProperties: false`` accepts unknown properties (zod and pydantic servers drop
them), ``nullable: true`` admits null, an integral float is an integer in every draft, and
``format`` is never asserted.

Arguments for a plain schema (an object of properties that declare at most a type) are checked
by a :class:`QuickCheck` compiled beside the validator; it only ever says "valid" where the full
check would, and hands everything else to the full check, which words the problems.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import re
import warnings
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from runner.manifest.loading import format_path

if TYPE_CHECKING:  # jsonschema is imported at the first validation: a listing needs none
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

logger = logging.getLogger(__name__)

ROOT = "(arguments)"
MAX_MESSAGE_CHARS = 300


def _problem(error: ValidationError) -> str:
    from jsonschema.exceptions import best_match

    message = error.message
    if error.context:
        message += f" (closest match: {best_match(error.context).message})"
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 1] + "…"
    return f"{format_path(error.absolute_path, root=ROOT)}: {message}"


def _has_default(schema: Any, name: str) -> bool:
    properties = schema.get("properties") if isinstance(schema, dict) else None
    found = properties.get(name) if isinstance(properties, dict) else None
    return isinstance(found, dict) and "default" in found


@functools.cache
def lenient(validator_class: type[Validator]) -> type[Validator]:
    """``validator_class`` relaxed where servers accept what their own schemas forbid."""
    import jsonschema
    from jsonschema.validators import extend

    checks = validator_class.VALIDATORS
    strict_required, strict_type, strict_enum = checks["required"], checks["type"], checks["enum"]
    strict_additional = checks["additionalProperties"]

    def required(validator: Validator, names: Any, instance: Any, schema: dict[str, Any]) -> Any:
        if isinstance(names, list):
            names = [name for name in names if not _has_default(schema, name)]
        yield from strict_required(validator, names, instance, schema)

    def additional_properties(validator: Validator, extra: Any, instance: Any, schema: dict[str, Any]) -> Any:
        if extra is not False:  # a schema for the extra properties still applies to them
            yield from strict_additional(validator, extra, instance, schema)

    def type_(validator: Validator, types: Any, instance: Any, schema: dict[str, Any]) -> Any:
        if instance is None and schema.get("nullable") is True:  # OpenAPI's way of saying "or null"
            return
        yield from strict_type(validator, types, instance, schema)

    def enum(validator: Validator, values: Any, instance: Any, schema: dict[str, Any]) -> Any:
        if instance is None and schema.get("nullable") is True:
            return
        yield from strict_enum(validator, values, instance, schema)

    integral = jsonschema.Draft202012Validator.TYPE_CHECKER.is_type
    return extend(
        validator_class,
        validators={
            "required": required, "additionalProperties": additional_properties, "type": type_, "enum": enum,
        },
        type_checker=validator_class.TYPE_CHECKER.redefine(
            "integer", lambda _checker, value: integral(value, "integer")
        ),
    )


def fill_defaults(schema: Any, arguments: Any) -> Any:
    """``arguments`` with the default of each missing required property added, at every depth.

    A server lists such a property as required and still expects clients to send its default
    (Playwright's ``browser_take_screenshot`` does this with ``type`` and ``scale``).
    """
    if isinstance(arguments, list) and isinstance(schema, dict) and isinstance(schema.get("items"), dict):
        return [fill_defaults(schema["items"], item) for item in arguments]
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(arguments, dict) or not isinstance(properties, dict):
        return arguments
    filled = {name: fill_defaults(properties.get(name), value) for name, value in arguments.items()}
    required = schema.get("required")
    for name in required if isinstance(required, list) else []:
        if isinstance(name, str) and name not in filled and _has_default(schema, name):
            filled[name] = copy.deepcopy(properties[name]["default"])
    return filled


# Keywords that assert nothing here: annotations, and ``format`` (never asserted, see above).
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "deprecated", "readOnly",
                          "writeOnly", "$comment", "format"})
_QUICK_TYPES: dict[str, frozenset[type]] = {
    "string": frozenset({str}), "integer": frozenset({int}), "number": frozenset({int, float}),
    "boolean": frozenset({bool}), "null": frozenset({type(None)}), "array": frozenset({list}),
    "object": frozenset({dict}),
}


@functools.cache
def _quick_drafts() -> tuple[type[Validator], ...]:
    """The drafts whose plain object schemas mean the same to the quick check (jsonschema is
    imported at the first validation, so this is read then)."""
    import jsonschema

    return (jsonschema.Draft4Validator, jsonschema.Draft6Validator, jsonschema.Draft7Validator,
            jsonschema.Draft201909Validator, jsonschema.Draft202012Validator)


class QuickCheck:
    """Whether arguments certainly match a plain object schema: required names present, each
    known property of a declared JSON type (compared by exact Python type: a subclass, or any
    other doubt, goes to the full check)."""

    __slots__ = ("required", "types", "integral")

    def __init__(
        self, required: tuple[str, ...], types: dict[str, frozenset[type]], integral: frozenset[str]
    ):
        self.required = required
        self.types = types
        self.integral = integral  # properties that take an integer (an integral float is one too)

    @classmethod
    def of(cls, schema: dict[str, Any], validator_class: type[Validator]) -> QuickCheck | None:
        """The quick check of ``schema``, or None when it says more than this check understands."""
        if validator_class not in _quick_drafts() or schema.get("type", "object") != "object":
            return None
        understood = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties", "$schema"}
        if not set(schema) <= understood:
            return None
        if schema.get("additionalProperties", True) not in (True, False, {}):
            return None  # a schema for the extra properties
        properties = schema.get("properties", {})
        required = schema.get("required", [])
        if not isinstance(properties, dict) or not isinstance(required, list):
            return None
        types: dict[str, frozenset[type]] = {}
        integral = set()
        for name, field in properties.items():
            if field is True:
                continue
            if not isinstance(field, dict):
                return None
            declared = _declared_types(field)
            if declared is None:
                return None
            if declared:
                names, nullable = declared
                accepted = frozenset().union(*(_QUICK_TYPES[name_] for name_ in names))
                types[name] = accepted | {type(None)} if nullable else accepted
                if "integer" in names:
                    integral.add(name)
        if not all(isinstance(name, str) for name in required):
            return None
        needed = tuple(name for name in required if not _has_default(schema, name))
        return cls(needed, types, frozenset(integral))

    def __call__(self, arguments: dict[str, Any]) -> bool:
        for name in self.required:
            if name not in arguments:
                return False
        types = self.types
        for name, value in arguments.items():
            accepted = types.get(name)
            if accepted is not None and type(value) not in accepted:
                if not (type(value) is float and name in self.integral and value.is_integer()):
                    return False
        return True


def _declared_types(field: dict[str, Any]) -> tuple[list[str], bool] | None | tuple[()]:
    """A property's JSON types and whether it is ``nullable``; ``()`` when it declares none;
    None when it says more than a type (or an ``anyOf`` of bare types)."""
    keys = set(field) - _ANNOTATIONS - {"nullable"}
    nullable = field.get("nullable") is True
    if not keys:
        return ()
    if keys == {"type"}:
        declared = field["type"]
        names = [declared] if isinstance(declared, str) else declared
    elif keys == {"anyOf"} and isinstance(field["anyOf"], list) and field["anyOf"]:
        names = []
        for branch in field["anyOf"]:
            if not isinstance(branch, dict) or set(branch) - _ANNOTATIONS != {"type"}:
                return None
            if not isinstance(branch["type"], str):
                return None
            names.append(branch["type"])
        nullable = False  # lenient ``nullable`` applies to a ``type`` keyword only
    else:
        return None
    if not isinstance(names, list) or not names or not all(
        isinstance(name, str) and name in _QUICK_TYPES for name in names
    ):
        return None
    return names, nullable


def _dialect(schema: dict[str, Any]) -> type[Validator]:
    """The validator class of ``schema``'s ``$schema`` (2020-12 when absent or unknown)."""
    import jsonschema
    from jsonschema.validators import validator_for

    dialect = schema.get("$schema")
    if not isinstance(dialect, str):
        return jsonschema.Draft202012Validator
    with warnings.catch_warnings():  # an unknown $schema falls back to 2020-12 quietly
        warnings.simplefilter("ignore", DeprecationWarning)
        return validator_for({"$schema": dialect}, default=jsonschema.Draft202012Validator)


class ArgumentValidator:
    """Validates arguments against input schemas, compiling each distinct schema once."""

    def __init__(self, *, cache_size: int = 512) -> None:
        self._cache_size = cache_size
        self._compiled: OrderedDict[str, Validator | str] = OrderedDict()
        # The same schema object comes back on every call of a tool: found by identity, it costs
        # no serialisation (the schema is kept alive beside its validator, so the id stays its own).
        self._by_identity: OrderedDict[int, tuple[dict[str, Any], Validator | str, QuickCheck | None]] = (
            OrderedDict()
        )

    @staticmethod
    def _key(schema: dict[str, Any]) -> str:
        return json.dumps(schema, sort_keys=True, default=str)

    def _compile(self, schema: dict[str, Any]) -> Validator | str:
        """The validator for ``schema``, or the reason it cannot be used."""
        return self._compiled_with_quick(schema)[0]

    def _compiled_with_quick(self, schema: dict[str, Any]) -> tuple[Validator | str, QuickCheck | None]:
        known = self._by_identity.get(id(schema))
        if known is not None and known[0] is schema:
            return known[1], known[2]
        compiled = self._compile_by_content(schema)
        quick = None if isinstance(compiled, str) else QuickCheck.of(schema, _dialect(schema))
        self._by_identity[id(schema)] = (schema, compiled, quick)
        if len(self._by_identity) > self._cache_size:
            self._by_identity.popitem(last=False)
        return compiled, quick

    def _compile_by_content(self, schema: dict[str, Any]) -> Validator | str:
        import jsonschema

        key = self._key(schema)
        if key in self._compiled:
            self._compiled.move_to_end(key)
            return self._compiled[key]
        validator_class = _dialect(schema)
        try:
            validator_class.check_schema(schema)
            compiled: Validator | str = lenient(validator_class)(schema)
        except jsonschema.SchemaError as exc:
            compiled = f"{format_path(exc.absolute_path, root=ROOT)}: {exc.message}"
            logger.warning("input schema is invalid, arguments go unchecked: %s", compiled)
        self._compiled[key] = compiled
        if len(self._compiled) > self._cache_size:
            self._compiled.popitem(last=False)
        return compiled

    def schema_problem(self, schema: Any) -> str | None:
        """Why ``schema`` cannot be used for validation, or None when it can."""
        compiled = self._compile(schema) if isinstance(schema, dict) else "the schema is not an object"
        return compiled if isinstance(compiled, str) else None

    def problems(self, schema: Any, arguments: Any) -> list[str]:
        """Every way ``arguments`` break ``schema``, as ``path: message``, sorted by path."""
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return [f"{ROOT}: must be an object, not {type(arguments).__name__}"]
        if schema is None or schema is True or not isinstance(schema, dict):
            return []
        compiled, quick = self._compiled_with_quick(schema)
        if isinstance(compiled, str) or (quick is not None and quick(arguments)):
            return []
        import referencing.exceptions  # imported with jsonschema by _compile

        try:
            errors = list(compiled.iter_errors(arguments))
        except (referencing.exceptions.Unresolvable, re.error) as exc:
            logger.warning("input schema cannot be applied, arguments go unchecked: %s", exc)
            self._compiled[self._key(schema)] = str(exc)  # do not try (and warn) again
            self._by_identity[id(schema)] = (schema, str(exc), None)
            return []
        errors.sort(key=lambda error: [str(part) for part in error.absolute_path])
        return list(dict.fromkeys(_problem(error) for error in errors))


_default_validator = ArgumentValidator()


def validate_arguments(schema: Any, arguments: Any) -> list[str]:
    """:meth:`ArgumentValidator.problems` with a shared, process-wide cache."""
    return _default_validator.problems(schema, arguments)


def problem_lines(problems: list[str]) -> str:
    """Every problem on a line of its own (for a person: `mcp-run call`)."""
    return "\n".join(f"- {problem}" for problem in problems)


def format_problems(problems: list[str]) -> str:
    """One text listing every problem, for a ``ToolMessage(status="error")``: the model is told
    to fix them all."""
    return (
        f"The arguments do not match the tool's input schema:\n{problem_lines(problems)}\n"
        "Fix all of them and call the tool again."
    )


def _allows_null(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return schema is True
    declared = schema.get("type")
    if declared is None and not any(key in schema for key in ("enum", "const", "anyOf", "oneOf")):
        return True
    if declared == "null" or (isinstance(declared, list) and "null" in declared):
        return True
    if None in (schema.get("enum") or []) or ("const" in schema and schema["const"] is None):
        return True
    return any(_allows_null(branch) for key in ("anyOf", "oneOf") for branch in schema.get(key, []))


def drop_strict_nulls(arguments: Any, schema: dict[str, Any]) -> Any:
    """Arguments with the nulls removed that OpenAI strict mode sends for optional properties.

    ``schema`` is the generic form (:func:`runner.tools.schemas.normalise_schema`) the strict
    schema was made from: a null is dropped where that property was optional and does not
    accept null itself, at every depth.
    """
    if isinstance(arguments, list) and isinstance(schema.get("items"), dict):
        return [drop_strict_nulls(item, schema["items"]) for item in arguments]
    properties = schema.get("properties")
    if not isinstance(arguments, dict) or not isinstance(properties, dict):
        return arguments
    required = set(schema.get("required", []))
    cleaned = {}
    for name, value in arguments.items():
        property_schema = properties.get(name)
        if (
            value is None
            and name not in required
            and name in properties
            and not _allows_null(property_schema)
        ):
            continue
        cleaned[name] = (
            drop_strict_nulls(value, property_schema) if isinstance(property_schema, dict) else value
        )
    return cleaned
