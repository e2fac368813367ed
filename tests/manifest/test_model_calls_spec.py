"""``model.timeout`` and ``model.retries``: their defaults are the README's, bad values are located
(line, path, did-you-mean), and ``mcp-run config`` shows them as durations."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from builders import invoke, write_manifest

from runner.errors import ManifestError
from runner.manifest import ModelSpec, RetrySpec
from runner.manifest.loading import parse_manifest

ROOT = Path(__file__).resolve().parents[2]


def readme_model_example() -> dict[str, object]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### When the provider fails", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None
    return yaml.safe_load(block.group(1))["model"]


def test_the_readme_example_validates_and_shows_the_defaults() -> None:
    spec = ModelSpec.model_validate(readme_model_example())
    assert spec.timeout == ModelSpec(id="offline").timeout == 120.0
    assert spec.retries == ModelSpec(id="offline").retries == RetrySpec()
    assert (spec.retries.max_attempts, spec.retries.initial_delay, spec.retries.max_delay) == (3, 1.0, 20.0)


MANIFEST = """version: 1
name: t
model:
  id: offline
  timeout: {timeout}
  retries: {retries}
servers: {{}}
"""


@pytest.mark.parametrize(("timeout", "retries", "expected"), [
    ("-3", "{}", "t.yaml:5:12: model.timeout: a duration must be positive and finite"),
    ("2s", "{max_attempts: 0}",
     "t.yaml:6:27: model.retries.max_attempts: must be greater than or equal to 1"),
    ("2s", "{inital_delay: 2s}", "t.yaml:6:13: model.retries.inital_delay: unknown key 'inital_delay' "
                                 "(did you mean 'initial_delay'?)"),
    ("2s", "{initial_delay: 5s, max_delay: 1s}", "t.yaml:6:12: model.retries: max_delay must be at least "
                                                 "initial_delay"),
])
def test_a_bad_timeout_or_retry_setting_is_located(timeout: str, retries: str, expected: str) -> None:
    text = MANIFEST.format(timeout=timeout, retries=retries)
    with pytest.raises(ManifestError) as error:
        parse_manifest(text, file="t.yaml", environ={})
    assert [str(problem) for problem in error.value.problems] == [expected]


def test_config_shows_the_settings_and_their_defaults_as_durations(tmp_path: Path) -> None:
    model = {"id": "offline", "timeout": "30s", "retries": {"max_attempts": 5}}
    path = write_manifest(tmp_path, {}, model=model)
    result = invoke("config", str(path))
    assert result.exit_code == 0, result.output
    lines = [line.split("  #")[0].strip() for line in result.output.splitlines()]
    assert ["timeout: 30s", "retries:", "max_attempts: 5", "initial_delay: 1s", "max_delay: 20s"] == [
        line for line in lines[lines.index("timeout: 30s"):][:5]]
