"""The events of ``--json`` are described three times: the types in ``runner.events``, the JSON
Schema in ``schemas/events.schema.json``, the README's "Chat events" table. They stay in step."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from runner.events import events_json_schema

ROOT = Path(__file__).resolve().parents[1]
REGENERATE = ("run: python -c 'import json; from runner.events import events_json_schema as s; "
              "print(json.dumps(s(), indent=2))' > schemas/events.schema.json")


def schema_fields() -> dict[str, set[str]]:
    """Each event type of the schema and its fields (``type`` aside)."""
    fields = {}
    for definition in events_json_schema()["$defs"].values():
        properties = definition.get("properties", {})
        if "const" in properties.get("type", {}):
            fields[properties["type"]["const"]] = set(properties) - {"type"}
    return fields


def readme_fields() -> dict[str, set[str]]:
    """Each row of the README's events table: its type and the fields its second column names."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### Chat events", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"`\w+`", cells[0]):
            rows[cells[0].strip("`")] = set(re.findall(r"`(\w+)`", cells[1]))
    return rows


def test_the_committed_events_schema_matches_the_types() -> None:
    committed = json.loads((ROOT / "schemas" / "events.schema.json").read_text(encoding="utf-8"))
    assert committed == events_json_schema(), REGENERATE


def test_the_readme_table_names_every_event_and_field_of_the_schema_and_no_other() -> None:
    assert readme_fields() == schema_fields()


def test_every_event_of_the_schema_is_described() -> None:
    definitions: dict[str, Any] = events_json_schema()["$defs"]
    assert all(definition.get("description") for definition in definitions.values())


def test_the_schema_accepts_the_events_of_an_offline_turn(tmp_path: Path) -> None:
    import anyio
    import jsonschema

    from runner.agent.runtime import load_agent
    from runner.agent.turns import stream_turn

    manifest = tmp_path / "agent.yaml"
    manifest.write_text("version: 1\nname: plain\nmodel: {id: offline}\nservers: {}\n")

    async def events() -> list[Any]:
        async with load_agent(manifest) as runtime:
            return [event async for event in stream_turn(runtime, "hello")]

    seen = anyio.run(events)
    validator = jsonschema.Draft202012Validator(events_json_schema())
    for event in seen:
        validator.validate(json.loads(json.dumps(event)))
    assert seen[-1]["type"] == "final"
