"""Environment: a stdio server sees the host allow-list, the variables the manifest passes through,
and the manifest's own ``env`` - nothing else of the runner's environment (checked end to end,
through ``mcp-run call``, with a host environment full of credentials)."""

from __future__ import annotations

import json
from pathlib import Path

from builders import mcp_run

from reliability.support import wire, write_manifest
from runner.servers import HOST_ENV_ALLOWLIST

HOST_EXTRAS = {
    "OPENAI_API_KEY": "sk-not-for-servers",
    "AWS_SECRET_ACCESS_KEY": "not-for-servers",
    "GITHUB_TOKEN": "not-for-servers",
    "MCP_RUN_TEST_PASSED": "passed on purpose",
    "LC_MCP_RUN_TEST": "C",
}


def test_a_server_sees_only_the_allow_list_and_what_the_manifest_names(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"w": wire(env={"GIVEN_BY_MANIFEST": "given"},
                                        env_passthrough=["MCP_RUN_TEST_PASSED"])})
    result = mcp_run("call", "agent.yaml", "w__env_names", "{}", cwd=tmp_path, env=HOST_EXTRAS)
    assert result.returncode == 0, result.stderr
    seen = set(json.loads(result.stdout))
    named = {"GIVEN_BY_MANIFEST", "MCP_RUN_TEST_PASSED"}
    allowed = {name for name in seen if name in HOST_ENV_ALLOWLIST or name.startswith("LC_")}
    assert seen - allowed - named == set()
    assert named <= seen and "LC_MCP_RUN_TEST" in seen
    assert "PATH" in seen and "HOME" in seen
    assert not {"OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN"} & seen
