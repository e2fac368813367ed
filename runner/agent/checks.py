"""Everything ``mcp-run validate`` checks without starting anything: the manifest, the templates
it names, the import paths it names, the scripted model's script and the model ids.

Some findings are warnings, not errors: what may be put right before the run without touching the
manifest (a stdio command not installed yet, a provider package or an API key variable missing),
and filter entries no name can match (a blank or malformed glob), which the run ignores.

Kept light on purpose (no MCP SDK, no LangChain at import time) so validation is quick; LangChain
is imported only to check a provider model's id.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner import telemetry
from runner.agent.included import Merged, check_included, merge_included, own_origins
from runner.agent.output_contract import (
    SCHEMA_PATH,
    OutputContract,
    contract_files,
    output_contract,
    output_warnings,
    schema_file_problems,
    schema_problems,
)
from runner.errors import ManifestError, ModelError, Problem
from runner.manifest import (
    OFFLINE_ID,
    PYTHON_COMMANDS,
    SCRIPTED_ID,
    Manifest,
    ModelAgentSpec,
    ModelSpec,
    ParallelSpec,
    RouterSpec,
    StdioServerSpec,
    did_you_mean,
)
from runner.manifest.loading import (
    LoadedManifest,
    format_path,
    load_manifest_partly,
    read_document,
    read_located_yaml,
)
from runner.models.pricing import unpriced_budget_warnings
from runner.tools.filters import ImportPathError, glob_defect, load_import_path
from runner.tools.policy import rule_warnings, tool_glob_findings

if TYPE_CHECKING:  # Jinja is imported for a manifest that has a system template, not for others
    from runner.prompts.system import SourceLocation, SystemTemplate


@dataclass(frozen=True)
class CheckedAgent:
    """A manifest that passed every check, with the system template compiled while checking, and
    the files the agent is built from (what watch mode follows)."""

    loaded: LoadedManifest
    system_template: SystemTemplate | None
    warnings: list[Problem] = field(default_factory=list)
    templates: frozenset[Path] = frozenset()  # files of the system template (itself, includes, ...)
    modules: frozenset[Path] = frozenset()  # local Python modules named by import paths
    agent_templates: Mapping[str, SystemTemplate] = field(default_factory=dict)  # of agents with a prompt
    output: OutputContract | None = None  # the final answer's schema (``output:``), read and checked
    # What agents from other files ('file:', runner.agent.included) brought: their files, the
    # servers only they use (the main agent is not given them), where each server and agent is defined.
    included: frozenset[Path] = frozenset()
    hidden_servers: frozenset[str] = frozenset()
    origins: Mapping[tuple[str, str], tuple[str, int]] = field(default_factory=dict)
    # What defines each agent of 'agents:' and the files it is built from (runner.agent.included),
    # so that a reload can tell which agents an edit touched.
    agent_definitions: Mapping[str, Any] = field(default_factory=dict)
    agent_files: Mapping[str, frozenset[Path]] = field(default_factory=dict)

    @property
    def files(self) -> frozenset[Path]:
        """The manifest and every file it depends on (other manifests' too), resolved."""
        files = frozenset({self.loaded.path.resolve()}) | self.templates | self.modules
        return files | contract_files(self.loaded) | self.included


def check_agent(path: str | Path, *, environ: Mapping[str, str] | None = None) -> LoadedManifest:
    """Validate the manifest and everything it names that can be checked without running it."""
    return checked_agent(path, environ=environ).loaded


def checked_agent(path: str | Path, *, environ: Mapping[str, str] | None = None, turns: bool = True,
                  including: tuple[Path, ...] = ()) -> CheckedAgent:
    """:func:`check_agent`, keeping what the checks built for the run that follows, and warnings.
    ``turns=False`` (commands that run no turn) lets telemetry without its packages pass: those
    commands warn and run without it. Agents from other files (``file:``) are checked the same
    way and merged in (:mod:`runner.agent.included`); ``including`` is the chain of manifests
    that include this one."""
    environ = os.environ if environ is None else environ
    loaded, load_problems = load_manifest_partly(path, environ=environ)
    if load_problems or loaded is None:
        # The checks that follow loading run on the parts that are valid, so that one run reports
        # every problem it can locate; what depends on an invalid part is not checked.
        found = load_problems + document_problems(Path(path), load_problems, environ)
        if loaded is not None:
            found += _built(loaded, environ, turns, including).problems
        raise ManifestError(list(dict.fromkeys(found)))
    built = _built(loaded, environ, turns, including)
    if built.problems:
        raise ManifestError(built.problems)
    templates: frozenset[Path] = frozenset()
    if loaded.manifest.prompts.system is not None:
        from runner.prompts.system import template_files

        templates = frozenset(path.resolve() for path in template_files(loaded.manifest, loaded.base_dir))
    for manifest in agent_prompt_manifests(loaded.manifest).values():
        from runner.prompts.system import template_files  # Jinja: only for templates

        templates |= frozenset(path.resolve() for path in template_files(manifest, loaded.base_dir))
    merged = built.merged
    warnings = built.warnings + unpriced_budget_warnings(loaded) + output_warnings(loaded)
    warnings = sorted(warnings + command_warnings(loaded, environ) + glob_warnings(loaded), key=_order)
    return CheckedAgent(replace(loaded, manifest=merged.manifest), built.template, warnings + merged.warnings,
                        templates, local_modules(loaded),
                        agent_templates={**built.agent_templates, **merged.templates},
                        output=built.output, included=merged.files, hidden_servers=merged.hidden_servers,
                        origins=merged.origins, agent_definitions=merged.definitions,
                        agent_files={**agent_prompt_files(loaded), **merged.agent_files})


@dataclass(frozen=True)
class _Built:
    """What the checks after loading built and found: the compiled templates, the output
    contract, the manifest with the agents of other files merged in, problems and warnings."""

    template: SystemTemplate | None
    agent_templates: dict[str, SystemTemplate]
    output: OutputContract | None
    merged: Merged
    problems: list[Problem]
    warnings: list[Problem]


def _built(loaded: LoadedManifest, environ: Mapping[str, str], turns: bool,
           including: tuple[Path, ...]) -> _Built:
    """The checks of a loaded manifest (or of its valid parts): its templates, import paths,
    scripts, output schema, model ids, telemetry packages and the agents of other files."""

    def check(other: Path, chain: tuple[Path, ...]) -> CheckedAgent:
        return checked_agent(other, environ=environ, turns=turns, including=chain)

    included, problems = check_included(loaded, check, including)
    template: SystemTemplate | None = None
    if loaded.manifest.prompts.system is not None:
        from runner.prompts.system import compile_system_prompt

        try:
            template = compile_system_prompt(loaded.manifest, loaded.base_dir, system_location(loaded))
        except ManifestError as exc:
            problems += exc.problems
    agent_templates, agent_problems = compile_agent_prompts(loaded)
    problems += agent_problems + join_template_problems(loaded)
    for where, import_path in import_paths(loaded.manifest):
        try:
            load_import_path(import_path, base_dir=loaded.base_dir)
        except ImportPathError as exc:
            problems.append(loaded.source.problem(where, str(exc)))
    for where, model in model_specs(loaded.manifest):
        if model.id == "scripted" and model.script and not (loaded.base_dir / model.script).is_file():
            missing = f"script file '{model.script}' not found"
            problems.append(loaded.source.problem((*where, "script"), missing))
        elif model.id == "scripted" and model.script:
            try:
                from runner.models import load_script  # LangChain: only for scripted models

                load_script(loaded.base_dir / model.script)
            except ManifestError as exc:
                problems += exc.problems
    contract: OutputContract | None = None
    try:
        contract = output_contract(loaded)
    except ManifestError as exc:
        problems += exc.problems
    model_problems, warnings = model_findings(loaded, environ)
    problems += model_problems
    if turns:
        problems += telemetry.package_problems(loaded)
    merged, merge_problems = merge_included(loaded, included, own_origins(loaded))
    problems += merge_problems + modelless_agent_problems(merged.manifest, merged.origins)
    return _Built(template, agent_templates, contract, merged, problems, warnings)


def document_problems(path: Path, reported: list[Problem], environ: Mapping[str, str]) -> list[Problem]:
    """What the checks that follow loading find in a manifest that failed to load, read from its
    document, so that one run reports every problem: the output schema's (inline, or its file
    next to the manifest), and ``policy`` rules that can match no tool (worded as the warnings they
    are on a valid manifest). A part already reported is not checked again."""
    try:
        data, source, _ = read_located_yaml(read_document(path, "the manifest"), file=str(path),
                                           environ=environ)
    except ManifestError:
        return []  # not readable as YAML at all: what loading reported is all there is
    taken = {problem.path for problem in reported}

    def fresh(where: str) -> bool:
        return not any(path == where or path.startswith((f"{where}.", f"{where}[")) for path in taken)

    found: list[Problem] = []
    output = data.get("output")
    schema = output.get("schema") if isinstance(output, dict) else None
    if isinstance(schema, dict) and fresh("output.schema"):
        found += schema_problems(schema, source, SCHEMA_PATH)
    elif isinstance(schema, str) and fresh("output.schema"):  # a file: checked as loading would
        found += schema_file_problems(path.parent, schema.strip(), source)
    rules = data.get("policy")
    agent, servers = data.get("agent"), data.get("servers")
    separator = agent.get("tool_separator", "__") if isinstance(agent, dict) else "__"
    if isinstance(rules, list) and isinstance(separator, str) and separator:
        globs = [(index, rule["tool"]) for index, rule in enumerate(rules)
                 if isinstance(rule, dict) and isinstance(rule.get("tool"), str)
                 and fresh(format_path(("policy", index, "tool")))]
        found += [source.problem(where, f"warning: {message}") for where, message in tool_glob_findings(
            globs, servers if isinstance(servers, dict) else {}, separator, bool(data.get("local_tools")))]
    return found


def model_specs(manifest: Manifest) -> list[tuple[tuple[str, ...], ModelSpec]]:
    """The manifest's model and those its agents name, each with where it is written."""
    found: list[tuple[tuple[str, ...], ModelSpec]] = [(("model",), manifest.model)]
    for name, spec in sorted(manifest.agents.items()):
        model = getattr(spec, "model", None)
        if model is not None:
            found.append((("agents", name, "model"), model))
    return found


def join_template_problems(loaded: LoadedManifest) -> list[Problem]:
    """Each ``parallel`` workflow's ``template`` that is not valid Jinja2, located at it (found
    here, not when the workflow first joins its answers)."""
    templates = {name: spec.template for name, spec in loaded.manifest.agents.items()
                 if isinstance(spec, ParallelSpec) and spec.template is not None}
    if not templates:
        return []
    from jinja2 import TemplateSyntaxError
    from jinja2.sandbox import SandboxedEnvironment

    problems = []
    for name, template in templates.items():
        try:
            SandboxedEnvironment(autoescape=False).parse(template)
        except TemplateSyntaxError as exc:
            message = f"the template is not valid Jinja2 (line {exc.lineno}): {exc.message}"
            problems.append(loaded.source.problem(("agents", name, "template"), message))
    return problems


def agent_prompt_files(loaded: LoadedManifest) -> dict[str, frozenset[Path]]:
    """The template files of each agent's ``prompt`` (itself and what it includes), resolved."""
    manifests = agent_prompt_manifests(loaded.manifest)
    if not manifests:
        return {}
    from runner.prompts.system import template_files  # Jinja: only for templates

    return {name: frozenset(path.resolve() for path in template_files(manifest, loaded.base_dir))
            for name, manifest in manifests.items()}


def modelless_agent_problems(manifest: Manifest, origins: Mapping[tuple[str, str], tuple[str, int]]
                             ) -> list[Problem]:
    """Agents (and routers) that name no model while the manifest's model is ``scripted``: they
    would play the main agent's script, and the run would fail when its turns run out. Each is
    located where it is defined (in another file for an agent that came from one)."""
    if manifest.model.id != SCRIPTED_ID or manifest.model.script is None:
        return []
    problems = []
    for name, spec in sorted(manifest.agents.items()):
        if isinstance(spec, ModelAgentSpec | RouterSpec) and spec.model is None:
            file, line = origins.get(("agents", name), ("", 1))
            what = "agent" if isinstance(spec, ModelAgentSpec) else "router"
            problems.append(Problem(file, line, 1, f"agents.{name}", (
                f"this {what} has no model of its own, and the manifest's model is the scripted one "
                f"whose script ('{manifest.model.script}') plays the main agent's turns: give it "
                "'model' (another script, 'offline', or a provider's model)")))
    return problems


def agent_prompt_manifests(manifest: Manifest) -> dict[str, Manifest]:
    """For each agent with a prompt, the manifest as that agent's own: its name, description and
    prompt in place of the main agent's (a template sees ``agent.name`` as the agent's)."""
    return {
        name: manifest.model_copy(update={
            "name": name, "description": spec.description,
            "prompts": manifest.prompts.model_copy(update={"system": spec.prompt}),
        })
        for name, spec in sorted(manifest.agents.items())
        if isinstance(spec, ModelAgentSpec) and spec.prompt is not None
    }


def compile_agent_prompts(loaded: LoadedManifest) -> tuple[dict[str, SystemTemplate], list[Problem]]:
    """The compiled prompt of each agent that has one, and the problems of those that fail, each
    at the agent's ``prompt``."""
    compiled: dict[str, SystemTemplate] = {}
    problems: list[Problem] = []
    manifests = agent_prompt_manifests(loaded.manifest)
    if not manifests:
        return compiled, problems
    from runner.prompts.system import compile_system_prompt

    for name, manifest in manifests.items():
        where = ("agents", name, "prompt")
        try:
            template = compile_system_prompt(manifest, loaded.base_dir, prompt_location(loaded, where))
        except ManifestError as exc:
            problems += [replace(problem, path=".".join(where)) if problem.path == "prompts.system"
                         else problem for problem in exc.problems]
            continue
        if template is not None:
            compiled[name] = template
    return compiled, problems


def _order(problem: Problem) -> tuple[str, int, int, str]:
    return (problem.file, problem.line, problem.column, problem.path)


def model_findings(loaded: LoadedManifest, environ: Mapping[str, str]) -> tuple[list[Problem], list[Problem]]:
    """(problems, warnings) of every model id (fallbacks, the agents' and ``context.summarize_with``
    too): a provider init_chat_model does not know is a problem; its package not installed or its
    API key variable not set is a warning."""
    ids: list[tuple[tuple[str | int, ...], str, ModelSpec | None]] = []
    for place, model in model_specs(loaded.manifest):
        ids.append((model_id_path(loaded, place), model.id, model))
        ids += [((*place, "fallbacks", index), other, None) for index, other in enumerate(model.fallbacks)]
    if (summarizer := loaded.manifest.context.summarize_with) is not None:
        ids.append((("context", "summarize_with"), summarizer, None))
    ids = [entry for entry in ids if entry[1] not in (OFFLINE_ID, SCRIPTED_ID)]
    problems: list[Problem] = []
    warnings: list[Problem] = []
    if ids:
        from runner.models.registry import model_requirements, provider_of
    for where, model_id, spec in ids:
        try:
            provider = provider_of(model_id)
        except ModelError as exc:
            problems.append(loaded.source.problem(where, _with_built_in_suggestion(model_id, str(exc))))
            continue
        missing = model_requirements(model_id, provider, spec=spec, environ=environ)
        warnings += [loaded.source.problem(where, message) for message in missing]
    return problems, warnings


def model_id_path(loaded: LoadedManifest, place: tuple[str, ...] = ("model",)) -> tuple[str, ...]:
    """Where the manifest writes the id of the model at ``place``: ``model.id``, or ``model`` when
    it is a string."""
    return (*place, "id") if (*place, "id") in loaded.source.values else place


def model_id_problem(model_id: str) -> str | None:
    """Why ``model_id`` names no model (an unknown provider, no provider at all), or None; the same
    words as ``validate`` gives for the manifest's model."""
    if model_id in (OFFLINE_ID, SCRIPTED_ID):
        return None
    from runner.models.registry import provider_of

    try:
        provider_of(model_id)
    except ModelError as exc:
        return _with_built_in_suggestion(model_id, str(exc))
    return None


def _with_built_in_suggestion(model_id: str, message: str) -> str:
    """A near miss of a built-in model ('ofline') is suggested first, before the providers."""
    suggestion = "" if ":" in model_id else did_you_mean(model_id, (OFFLINE_ID, SCRIPTED_ID))
    named = f"model '{model_id}'"
    if not suggestion:
        return message
    return named + suggestion + message.removeprefix(named) if message.startswith(named) else \
        f"{named}{suggestion}: {message}"



def command_warnings(loaded: LoadedManifest, environ: Mapping[str, str]) -> list[Problem]:
    """Stdio commands, container engines and bubblewrap that cannot be run as things are (they may
    be installed before the run)."""
    warnings: list[Problem] = []
    for key, spec in sorted(loaded.manifest.servers.items()):
        if not isinstance(spec, StdioServerSpec):
            continue
        if spec.container is not None or spec.sandbox is not None:
            warnings += _isolation_warnings(loaded, key, spec, environ.get("PATH", os.defpath))
        if spec.container is not None or spec.command in PYTHON_COMMANDS:
            continue  # in a container, the command is the image's, not the host's
        folder = loaded.base_dir / spec.cwd if spec.cwd else loaded.base_dir
        reason = _unrunnable(spec.command, folder, spec.env.get("PATH", environ.get("PATH", os.defpath)))
        if reason:
            warnings.append(loaded.source.problem(
                ("servers", key, "command"), f"command '{spec.command}' {reason}, so the server "
                "cannot start as things are (fine if it is installed before the run)"))
    return warnings


ENGINES = ("docker", "podman")  # the container engines a server may run in, in the order tried


def _isolation_warnings(
    loaded: LoadedManifest, key: str, spec: StdioServerSpec, search_path: str
) -> list[Problem]:
    """A container engine, or bubblewrap, that is not on the PATH mcp-run runs with."""
    later = "so the server cannot start as things are (fine if it is installed before the run)"
    if spec.container is not None:
        wanted = spec.container.engine
        if any(shutil.which(name, path=search_path) for name in ((wanted,) if wanted else ENGINES)):
            return []
        missing = (f"container engine '{wanted}' is not found on PATH" if wanted else
                   "no container engine is installed (neither docker nor podman is on PATH)")
        return [loaded.source.problem(("servers", key, "container"), f"{missing}, {later}")]
    if shutil.which("bwrap", path=search_path) is None:
        return [loaded.source.problem(("servers", key, "sandbox"),
                                      f"bubblewrap (bwrap) is not found on PATH, {later}")]
    return []


def glob_warnings(loaded: LoadedManifest) -> list[Problem]:
    """Filter entries (``tools.only`` / ``except`` / ``approve`` / ``pin``, ``prompts.only`` /
    ``except``) that match nothing whatever the server offers: blank, or a malformed glob."""
    warnings: list[Problem] = []
    for key, spec in loaded.manifest.servers.items():
        for part, kind, names in (("tools", "tool", spec.tools), ("prompts", "prompt", spec.prompts)):
            lists = {"only": names.only, "except": names.except_}
            if part == "tools":
                lists |= {"approve": spec.tools.approve, "pin": spec.tools.pin}
            for name, entries in lists.items():
                for index, entry in enumerate(entries or ()):
                    if (defect := glob_defect(entry, kind)) is not None:
                        warnings.append(loaded.source.problem(("servers", key, part, name, index),
                                                              f"'{entry}' {defect}"))
    warnings += [loaded.source.problem(path, message) for path, message in rule_warnings(loaded.manifest)]
    return warnings


def _unrunnable(command: str, folder: Path, search_path: str) -> str | None:
    """Why ``command`` cannot be started from ``folder``, or None. A command with a folder part is a
    path (relative ones start from the server's working directory); a bare name is looked up on
    ``search_path``, the PATH the server process gets."""
    if os.sep in command or (os.altsep and os.altsep in command):
        program = folder / command
        if not program.exists():
            return "does not exist"
        if program.is_dir() or not os.access(program, os.X_OK):
            return "is not an executable file"
        return None
    return "is not found on PATH" if shutil.which(command, path=search_path) is None else None


def local_modules(loaded: LoadedManifest) -> frozenset[Path]:
    """The Python source files of the modules the manifest's import paths name, where local."""
    files = set()
    for _, import_path in import_paths(loaded.manifest):
        origin = _module_file(import_path.partition(":")[0], loaded.base_dir)
        if origin is not None:
            files.add(origin)
    return frozenset(files)


def _module_file(module: str, base_dir: Path) -> Path | None:
    added = str(base_dir) not in sys.path
    if added:
        sys.path.insert(0, str(base_dir))
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    finally:
        if added:
            sys.path.remove(str(base_dir))
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin).resolve()


def system_location(loaded: LoadedManifest) -> SourceLocation:
    """Where the text of ``prompts.system`` starts: a block scalar's (``|``, ``>``) on the line
    after its indicator, at its indentation."""
    return prompt_location(loaded, ("prompts", "system"))


def prompt_location(loaded: LoadedManifest, where: tuple[str, ...]) -> SourceLocation:
    """Where the text of the prompt at ``where`` starts (see :func:`system_location`)."""
    from runner.prompts.system import SourceLocation

    line, column = loaded.source.locate(where)
    try:
        lines = loaded.path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        lines = []
    if line < len(lines) and lines[line - 1][column - 1:column] in ("|", ">"):
        following = lines[line]
        return SourceLocation(loaded.source.file, line + 1, len(following) - len(following.lstrip()) + 1)
    return SourceLocation(loaded.source.file, line, column)


def import_paths(manifest: Manifest) -> list[tuple[tuple[str | int, ...], str]]:
    """Every import path the manifest names, with where it is written."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    for key, spec in manifest.servers.items():
        if spec.tools.filter:
            found.append((("servers", key, "tools", "filter"), spec.tools.filter))
        if spec.on_fallback:
            found.append((("servers", key, "on_fallback"), spec.on_fallback))
    found += [(("local_tools", index), path) for index, path in enumerate(manifest.local_tools)]
    return found
