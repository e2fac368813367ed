"""Prompts: the Jinja2 system prompt and MCP prompt templates offered as chat commands.

    system.py     sandboxed system prompt templates, confined to the manifest's folder
    messages.py   prompts/get results as LangChain messages; argument checks
    commands.py   /command lines, the catalog of commands, resolving a command to a request
"""

from runner.prompts.commands import (
    PromptCatalog,
    PromptCommand,
    PromptRequest,
    build_prompt_catalog,
    exposed,
    namespaced_name,
    parse_command_line,
)
from runner.prompts.messages import (
    PromptSource,
    check_prompt_arguments,
    content_blocks,
    describe_arguments,
    fetch_prompt_messages,
    prompt_messages,
)
from runner.prompts.system import (
    AgentSummary,
    ServerSummary,
    SourceLocation,
    SystemTemplate,
    ToolSummary,
    compile_system_prompt,
    template_files,
)

__all__ = [
    "AgentSummary",
    "PromptCatalog",
    "PromptCommand",
    "PromptRequest",
    "PromptSource",
    "ServerSummary",
    "SourceLocation",
    "SystemTemplate",
    "ToolSummary",
    "build_prompt_catalog",
    "check_prompt_arguments",
    "compile_system_prompt",
    "content_blocks",
    "describe_arguments",
    "exposed",
    "fetch_prompt_messages",
    "namespaced_name",
    "parse_command_line",
    "prompt_messages",
    "template_files",
]
