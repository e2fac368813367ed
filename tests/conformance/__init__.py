"""The official MCP conformance suite, client mode: entry point, runner, baseline."""
