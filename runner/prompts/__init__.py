"""Prompts: the Jinja2 system prompt and MCP prompt templates offered as chat commands.

    system.py     sandboxed system prompt templates, confined to the manifest's folder
    bounds.py     the limits of one rendering: text made, loop steps, time
    messages.py   prompts/get results as LangChain messages; argument checks
    commands.py   /command lines, the catalog of commands, resolving a command to a request
"""

from __future__ import annotations

from runner.lazy import lazy_attributes

_EXPORTS = {
    "AgentSummary": "runner.prompts.system",
    "PromptCatalog": "runner.prompts.commands",
    "PromptCommand": "runner.prompts.commands",
    "PromptRequest": "runner.prompts.commands",
    "PromptSource": "runner.prompts.messages",
    "RenderLimits": "runner.prompts.bounds",
    "ServerSummary": "runner.prompts.system",
    "SourceLocation": "runner.prompts.system",
    "SystemTemplate": "runner.prompts.system",
    "ToolSummary": "runner.prompts.system",
    "build_prompt_catalog": "runner.prompts.commands",
    "check_prompt_arguments": "runner.prompts.messages",
    "compile_system_prompt": "runner.prompts.system",
    "content_blocks": "runner.prompts.messages",
    "describe_arguments": "runner.prompts.messages",
    "exposed": "runner.prompts.commands",
    "fetch_prompt_messages": "runner.prompts.messages",
    "parse_command_line": "runner.prompts.commands",
    "prompt_messages": "runner.prompts.messages",
    "template_files": "runner.prompts.system",
}
__all__ = sorted(_EXPORTS)


__getattr__ = lazy_attributes(__name__, _EXPORTS)
