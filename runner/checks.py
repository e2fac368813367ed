"""Everything ``mcp-run validate`` checks without starting anything: the manifest, the templates
it names, the import paths it names and the scripted model's script.

Kept light on purpose (no MCP SDK, no LangChain at import time) so validation is quick.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from runner.errors import ManifestError, Problem
from runner.loading import LoadedManifest, load_manifest
from runner.manifest import Manifest
from runner.prompts.system import SourceLocation, SystemTemplate, compile_system_prompt, template_files
from runner.tools.filters import ImportPathError, load_import_path


@dataclass(frozen=True)
class CheckedAgent:
    """A manifest that passed every check, with the system template compiled while checking, and
    the files the agent is built from (what watch mode follows)."""

    loaded: LoadedManifest
    system_template: SystemTemplate | None
    templates: frozenset[Path] = frozenset()  # files of the system template (itself, includes, ...)
    modules: frozenset[Path] = frozenset()  # local Python modules named by import paths

    @property
    def files(self) -> frozenset[Path]:
        """The manifest and every file it depends on, resolved."""
        return frozenset({self.loaded.path.resolve()}) | self.templates | self.modules


def check_agent(path: str | Path, *, environ: Mapping[str, str] | None = None) -> LoadedManifest:
    """Validate the manifest and everything it names that can be checked without running it."""
    return checked_agent(path, environ=environ).loaded


def checked_agent(path: str | Path, *, environ: Mapping[str, str] | None = None) -> CheckedAgent:
    """:func:`check_agent`, keeping what the checks built for the run that follows."""
    loaded = load_manifest(path, environ=environ)
    problems: list[Problem] = []
    template: SystemTemplate | None = None
    try:
        template = compile_system_prompt(loaded.manifest, loaded.base_dir, system_location(loaded))
    except ManifestError as exc:
        problems += exc.problems
    for where, import_path in import_paths(loaded.manifest):
        try:
            load_import_path(import_path, base_dir=loaded.base_dir)
        except ImportPathError as exc:
            problems.append(loaded.source.problem(where, str(exc)))
    model = loaded.manifest.model
    if model.id == "scripted" and model.script and not (loaded.base_dir / model.script).is_file():
        problems.append(loaded.source.problem(("model", "script"), f"script file '{model.script}' not found"))
    elif model.id == "scripted" and model.script:
        try:
            from runner.models import load_script  # LangChain: only for scripted models

            load_script(loaded.base_dir / model.script)
        except ManifestError as exc:
            problems += exc.problems
    if problems:
        raise ManifestError(problems)
    templates = frozenset(path.resolve() for path in template_files(loaded.manifest, loaded.base_dir))
    return CheckedAgent(loaded, template, templates, local_modules(loaded))


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
    line, column = loaded.source.locate(("prompts", "system"))
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
