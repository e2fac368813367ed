"""``python -m runner`` and the ``mcp-run`` console script.

Ctrl-C may come before any command is running, while the CLI is still being imported: this entry
point answers it like everywhere else, "interrupted" and exit 130, never a traceback.
"""

from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130


def main() -> None:
    try:
        from runner.cli import main as cli

        cli()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
