"""Getting started: starter folders, imports from other tools' MCP configs, effective settings."""
