"""A server that does not stay up: it exits at once with an error, or serves only some launches.

    exits.py [--code N] [--count-file F] [--healthy-launches K]

Every launch appends a line to ``--count-file``. Launches beyond the first ``K`` (default 0) print
a complaint to stderr and exit with ``--code`` (default 3) before reading anything; the first ``K``
serve the demo server. Without ``--healthy-launches`` it never imports the SDK, so it is cheap.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--code", type=int, default=3)
    parser.add_argument("--count-file", type=Path)
    parser.add_argument("--healthy-launches", type=int, default=0)
    options, rest = parser.parse_known_args()
    launch = 1
    if options.count_file is not None:
        with options.count_file.open("a+") as counter:
            counter.seek(0)
            launch = len(counter.read().splitlines()) + 1
            counter.write("launch\n")
    if launch > options.healthy_launches:
        print(f"fatal: cannot start (launch {launch})", file=sys.stderr, flush=True)
        sys.exit(options.code)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from mcp_servers import _serve, demo

    _serve.main(demo.build, rest)


if __name__ == "__main__":
    main()
