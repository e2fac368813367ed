"""The limits of one rendering of a system template: text made, loop steps, time.

Jinja's sandbox keeps a template from reaching Python's internals, not from exhausting the
machine: ``{{ 'x' * 3000000000 }}`` took 8 GB in `validate`, and two nested ``range(100000)``
loops ran for minutes. :class:`BoundedSandbox` adds the limits of :class:`RenderLimits`:

- text: no value the template makes (a string, a list, an integer's digits) and not all it writes
  together (macros and captured blocks included) may exceed ``chars``. Operations whose result
  size is known beforehand (``*``, ``**``, ``%``, ``center``, ``indent``, ``join``, ``replace``,
  format widths, …) are refused before they allocate it; the others are checked right after.
- steps: every ``for`` loop step counts; one rendering may take ``steps`` of them.
- time: a rendering running past ``seconds`` stops at its next loop step, call, attribute,
  operator or output.

Each limit raises :class:`jinja2.exceptions.SecurityError` from inside the template's code, so
the error is located at the template's line like any other rendering error.
"""

from __future__ import annotations

import inspect
import math
import re
import string
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import wraps
from typing import Any

from jinja2 import nodes
from jinja2.exceptions import SecurityError
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

from runner.sdk import TemplateParseSteps


@dataclass(frozen=True, slots=True)
class RenderLimits:
    """What one rendering of a system template may use."""

    chars: int = 1_000_000  # of any value made, and of all the text written
    steps: int = 1_000_000  # loop steps
    seconds: float = 10.0


# Operations refused before they run when their result would pass the limit: the size each makes.
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")
_NUMBER = re.compile(r"\d+")
_PASSED = frozenset({"context", "ctx", "eval_ctx", "environment", "env"})  # first parameters
_INDENT_LIMIT = 100  # tojson's indent: its text grows with the indent times every nested line


def _text_size(value: Any) -> int:
    return len(value) if isinstance(value, str | bytes) else 0


def _widths_of_percent(text: str, arguments: Any) -> int:
    """The largest width or precision a ``%`` format asks for (``*`` takes it from the arguments)."""
    largest = 0
    values = arguments if isinstance(arguments, tuple) else (arguments,)
    for star_or_width, star_or_precision in _PERCENT_SPEC.findall(text):
        for number in (star_or_width, star_or_precision):
            if number == "*":
                largest = max([largest, *(abs(v) for v in values if isinstance(v, int))])
            elif number:
                largest = max(largest, int(number))
    return largest


def _widths_of_format(text: str, args: Iterable[Any], kwargs: dict[str, Any]) -> int:
    """The largest width or precision a ``str.format`` text asks for; a nested field (``{:{n}}``)
    may take any argument as its width."""
    largest = 0
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError:
        return 0  # format() itself reports the broken text
    for _, _, spec, _ in fields:
        if not spec:
            continue
        if "{" in spec:
            numbers = [v for v in (*args, *kwargs.values()) if isinstance(v, int)]
            largest = max([largest, *(abs(v) for v in numbers)])
        largest = max([largest, *(int(n) for n in _NUMBER.findall(spec))])
    return largest


def _lines(text: Any) -> int:
    return str(text).count("\n") + 1


def _replaced_size(text: Any, old: Any, new: Any, count: Any = None) -> int:
    text, old, new = str(text), str(old), str(new)
    found = text.count(old) if old else len(text) + 1
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(text) + found * max(len(new) - len(old), 0)


def _joined_size(items: Any, separator: Any = "") -> int:
    if not isinstance(items, list | tuple):
        return 0  # an iterator: checked once joined (its items are bounded already)
    return sum(_text_size(item) for item in items) + len(str(separator)) * len(items)


def _indented_size(text: Any, width: Any = 4, *_: Any) -> int:
    step = len(width) if isinstance(width, str) else (width if isinstance(width, int) else 0)
    return len(str(text)) + step * _lines(text)


def _wrapped_size(text: Any, width: Any = 79, break_long_words: Any = True, wrapstring: Any = None,
                  *_: Any) -> int:
    breaks = len(str(text)) // max(width if isinstance(width, int) else 1, 1) + _lines(text)
    return len(str(text)) + breaks * len(str(wrapstring or "\n"))


def _translated_size(text: str, table: Any) -> int:
    if not isinstance(table, dict):
        return 0
    longest = max((_text_size(value) for value in table.values()), default=1)
    return len(text) * max(longest, 1)


# name of a filter -> the size of its result, from its arguments (as its signature names them)
_FILTER_SIZES: dict[str, Callable[[dict[str, Any]], int]] = {
    "center": lambda a: a.get("width", 80),
    "indent": lambda a: _indented_size(a["s"], a.get("width", 4)),
    "format": lambda a: _widths_of_percent(str(a["value"]), tuple(a.get("args", ()))),
    "join": lambda a: _joined_size(a["value"], a.get("d", "")),
    "replace": lambda a: _replaced_size(a["s"], a["old"], a["new"], a.get("count")),
    "wordwrap": lambda a: _wrapped_size(a["s"], a.get("width", 79), True, a.get("wrapstring")),
    "slice": lambda a: a["slices"] if isinstance(a["slices"], int) else 0,
    "batch": lambda a: a["linecount"] if isinstance(a["linecount"], int) else 0,
}

# name of a method of str or bytes -> the size of its result, from the text and the arguments
_METHOD_SIZES: dict[str, Callable[..., int]] = {
    "center": lambda text, width=0, *_: width,
    "ljust": lambda text, width=0, *_: width,
    "rjust": lambda text, width=0, *_: width,
    "zfill": lambda text, width=0: width,
    "expandtabs": lambda text, tabsize=8: len(text) + text.count("\t" if isinstance(text, str) else b"\t")
    * max(tabsize if isinstance(tabsize, int) else 0, 0),
    "replace": lambda text, old, new, count=-1: _replaced_size(text, old, new, count),
    "join": lambda text, items: _joined_size(list(items) if isinstance(items, list | tuple) else (), text),
    "translate": _translated_size,
}


class _Budget:
    """What the rendering under way has used so far."""

    def __init__(self, limits: RenderLimits) -> None:
        self.limits = limits
        self.deadline = 0.0
        self.steps = 0
        self.written = 0
        self.start()

    def start(self) -> None:
        self.deadline = time.monotonic() + self.limits.seconds
        self.steps = self.written = 0

    def step(self) -> None:
        """One loop step more."""
        self.steps += 1
        if self.steps > self.limits.steps:
            raise SecurityError(f"the template's loops ran more than the limit of "
                                f"{self.limits.steps:,} steps")
        self.tick()

    def write(self, text: str) -> None:
        """``text`` written, by the template or a macro or block it captures."""
        self.written += len(text)
        if self.written > self.limits.chars:
            raise SecurityError(f"the template wrote more than the limit of {self.limits.chars:,} "
                                "characters (macros and captured blocks included)")
        self.tick()

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise SecurityError(f"rendering took longer than the limit of {self.limits.seconds:g} s")

    def refuse_size(self, size: int, what: str = "a text of {:,} characters") -> None:
        """Refuse ``what`` (a phrase with a place for the number) when ``size`` is past the limit."""
        if size > self.limits.chars:
            raise SecurityError(f"the template would make {what.format(size)}; "
                                f"the limit is {self.limits.chars:,}")


class _Bounding(NodeTransformer):
    """Routes a parsed template's loops, concatenations (``~``) and output through the budget."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        visited = self.generic_visit(node)
        assert isinstance(visited, nodes.For) and isinstance(visited.iter, nodes.Expr)
        return nodes.For(visited.target, _budget_call("bounded_steps", visited.iter), visited.body,
                         visited.else_, visited.test, visited.recursive, lineno=visited.lineno)

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        visited = self.generic_visit(node)
        assert isinstance(visited, nodes.Concat)
        return _budget_call("bounded_value", visited)

    def visit_Output(self, node: nodes.Output) -> nodes.Node:
        visited = self.generic_visit(node)
        assert isinstance(visited, nodes.Output)
        written = [_budget_call("written", child) for child in visited.nodes]
        return nodes.Output(written, lineno=visited.lineno)


def _budget_call(method: str, argument: nodes.Expr) -> nodes.Expr:
    lineno = argument.lineno
    return nodes.Call(nodes.EnvironmentAttribute(method, lineno=lineno), [argument], [], None, None,
                      lineno=lineno)


class BoundedSandbox(TemplateParseSteps, ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox within :class:`RenderLimits`; :meth:`start` begins a rendering."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def __init__(self, *args: Any, limits: RenderLimits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.budget = _Budget(limits)
        self.filters = {name: self._bounded_filter(name, function) for name, function in self.filters.items()}

    def start(self) -> None:
        """A rendering begins: its time, steps and text are counted from now."""
        self.budget.start()

    def parsed_template(self, tree: nodes.Template) -> nodes.Template:
        bounded = _Bounding().visit(tree)
        assert isinstance(bounded, nodes.Template)
        return bounded

    # Called by the compiled template (see _Bounding).
    def bounded_steps(self, iterable: Iterable[Any]) -> Iterator[Any]:
        for item in iterable:
            self.budget.step()
            yield item

    def bounded_value(self, value: Any) -> Any:
        self.budget.tick()
        if isinstance(value, str | bytes | list | tuple | dict):
            self.budget.refuse_size(len(value), _phrase(value))
        elif isinstance(value, int) and not isinstance(value, bool):
            self.budget.refuse_size(_digits(value), _phrase(value))
        return value

    def written(self, value: Any) -> str:
        text = str(value)
        self.budget.write(text)
        return text

    # Jinja's sandbox hooks.
    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        self.budget.tick()
        made = right if operator == "*" and isinstance(left, int) else left
        self.budget.refuse_size(_binop_size(operator, left, right), _phrase(made))
        return self.bounded_value(super().call_binop(context, operator, left, right))

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        __self.budget.tick()
        owner = getattr(__obj, "__self__", None)
        sizing = _METHOD_SIZES.get(getattr(__obj, "__name__", ""))
        if sizing is not None and isinstance(owner, str | bytes):
            try:
                size = sizing(owner, *args, **kwargs)
            except TypeError:
                size = 0  # wrong arguments: the method itself says so
            __self.budget.refuse_size(size)
        if getattr(__obj, "__name__", "") == "generate_lorem_ipsum":  # the global lipsum()
            paragraphs = args[0] if args else kwargs.get("n", 5)
            words = args[3] if len(args) > 3 else kwargs.get("max", 100)
            if isinstance(paragraphs, int) and isinstance(words, int):
                __self.budget.refuse_size(paragraphs * words * 12)  # characters, about
        return __self.bounded_value(super().call(__context, __obj, *args, **kwargs))

    def getattr(self, obj: Any, attribute: str) -> Any:
        self.budget.tick()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        self.budget.tick()
        return super().getitem(obj, argument)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        text, budget = value.__self__, self.budget

        @wraps(wrapped)
        def bounded(*args: Any, **kwargs: Any) -> str:
            mapping = args[0] if value.__name__ == "format_map" and args and isinstance(args[0], dict) else {}
            budget.refuse_size(_widths_of_format(text, args, {**mapping, **kwargs}))
            return self.bounded_value(wrapped(*args, **kwargs))

        return bounded

    def _bounded_filter(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        sizing = _tojson_indent if name == "tojson" else _FILTER_SIZES.get(name)
        signature = inspect.signature(function)
        # Jinja passes a context, environment or evaluation context first to the filters marked so,
        # even to those whose signature (that of the synchronous variant) does not name it.
        first = next(iter(signature.parameters), "")
        skip = int(getattr(function, "jinja_pass_arg", None) is not None and first not in _PASSED)

        @wraps(function)
        def bounded(*args: Any, **kwargs: Any) -> Any:
            self.budget.tick()
            if sizing is not None:
                try:
                    bound = signature.bind(*args[skip:], **kwargs)
                except TypeError:
                    pass  # wrong arguments: the filter itself says so
                else:
                    self.budget.refuse_size(sizing({**bound.arguments, **bound.arguments.get("kwargs", {})}))
            return self.bounded_value(function(*args, **kwargs))

        return bounded


def _tojson_indent(arguments: dict[str, Any]) -> int:
    indent = arguments.get("indent")
    if isinstance(indent, int) and indent > _INDENT_LIMIT:
        raise SecurityError(f"tojson's indent of {indent:,} is past the limit of {_INDENT_LIMIT}")
    return 0


def _digits(number: int) -> int:
    """About how many decimal digits ``number`` has (without writing them: that takes long)."""
    return int(number.bit_length() * math.log10(2)) + 1


def _phrase(value: Any) -> str:
    """How a value like ``value`` is named in an error, with a place for its size."""
    if isinstance(value, int) and not isinstance(value, bool):
        return "an integer of about {:,} digits"
    if isinstance(value, list | tuple | dict):
        return "a list of {:,} items"
    return "a text of {:,} characters"


def _binop_size(operator: str, left: Any, right: Any) -> int:
    """The size of ``left OPERATOR right`` where it can be known before computing it; else 0."""
    if operator == "*":
        if isinstance(left, int) and isinstance(right, int):
            return _digits(left) + _digits(right)
        sequence, times = (left, right) if isinstance(right, int) else (right, left)
        if isinstance(sequence, str | bytes | list | tuple) and isinstance(times, int):
            return len(sequence) * times
    if operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
        return int(right * math.log10(abs(left))) + 1
    if operator == "%" and isinstance(left, str):
        return _widths_of_percent(left, right)
    return 0


__all__ = ["BoundedSandbox", "RenderLimits"]
