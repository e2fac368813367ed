"""Case files: what a case says, how it is read (located errors like the manifest's), and where
case files are found.

    # yaml-language-server: $schema=../schemas/evals.schema.json
    cases:
      - name: adds-a-note
        input: 'notes__add_note {"title": "milk"}'
        expect:
          tools: [{name: notes__add_note, args: {title: milk}}]
          match: strict
          answer: {contains: saved}
      - name: researches-then-writes
        input: Write about tides
        expect:
          agents: [pipeline, researcher, writer]   # the runs of agents: in order (agents_match: strict)
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import jsonschema
import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from runner.errors import ManifestError, Problem
from runner.manifest import Manifest, ModelSpec, did_you_mean
from runner.manifest.loading import SourceMap, located_problems, read_document, read_located_yaml

CASES_FOLDER = "evals"
CASE_NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
MANIFEST_NAME_PATTERN = r"^[^/\\]+$"  # a file name, no folder: the manifest beside evals/
MatchMode = Literal["strict", "unordered", "subset", "superset"]
ApprovalAction = Literal["approve", "deny", "edit", "stop"]


def _as_text(value: Any) -> Any:
    """A number is its text (``contains: 42`` means "42"); a boolean stays an error."""
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def _as_list(value: Any) -> list[Any]:
    """One text or a list of texts."""
    if isinstance(value, list):
        return [_as_text(item) for item in value]
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return [_as_text(value)]
    raise ValueError("needs a text or a list of texts")


def _calls_from_names(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    return [{"name": call} if isinstance(call, str) else call for call in value]


def _answers_from_names(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    return [{"tool": answer} if isinstance(answer, str) else answer for answer in value]


def _model_from_id(value: Any) -> Any:
    return {"id": value} if isinstance(value, str) else value


def _regex(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    return pattern


Text = Annotated[str, Field(min_length=1)]
Texts = Annotated[list[Text], BeforeValidator(
    _as_list, json_schema_input_type=Text | float | list[Text | float])]


class EvalSpec(BaseModel):
    """Base of the case models: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ExpectedCall(EvalSpec):
    name: str = Field(min_length=1, description="The tool's generated name, e.g. notes__add_note.")
    args: dict[str, Any] = Field(
        default_factory=dict,
        description="Arguments to check: equal values for the keys given, or {matches: REGEX}.",
    )

    @field_validator("args")
    @classmethod
    def _regexes_compile(cls, args: dict[str, Any]) -> dict[str, Any]:
        for value in args.values():
            if is_regex_matcher(value):
                _regex(value["matches"])
        return args


class AnswerSpec(EvalSpec):
    contains: Texts = Field(default_factory=list, description="Text the answer must contain.")
    not_contains: Texts = Field(default_factory=list, description="Text the answer must not contain.")
    matches: Annotated[str, BeforeValidator(_regex)] | None = Field(
        None, description="A regular expression the answer must match (searched, not anchored)."
    )
    json_schema: dict[str, Any] | None = Field(
        None, description="The answer must be JSON valid against this schema."
    )

    @field_validator("json_schema")
    @classmethod
    def _schema_is_valid(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is not None:
            try:
                jsonschema.validators.validator_for(schema).check_schema(schema)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
        return schema


class ExpectSpec(EvalSpec):
    tools: Annotated[list[ExpectedCall], BeforeValidator(
        _calls_from_names, json_schema_input_type=list[Text | ExpectedCall])] | None = Field(
        None, description="The expected tool calls (a name, or {name, args})."
    )
    match: MatchMode = Field(
        "subset",
        description="How 'tools' compares to the calls made: strict (same calls, same order), "
        "unordered (same calls), subset (no call beyond those), superset (at least those).",
    )
    answer: AnswerSpec | None = Field(None, description="Checks on the final answer.")
    no_tool_errors: bool = Field(
        False, strict=True, description="Every tool call must succeed (true or false)."
    )
    max_tool_calls: int | None = Field(None, ge=0, description="At most this many tool calls.")
    output: dict[Text, Any] | None = Field(
        None, description="Fields the answer object (the manifest's 'output:') must have: a path "
        "(items.0.name) and its value, equal or {matches: REGEX}."
    )
    agents: list[Text] | None = Field(
        None, description="The agents of 'agents:' that ran, in order: one name per run (called as "
        "a tool, or as a workflow's step; a workflow before its steps)."
    )
    agents_match: MatchMode = Field(
        "strict",
        description="How 'agents' compares to the runs: strict (the same runs in the same order), "
        "unordered (the same runs), subset (no run beyond those), superset (at least those).",
    )

    @field_validator("output")
    @classmethod
    def _output_regexes_compile(cls, output: dict[str, Any] | None) -> dict[str, Any] | None:
        for value in (output or {}).values():
            if is_regex_matcher(value):
                _regex(value["matches"])
        return output


class JudgeSpec(EvalSpec):
    criteria: str = Field(min_length=1, description="What a good conversation does, for the judge.")
    model: Annotated[ModelSpec, BeforeValidator(
        _model_from_id, json_schema_input_type=Text | ModelSpec)] | None = Field(
        None, description="The judge's model (default: the manifest's)."
    )


class ApprovalAnswer(EvalSpec):
    """How one approval is answered when the case runs: the Nth approval asked gets the Nth answer."""

    tool: str = Field(min_length=1, description="The tool whose call is asked about, e.g. "
                      "notes__delete_note; another tool asked here fails the case.")
    action: ApprovalAction = Field(
        "approve", description="approve; deny (with an optional 'reason'); edit (run it with "
        "'args' instead); stop (the turn ends at the question, as Ctrl-C ends it: the call does "
        "not run, and the next input starts a new turn).")
    reason: str | None = Field(None, description="Why it was denied (with action: deny).")
    args: dict[str, Any] | None = Field(None, description="The arguments it runs with (with "
                                        "action: edit).")

    @model_validator(mode="after")
    def _fields_fit_the_action(self) -> ApprovalAnswer:
        if self.action == "edit" and self.args is None:
            raise ValueError("action 'edit' needs 'args': the arguments the call runs with")
        if self.args is not None and self.action != "edit":
            raise ValueError("'args' is only used with action 'edit'")
        if self.reason is not None and self.action != "deny":
            raise ValueError("'reason' is only used with action 'deny'")
        return self

    def resume(self) -> dict[str, Any]:
        """The graph's resume value for this answer (not for ``stop``, which resumes nothing)."""
        if self.action == "deny":
            return {"action": "deny", "reason": self.reason}
        if self.action == "edit":
            return {"action": "edit", "args": self.args}
        return {"action": "approve"}


class CaseSpec(EvalSpec):
    name: str = Field(pattern=CASE_NAME_PATTERN, description="Unique name; names its cassette file.")
    description: str | None = None
    input: Annotated[Texts, Field(min_length=1)] = Field(
        description="One user message, or a list of turns.")
    vars: dict[str, Any] = Field(default_factory=dict, description="Overrides prompts.vars.")
    max_steps: int | None = Field(None, ge=1, description="Model calls allowed per turn.")
    expect: ExpectSpec = Field(default_factory=ExpectSpec)
    judge: JudgeSpec | None = Field(None, description="Criteria graded by a model.")
    approvals: Annotated[list[ApprovalAnswer], BeforeValidator(
        _answers_from_names, json_schema_input_type=list[Text | ApprovalAnswer])] | None = Field(
        None, description="The answers to the approvals asked, in order, across the turns (a tool "
        "name approves). Without it every call that needs approval is approved; with it, an "
        "approval the list does not answer, or an answer no approval used, fails the case.")


class CaseFileSpec(EvalSpec):
    manifest: str | None = Field(
        None, pattern=MANIFEST_NAME_PATTERN, description="The manifest these cases are for: its file "
        "name, in the folder that holds evals/ (research.yaml). Without it, the cases are every "
        "manifest's of that folder.")
    cases: list[CaseSpec] = Field(min_length=1, description="The cases of this file.")


def is_regex_matcher(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {"matches"} and isinstance(value["matches"], str)


MATCHER_KEYS = ("matches",)


def matcher_problems(spec: CaseSpec) -> list[tuple[tuple[str | int, ...], str, bool]]:
    """Expected values that look like a matcher but are none (a misspelt ``matches``, ``matches``
    with another key or without a text), each with its path in the case and whether it points at
    a key: compared as literal values, they would fail for a reason nobody wrote."""
    expected: list[tuple[tuple[str | int, ...], Any]] = [
        (("expect", "tools", index, "args", key), value)
        for index, call in enumerate(spec.expect.tools or []) for key, value in call.args.items()]
    expected += [(("expect", "output", path), value) for path, value in (spec.expect.output or {}).items()]
    found = []
    for where, value in expected:
        if not isinstance(value, Mapping) or is_regex_matcher(value):
            continue
        keys = [str(key) for key in value]
        if "matches" in keys and not isinstance(value["matches"], str):
            found.append(((*where, "matches"), "a matcher is {matches: REGEX}: its value is a text", False))
        elif "matches" in keys:
            other = next(key for key in keys if key != "matches")
            found.append(((*where, other), f"unknown matcher key '{other}': a matcher is "
                          "{matches: REGEX} alone", True))
        elif len(keys) == 1 and (hint := did_you_mean(keys[0], MATCHER_KEYS)):
            found.append(((*where, keys[0]), f"unknown matcher '{keys[0]}'{hint}; the value would be "
                          "compared as an object with that key", True))
    return found


NO_OUTPUT = ("expect.output checks the answer object, but the manifest has no 'output:' (give it "
             "output: {schema: …}, or check the text with expect.answer)")


@dataclass(frozen=True)
class Case:
    """A case, the file it was read from, and where it is written there."""

    spec: CaseSpec
    file: Path
    index: int = 0
    source: SourceMap | None = field(default=None, compare=False, repr=False)

    def problems_against(self, declared_vars: Collection[str], tools: Collection[str],
                         agents: Collection[str] = ()) -> list[Problem]:
        """What the case names that the agent does not have: a var ``prompts.vars`` does not
        declare, an expected tool the agent does not offer (known only once its servers run), an
        expected agent that ``agents:`` does not declare."""
        found: list[Problem] = []
        for key in self.spec.vars:
            if key not in declared_vars:
                found.append(self._problem(("vars", key), f"prompts.vars has no '{key}'"
                                           f"{did_you_mean(key, list(declared_vars))}; a case can "
                                           "only override the vars the manifest declares", at_key=True))
        named: list[tuple[tuple[str | int, ...], str]] = [(("expect", "tools", index, "name"), call.name)
                 for index, call in enumerate(self.spec.expect.tools or [])]
        named += [(("approvals", index, "tool"), answer.tool)
                  for index, answer in enumerate(self.spec.approvals or [])]
        for where, name in named:
            if name not in tools:
                found.append(self._problem(where, f"the agent offers no tool '{name}'"
                                           f"{did_you_mean(name, list(tools))}"))
        return found + self.agent_problems(agents)

    def agent_problems(self, agents: Collection[str]) -> list[Problem]:
        """Each expected agent that ``agents:`` does not declare, with the closest name."""
        found: list[Problem] = []
        for index, name in enumerate(self.spec.expect.agents or []):
            if name not in agents:
                declared = f"{did_you_mean(name, list(agents))}" if agents else " (it declares none)"
                found.append(self._problem(("expect", "agents", index), f"the manifest's agents: has "
                                           f"no '{name}'{declared}"))
        return found

    def problems_with(self, manifest: Manifest) -> list[Problem]:
        """What the case expects that the manifest cannot give, known before anything runs: an
        answer object (``expect.output``) from a manifest without ``output:``."""
        if self.spec.expect.output is not None and manifest.output is None:
            return [self._problem(("expect", "output"), NO_OUTPUT, at_key=True)]
        return []

    def _problem(self, path: tuple[str | int, ...], message: str, *, at_key: bool = False) -> Problem:
        where = ("cases", self.index, *path)
        if self.source is None:
            return Problem(str(self.file), 1, 1, ".".join(map(str, where)), message)
        return self.source.problem(where, message, at_key=at_key)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def cassette_path(self) -> Path:
        return self.file.parent / "cassettes" / f"{self.name}.yaml"


def find_case_files(manifest_path: Path, *, every: bool = False) -> list[Path]:
    """The case files in the ``evals/`` folder next to the manifest that are its own: those naming
    no manifest (``manifest:``) or this one. A file naming a manifest the folder does not hold is
    every manifest's, so that loading it says so. ``every``: all of the folder's case files."""
    folder = manifest_path.parent / CASES_FOLDER
    found = sorted(p for p in folder.glob("*.y*ml") if p.suffix in (".yaml", ".yml"))
    if every:
        return found
    return [path for path in found if named_manifest(path) in (None, manifest_path.name)
            or not (manifest_path.parent / str(named_manifest(path))).is_file()]


def _lenient_document(path: Path) -> dict[str, Any]:
    """A case file's top level, read leniently: empty for a file that is not valid YAML or no
    mapping (loading it reports why)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def named_manifest(path: Path) -> str | None:
    """The manifest a case file names (``manifest:``); None for none, or one that is no text."""
    named = _lenient_document(path).get("manifest")
    return named if isinstance(named, str) else None


def case_names_in(path: Path) -> list[str]:
    """The names of a case file's cases, read leniently (see :func:`_lenient_document`)."""
    cases = _lenient_document(path).get("cases")
    return [c["name"] for c in cases if isinstance(c, dict) and isinstance(c.get("name"), str)] \
        if isinstance(cases, list) else []


def other_manifest_problems(manifest_path: Path, cases: list[Case]) -> list[Problem]:
    """Each case file (given by name to ``mcp-run test``) whose ``manifest:`` names another
    manifest than ``manifest_path``, at that key: its cases are that one's."""
    found: dict[Path, Problem] = {}
    for case in cases:
        named = named_manifest(case.file)
        if named in (None, manifest_path.name) or case.file in found or case.source is None:
            continue
        found[case.file] = case.source.problem(("manifest",), f"the cases of this file are for {named}, "
                                               f"not {manifest_path.name}: run `mcp-run test {named}`")
    return list(found.values())


def shared_name_problems(manifest_path: Path, cases: list[Case]) -> list[Problem]:
    """Each case whose name a case file of another manifest, in the same ``evals/`` folder, uses
    too: the folder's cases share its cassettes (``cassettes/NAME.yaml``)."""
    own = {case.file for case in cases}
    found: list[Problem] = []
    for path in find_case_files(manifest_path, every=True):
        if (path := path.resolve()) in own:
            continue
        names = set(case_names_in(path))
        found += [case._problem(("name",), f"case name '{case.name}' is used in {path} too: the cases "
                                "of one evals/ folder share its cassettes (cassettes/NAME.yaml), whichever "
                                "manifest they are for; rename one")
                  for case in cases if case.name in names and case.file.parent == path.parent]
    return found


def load_cases(paths: list[Path], *, environ: Mapping[str, str] | None = None) -> list[Case]:
    """Every case of ``paths``; every problem of every file at once (ManifestError)."""
    problems: list[Problem] = []
    cases: list[Case] = []
    first_seen: dict[str, Problem] = {}
    for path in paths:
        try:
            found, source = _load_file(path, environ)
        except ManifestError as exc:
            problems += exc.problems
            continue
        for index, case in enumerate(found):
            at = source.problem(("cases", index, "name"), "")
            if case.name in first_seen:
                seen = first_seen[case.name]
                problems.append(source.problem(("cases", index, "name"), f"case name '{case.name}' "
                                               f"is used twice (first at {seen.file}:{seen.line})"))
                continue
            first_seen[case.name] = at
            problems += [source.problem(("cases", index, *where), message, at_key=at_key)
                         for where, message, at_key in matcher_problems(case)]
            cases.append(Case(case, path.resolve(), index, source))
    if problems:
        raise ManifestError(problems)
    return cases


def manifest_case_problems(cases: list[Case], manifest: Manifest) -> list[Problem]:
    """Every problem of ``cases`` against ``manifest`` (see :meth:`Case.problems_with`)."""
    return [problem for case in cases for problem in case.problems_with(manifest)]


def with_manifest_problems(exc: ManifestError, paths: list[Path], manifest: Manifest,
                           *, environ: Mapping[str, str] | None = None) -> ManifestError:
    """``exc`` (the case files failed to load) with what their cases expect that ``manifest``
    cannot give, read from the documents: every problem in one run, not the rest after a fix."""
    if manifest.output is not None:
        return exc
    reported = {(problem.file, problem.path) for problem in exc.problems}
    found: list[Problem] = []
    for path in paths:
        try:
            data, source, _ = read_located_yaml(read_document(path, "the case file"), file=str(path),
                                                environ=environ)
        except ManifestError:
            continue  # not readable: loading reported it
        cases = data.get("cases")
        for index, case in enumerate(cases if isinstance(cases, list) else []):
            expect = case.get("expect") if isinstance(case, dict) else None
            if isinstance(expect, dict) and "output" in expect:
                problem = source.problem(("cases", index, "expect", "output"), NO_OUTPUT, at_key=True)
                if (problem.file, problem.path) not in reported:
                    found.append(problem)
    return ManifestError(exc.problems + found) if found else exc


def case_folder_problems(manifest_path: Path, manifest: Manifest,
                         *, environ: Mapping[str, str] | None = None) -> list[Problem]:
    """What ``validate`` reports of the case files in ``evals/`` next to the manifest: each one's
    problems, and what their cases expect that the manifest cannot give."""
    paths = find_case_files(manifest_path)
    try:
        cases = load_cases(paths, environ=environ)
    except ManifestError as exc:
        return list(with_manifest_problems(exc, paths, manifest, environ=environ).problems)
    # The expected agents too (``mcp-run test`` says them when a case runs): ``manifest`` is the
    # checked one, with the agents other files bring.
    return manifest_case_problems(cases, manifest) + shared_name_problems(manifest_path, cases) + [
        problem for case in cases for problem in case.agent_problems(manifest.agents)]


def _load_file(path: Path, environ: Mapping[str, str] | None) -> tuple[list[CaseSpec], SourceMap]:
    display = str(path)
    raw = read_document(path, "the case file")
    if not raw.strip():
        raise ManifestError([Problem(display, 1, 1, "", "the case file is empty; it needs 'cases:'")])
    data, source, problems = read_located_yaml(raw, file=display, environ=environ)
    try:
        parsed = CaseFileSpec.model_validate(data)
    except ValidationError as exc:
        reported = {p.path for p in problems}
        located = located_problems(exc, data, source, root=CaseFileSpec)
        raise ManifestError(problems + [p for p in located if p.path not in reported]) from None
    folder = path.parent.parent  # where the manifests of this evals/ folder are
    if parsed.manifest is not None and not (folder / parsed.manifest).is_file():
        beside = sorted(p.name for p in folder.glob("*.y*ml") if p.suffix in (".yaml", ".yml"))
        problems.append(source.problem(("manifest",), f"no manifest '{parsed.manifest}' in {folder}"
                                       f"{did_you_mean(parsed.manifest, beside)}; the cases of this file "
                                       "are for the manifest named here, beside the evals/ folder"))
    if problems:
        raise ManifestError(problems)
    return list(parsed.cases), source


def evals_json_schema() -> dict[str, Any]:
    """The JSON Schema of case files, for editors (yaml-language-server) and docs."""
    schema = CaseFileSpec.model_json_schema(by_alias=True)
    schema["patternProperties"] = {"^x-": {}}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://mcp-run.dev/schemas/evals.schema.json",
        **schema,
    }
