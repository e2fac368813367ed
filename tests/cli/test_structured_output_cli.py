"""Structured output (``output:``) from the command line: ``-p`` prints the object as JSON (exit 0)
or the validation errors (exit 1); ``--json`` carries it in the ``final`` event; the chat shows it
pretty-printed; ``validate`` locates a schema that is wrong, inline or in its file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from builders import chat_in_a_terminal, invoke, scripted_model, write_manifest

from runner.events import events_json_schema

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temperature": {"type": "number"}},
    "required": ["city", "temperature"],
}
PARIS = {"city": "Paris", "temperature": 21.5}


def structured_agent(folder: Path, script: list[Any], **output: Any) -> Path:
    return write_manifest(folder, {}, name="weather", checkpointer="memory",
                          model=scripted_model(folder, script), output={"schema": WEATHER, **output})


def test_a_one_shot_run_prints_the_answer_object_as_json(tmp_path: Path) -> None:
    structured_agent(tmp_path, ["Sunny in Paris.", {"output": PARIS}])
    result = invoke("agent.yaml", "-p", "weather?", cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == PARIS


def test_a_one_shot_run_whose_answers_never_validate_exits_1_with_the_errors(tmp_path: Path) -> None:
    structured_agent(tmp_path, [{"output": {"city": "Paris"}}, {"output": {"city": 1, "temperature": 2}}],
                     retries=1)
    result = invoke("agent.yaml", "-p", "weather?", cwd=tmp_path)
    assert result.exit_code == 1, result.stderr
    assert not result.stdout.strip()
    assert "does not match output.schema after 2 answers" in result.stderr
    assert "at city: 1 is not of type 'string'" in result.stderr


def test_a_one_shot_json_run_whose_turn_fails_ends_with_an_error_event_and_exits_1(tmp_path: Path) -> None:
    structured_agent(tmp_path, [{"output": {"city": "Paris"}}], retries=0)
    result = invoke("agent.yaml", "-p", "weather?", "--json", cwd=tmp_path)
    assert result.exit_code == 1, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    last = events[-1]
    assert last["type"] == "error"
    assert "does not match output.schema" in last["message"]
    assert "final" not in [event["type"] for event in events]
    jsonschema.validate(last, events_json_schema())


def test_the_json_final_event_carries_the_object_and_fits_the_events_schema(tmp_path: Path) -> None:
    structured_agent(tmp_path, [{"output": PARIS}])
    result = invoke("agent.yaml", "-p", "weather?", "--json", cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    final = events[-1]
    assert final["type"] == "final" and final["output"] == PARIS
    assert json.loads(final["text"]) == PARIS
    jsonschema.validate(final, events_json_schema())


def test_the_chat_shows_the_answer_object_pretty_printed(tmp_path: Path) -> None:
    structured_agent(tmp_path, [{"output": PARIS}])
    with chat_in_a_terminal(tmp_path) as chat:
        chat.sendline("weather?")
        chat.expect(r'\{\r?\n  "city": "Paris",\r?\n  "temperature": 21.5\r?\n\}')
        chat.expect("> ")


def test_validate_locates_a_wrong_inline_schema_at_the_part_that_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("version: 1\nname: bad\noutput:\n  schema:\n    type: object\n    properties:\n"
                    "      age: {type: integr}\n")
    result = invoke("validate", str(path))
    assert result.exit_code == 2
    assert (f"{path}:7:19: output.schema.properties.age.type: not a valid JSON Schema: unknown type "
            "'integr' (did you mean 'integer'?)") in result.output


def test_validate_locates_a_wrong_schema_file_in_that_file(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("version: 1\nname: bad\noutput: {schema: answer.json}\n")
    (tmp_path / "answer.json").write_text('{\n  "type": "object",\n  "properties": {\n'
                                          '    "n": {"minimum": "zero"}\n  }\n}\n')
    result = invoke("validate", str(path))
    assert result.exit_code == 2
    assert (f"{tmp_path / 'answer.json'}:4:22: properties.n.minimum: not a valid JSON Schema: 'zero' "
            "is not of type 'number'") in result.output


def test_validate_reports_every_problem_of_an_output_schema_each_at_its_place(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("version: 1\nname: bad\noutput:\n  schema:\n    type: object\n    properties:\n"
                    "      age: {type: integr}\n      size: {minimum: zero}\n")
    result = invoke("validate", str(path))
    assert result.exit_code == 2
    assert f"{path}:7:19: output.schema.properties.age.type: not a valid JSON Schema: unknown type" \
        in result.output
    assert (f"{path}:8:23: output.schema.properties.size.minimum: not a valid JSON Schema: 'zero' is not "
            "of type 'number'") in result.output
    assert "2 problems found" in result.output


def test_validate_reports_the_schema_problems_with_bad_retries_and_method_in_one_run(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("version: 1\nname: bad\noutput:\n  schema:\n    type: object\n    properties:\n"
                    "      age: {type: integr}\n      city: {$ref: '#/$defs/City'}\n"
                    "      zone: {$ref: 'https://example.invalid/zone.json'}\n"
                    "  retries: -1\n  method: natve\n")
    result = invoke("validate", str(path))
    assert result.exit_code == 2
    at = f"{path}:"
    for expected in (f"{at}7:19: output.schema.properties.age.type: not a valid JSON Schema: unknown type",
                     f"{at}8:20: output.schema.properties.city.$ref: $ref '#/$defs/City' resolves to nothing",
                     f"{at}9:20: output.schema.properties.zone.$ref: "
                     "$ref 'https://example.invalid/zone.json' resolves to nothing",
                     f"{at}10:12: output.retries: must be greater than or equal to 0",
                     f"{at}11:11: output.method: must be 'auto', 'native' or 'tool'"):
        assert expected in result.output, result.output
    assert "5 problems found" in result.output


def test_validate_reports_a_schema_files_problems_with_the_manifests_own_in_one_run(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("version: 1\nname: bad\noutput:\n  schema: answer.json\n  retries: -1\n")
    (tmp_path / "answer.json").write_text('{\n  "type": "object",\n  "properties": {\n'
                                          '    "n": {"minimum": "zero"},\n'
                                          '    "m": {"type": "integr"}\n  }\n}\n')
    result = invoke("validate", str(path))
    assert result.exit_code == 2
    for expected in (f"{path}:5:12: output.retries: must be greater than or equal to 0",
                     f"{tmp_path / 'answer.json'}:4:22: properties.n.minimum: not a valid JSON Schema: "
                     "'zero' is not of type 'number'",
                     f"{tmp_path / 'answer.json'}:5:19: properties.m.type: not a valid JSON Schema: "
                     "unknown type 'integr'"):
        assert expected in result.output, result.output
    assert "3 problems found" in result.output
    (tmp_path / "answer.json").unlink()
    missing = invoke("validate", str(path))
    not_found = f"{path}:4:11: output.schema: schema file 'answer.json' not found"
    assert not_found in missing.output, missing.output
    assert "2 problems found" in missing.output


def test_validate_rejects_a_ref_that_resolves_to_nothing_in_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("version: 1\nname: bad\noutput:\n  schema:\n    type: object\n    properties:\n"
                    "      city: {$ref: '#/$defs/City'}\n      zone: {$ref: 'https://example.invalid/zone.json'}\n"
                    "      ok: {$ref: '#/$defs/Place'}\n    $defs:\n      Place: {type: string}\n")
    result = invoke("validate", str(path))
    assert result.exit_code == 2
    assert (f"{path}:7:20: output.schema.properties.city.$ref: $ref '#/$defs/City' resolves to nothing in "
            "the schema (references outside it are not fetched)") in result.output
    assert f"{path}:8:20: output.schema.properties.zone.$ref: $ref 'https://example.invalid/zone.json'" \
        in result.output
    assert "Place" not in result.output
    assert "2 problems found" in result.output


def test_validate_says_where_a_schema_is_no_object_missing_or_its_retries_negative(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("version: 1\nname: bad\noutput:\n  schema: {type: array}\n")
    assert f"{path}:4:18: output.schema.type: the output schema's root is an object" in invoke(
        "validate", str(path)).output
    path.write_text("version: 1\nname: bad\noutput: {schema: gone.yaml}\n")
    missing = invoke("validate", str(path)).output
    assert f"{path}:3:18: output.schema: schema file 'gone.yaml' not found" in missing
    path.write_text("version: 1\nname: bad\noutput: {schema: notes.txt, retries: -1}\n")
    problems = invoke("validate", str(path)).output.splitlines()
    assert problems[:2] == [
        f"{path}:3:18: output.schema: a schema file ends in .json, .yaml or .yml (or give the schema inline)",
        f"{path}:3:38: output.retries: must be greater than or equal to 0"]


def test_the_example_manifest_answers_with_an_object_offline(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    result = invoke(str(root / "examples" / "structured-output.yaml"), "-p",
                    'notes__calculate {"expression": "6*7"}', cwd=tmp_path,
                    env={"NOTES_FILE": str(tmp_path / "notes.json")})
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {"summary": "notes__calculate returned: 42", "confident": False}


def test_config_shows_the_output_settings_and_where_each_comes_from(tmp_path: Path) -> None:
    path = structured_agent(tmp_path, [], retries=4)
    shown = invoke("config", str(path)).output
    block = shown[shown.index("\noutput:"):]
    assert "    type: object  # manifest " in block
    assert f"  retries: 4  # manifest {path}:" in block
    assert "  method: auto  # built-in" in block


def test_validate_warns_at_a_schema_keyword_left_null_by_a_comma_in_a_flow_mapping(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("version: 1\nname: cut\noutput:\n  schema:\n    type: object\n    properties:\n"
                    "      summary: {type: string, description: What was found, in a sentence.}\n")
    result = invoke("validate", str(path))
    assert result.exit_code == 0, result.output
    assert f"{path}:7:" in result.output
    assert "output.schema.properties.summary.in a sentence.: warning: 'in a sentence.' has no value (null)" \
        in result.output


def test_the_structured_output_example_gives_its_description_whole(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "structured-output.yaml"
    result = invoke("validate", str(example))
    assert result.exit_code == 0, result.output
    assert "has no value" not in result.output
