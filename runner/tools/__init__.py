"""The server-independent half of the tool layer: names, filters, schemas, arguments, results.

Pure functions and classes over ``mcp.types`` and plain data; no I/O (except
:func:`load_import_path`, which imports user code).
"""

from __future__ import annotations

from runner.lazy import lazy_attributes

_EXPORTS = {
    "ArgumentValidator": "runner.tools.arguments",
    "ContentBlock": "runner.tools.content",
    "DEFAULT_SEPARATOR": "runner.tools.naming",
    "ImportPathError": "runner.errors",
    "MEDIA_IN_TOOL_RESULTS": "runner.tools.content",
    "NAME_PATTERN": "runner.tools.naming",
    "NameCollisionError": "runner.errors",
    "NameTable": "runner.tools.naming",
    "Origin": "runner.tools.naming",
    "Provider": "runner.tools.provider_schemas",
    "Schema": "runner.tools.schemas",
    "StrictSchemaError": "runner.errors",
    "ToolOutput": "runner.tools.content",
    "UnusableSchemaError": "runner.errors",
    "apply_filter_function": "runner.tools.filters",
    "convert_result": "runner.tools.content",
    "drop_strict_nulls": "runner.tools.arguments",
    "fill_defaults": "runner.tools.arguments",
    "error_text": "runner.tools.content",
    "filter_problems": "runner.tools.filters",
    "format_problems": "runner.tools.arguments",
    "gemini_schema": "runner.tools.provider_schemas",
    "generate_name": "runner.tools.naming",
    "guard_blocks": "runner.tools.content",
    "guard_text": "runner.tools.content",
    "is_selected": "runner.tools.filters",
    "load_import_path": "runner.tools.filters",
    "matches_any": "runner.tools.filters",
    "needs_approval": "runner.tools.filters",
    "normalise_schema": "runner.tools.schemas",
    "openai_schema": "runner.tools.provider_schemas",
    "openai_strict_schema": "runner.tools.provider_schemas",
    "problem_lines": "runner.tools.arguments",
    "provider_for_model": "runner.tools.provider_schemas",
    "schema_for_provider": "runner.tools.provider_schemas",
    "select_names": "runner.tools.filters",
    "validate_arguments": "runner.tools.arguments",
}
__all__ = sorted(_EXPORTS)


__getattr__ = lazy_attributes(__name__, _EXPORTS)
