"""Every error the runner raises on purpose is a class of the one documented tree in runner.errors."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import runner
from runner import errors
from runner.errors import RunnerError


def runner_modules() -> list[str]:
    return [info.name for info in pkgutil.walk_packages(runner.__path__, "runner.")
            if not info.name.startswith("runner.cli") and not info.name.endswith("__main__")]


def test_every_runner_error_class_is_defined_and_documented_in_runner_errors() -> None:
    for name in runner_modules():
        module = importlib.import_module(name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, RunnerError):
                assert value.__module__ == "runner.errors", f"{value.__qualname__} defined in {name}"
    documented = errors.__doc__ or ""
    for _, value in inspect.getmembers(errors, inspect.isclass):
        if issubclass(value, RunnerError):
            assert value.__name__ in documented, f"{value.__name__} missing from the tree"


def test_the_errors_module_points_to_nothing_outside_the_project() -> None:
    assert "DESIGN.md" not in inspect.getsource(errors)
