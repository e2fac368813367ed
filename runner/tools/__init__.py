"""The server-independent half of the tool layer: names, filters, schemas, arguments, results.

Pure functions and classes over ``mcp.types`` and plain data; no I/O (except
:func:`load_import_path`, which imports user code).
"""

from runner.tools.arguments import (
    ArgumentValidator,
    drop_strict_nulls,
    format_path,
    format_problems,
    validate_arguments,
)
from runner.tools.content import (
    MEDIA_IN_TOOL_RESULTS,
    ContentBlock,
    ToolOutput,
    convert_result,
    error_text,
    guard_blocks,
    guard_text,
)
from runner.tools.filters import (
    ImportPathError,
    apply_filter_function,
    filter_problems,
    is_selected,
    load_import_path,
    matches_any,
    needs_approval,
    select_names,
)
from runner.tools.naming import (
    DEFAULT_SEPARATOR,
    NAME_PATTERN,
    NameCollisionError,
    NameTable,
    Origin,
    generate_name,
)
from runner.tools.providers import (
    Provider,
    StrictSchemaError,
    gemini_schema,
    openai_schema,
    openai_strict_schema,
    provider_for_model,
    schema_for_provider,
)
from runner.tools.schemas import Schema, UnusableSchemaError, normalise_schema

__all__ = [
    "DEFAULT_SEPARATOR",
    "MEDIA_IN_TOOL_RESULTS",
    "NAME_PATTERN",
    "ArgumentValidator",
    "ContentBlock",
    "ImportPathError",
    "NameCollisionError",
    "NameTable",
    "Origin",
    "Provider",
    "Schema",
    "StrictSchemaError",
    "ToolOutput",
    "UnusableSchemaError",
    "apply_filter_function",
    "convert_result",
    "drop_strict_nulls",
    "error_text",
    "filter_problems",
    "format_path",
    "format_problems",
    "gemini_schema",
    "generate_name",
    "guard_blocks",
    "guard_text",
    "is_selected",
    "load_import_path",
    "matches_any",
    "needs_approval",
    "normalise_schema",
    "openai_schema",
    "openai_strict_schema",
    "provider_for_model",
    "schema_for_provider",
    "select_names",
    "validate_arguments",
]
