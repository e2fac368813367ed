"""``python -m runner`` is the ``mcp-run`` command."""

from runner.cli import main

main()
