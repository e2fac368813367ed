"""Pydantic's validation messages in the manifest's own words: ``must not be empty`` rather than
``String should have at least 1 character``, ``must be a whole number (an integer)`` rather than
``Input should be a valid integer, unable to parse string as an integer``.

Messages the manifest's own validators raise are already worded for people and pass as they are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from runner.manifest import (
    AGENT_NAME_PATTERN,
    AGENT_NAME_RULE,
    IMPORT_PATH_PATTERN,
    SERVER_KEY_PATTERN,
    SERVER_KEY_RULE,
)

PATTERN_MESSAGES = {
    SERVER_KEY_PATTERN: SERVER_KEY_RULE,
    AGENT_NAME_PATTERN: AGENT_NAME_RULE,
    IMPORT_PATH_PATTERN: "must be an import path such as 'package.module:function'",
    r"^https?://[^\s/]+": "must be an http:// or https:// URL",
    r"^[A-Za-z_][A-Za-z0-9_]*$": "must be a variable name (letters, digits and '_')",
    r"^(memory|sqlite:///.+|postgres(ql)?://.+)$": (
        "must be 'memory', 'sqlite:///path/to/file.sqlite' or 'postgres://…'"
    ),
}

# By pydantic's error type; ``{name}`` is filled from the error's context.
_BY_TYPE = {
    "string_type": "must be text (a string)",
    "int_type": "must be a whole number (an integer)",
    "int_parsing": "must be a whole number (an integer)",
    "int_from_float": "must be a whole number (an integer)",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "dict_type": "must be a mapping of keys to values (a dictionary)",
    "model_type": "must be a mapping of keys to values (a dictionary)",
    "model_attributes_type": "must be a mapping of keys to values (a dictionary)",
    "list_type": "must be a list",
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be greater than or equal to {ge}",
    "less_than": "must be less than {lt}",
    "less_than_equal": "must be less than or equal to {le}",
    "string_too_long": "must have at most {max_length} characters",
    "too_short": "must have at least {min_length} item(s)",
    "too_long": "must have at most {max_length} item(s)",
}
# What is left of pydantic's wording: "Input should be 'a' or 'b'" -> "must be 'a' or 'b'".
_SHOULD = re.compile(r"^(Input|String|List|Value|Dictionary|Tuple|Set|Data) should ")


def in_manifest_words(kind: str, message: str, context: Mapping[str, Any]) -> str:
    """The message of a pydantic error of type ``kind`` (its ``msg`` and ``ctx``), for people."""
    if kind == "string_too_short":
        length = context.get("min_length", 1)
        return "must not be empty" if length == 1 else f"must have at least {length} characters"
    if kind == "string_pattern_mismatch" and context.get("pattern", "") in PATTERN_MESSAGES:
        return PATTERN_MESSAGES[context["pattern"]]
    if kind in _BY_TYPE:
        return _BY_TYPE[kind].format_map(dict(context))
    message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return _SHOULD.sub("must ", message)
