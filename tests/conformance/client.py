"""The client under test of the official MCP conformance suite: the runner's server layer.

    conformance client --command "python tests/conformance/client.py" --scenario tools_call

The suite starts a test server for a scenario, then runs this program with the server's URL as the
last argument and the scenario name in ``MCP_CONFORMANCE_SCENARIO``. The program does what the
runner does with a manifest that names that URL: ``runner.manifest.loading.parse_manifest`` of a one-server
manifest, ``runner.servers.open_fleet`` (transport, handshake, era negotiation, listing), then it
calls every tool the server lists, through ``ServerConnection.call_tool``, accepting every request
for input as proposed (the runner fills in the schema's defaults, as the elicitation scenarios
check). In the ``auth/*`` scenarios the server's ``auth`` block names the suite's Client ID
Metadata Document URL and, when the suite hands them over in ``MCP_CONFORMANCE_CONTEXT``,
pre-registered client credentials; the authorization URL is approved by an HTTP client
(``tests/mcp_servers/approver.py``) in place of a person in a browser, and tokens are stored in a
temporary folder. The suite judges what it saw on the wire; the exit status (0 ok, 1 the start or
a call failed) is also logged as the last
line of stderr (``EXIT_MARKER``), because the suite records a client's stderr but, when it runs a
whole suite, not its exit status.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from pathlib import Path

import anyio
import mcp_types as types

ROOT = Path(__file__).resolve().parents[2]
for folder in (ROOT, ROOT / "tests"):  # run as a script by the suite, from any working directory
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from mcp_servers.approver import Approver  # noqa: E402

from runner.auth.context import interacting  # noqa: E402
from runner.errors import RunnerError  # noqa: E402
from runner.manifest.loading import parse_manifest  # noqa: E402
from runner.servers import ServerConnection, open_fleet  # noqa: E402

logger = logging.getLogger("conformance.client")

SERVER_KEY = "conformance"
EXIT_MARKER = "conformance client exit status:"
RUN_LIMIT = 25.0  # below the suite's own per-scenario client timeout (30 s by default)
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"  # the suite's CIMD

# Arguments for the tools the scenarios' servers offer; a tool not named here is called with {}.
TOOL_ARGUMENTS: dict[str, dict[str, object]] = {
    "add_numbers": {"a": 5, "b": 3},  # scenario tools_call
}


def manifest_text(url: str, auth: dict[str, object] | None = None) -> str:
    """A manifest with one required streamable-HTTP server at ``url`` (JSON is YAML)."""
    server: dict[str, object] = {"url": url, "required": True, "timeout": "10s", "startup_timeout": "15s"}
    if auth is not None:
        server["auth"] = auth
    return json.dumps({"version": 1, "name": "conformance", "servers": {SERVER_KEY: server}})


def auth_block(scenario: str) -> dict[str, object] | None:
    """The server's ``auth`` block in an ``auth/*`` scenario (none otherwise)."""
    if not scenario.startswith("auth/"):
        return None
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    auth: dict[str, object] = {"client_metadata_url": CLIENT_METADATA_URL}
    for name in ("client_id", "client_secret"):
        if context.get(name):
            auth[name] = context[name]
    return auth


async def accept_as_proposed(server: str, request: types.ElicitRequestParams) -> types.ElicitResult:
    """A user who accepts every form without typing anything: the defaults are what is sent."""
    logger.info("elicitation from %s: %s", server, request.message)
    return types.ElicitResult(action="accept", content={})


async def exercise(connection: ServerConnection) -> bool:
    """Call every listed tool once; True when every call returned a non-error result."""
    logger.info("connected (era %s); tools: %s", connection.era, [tool.name for tool in connection.tools])
    all_ok = True
    for tool in connection.tools:
        arguments = TOOL_ARGUMENTS.get(tool.name, {})
        result = await connection.call_tool(tool.name, arguments, ask=accept_as_proposed)
        texts = [block.text for block in result.content if hasattr(block, "text")]
        logger.info("tool %s -> is_error=%s %s", tool.name, result.is_error, texts)
        all_ok = all_ok and not result.is_error
    return all_ok


async def run(url: str, scenario: str) -> int:
    logger.info("scenario %s against %s", scenario, url)
    loaded = parse_manifest(manifest_text(url, auth_block(scenario)), file="conformance.yaml")
    with tempfile.TemporaryDirectory(prefix="mcp-run-conformance-") as state:
        os.environ["MCP_RUN_TOKEN_DIR"] = str(Path(state) / "tokens")
        try:
            with anyio.fail_after(RUN_LIMIT), interacting(Approver()):
                async with open_fleet(
                    loaded.manifest.servers, base_dir=Path(state), state_dir=Path(state)
                ) as fleet:
                    ok = await exercise(fleet.connections[SERVER_KEY])
        except RunnerError as exc:
            logger.error("%s: %s", type(exc).__name__, exc)
            return 1
        except TimeoutError:
            logger.error("the scenario did not finish within %gs", RUN_LIMIT)
            return 1
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
    if len(argv) < 2:
        logger.error("usage: client.py [args...] SERVER_URL")
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    status = anyio.run(run, argv[-1], scenario)
    logger.info("%s %d", EXIT_MARKER, status)
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
