"""The private members of third-party packages that ``runner/sdk.py`` relies on still exist with the
shape it uses; and no other module of ``runner`` touches a private member of a package not ours.

When an upgrade of the MCP SDK (or LangGraph, LangChain, anyio) fails the first tests, the message
names the member, the version installed and the function of ``runner/sdk.py`` to adapt.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.metadata
import inspect
import operator
import re
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

import runner

ROOT = Path(runner.__file__).resolve().parent
SDK_MODULE = ROOT / "sdk.py"


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def _missing(member: str, distribution: str, problem: str, user: str) -> str:
    return (f"{member} {problem} in {distribution} {_version(distribution)}; runner/sdk.py's {user} relies "
            f"on it. Find what replaced it in that release and adapt {user} (only runner/sdk.py needs to "
            f"change), or keep {distribution} at the version pinned in pyproject.toml.")


def _resolve(path: str) -> Any:
    """``package.module:Name.attribute`` -> the object; AttributeError / ImportError when gone."""
    module, _, attributes = path.partition(":")
    target: Any = importlib.import_module(module)
    for name in attributes.split(".") if attributes else ():
        target = getattr(target, name)
    return target


# (member, distribution, runner.sdk user, parameters it is called with: None for a non-callable)
CALLABLES: list[tuple[str, str, str, tuple[str, ...] | None]] = [
    ("mcp.client.session:_clamp_inbound_ttl", "mcp", "clamp_inbound_ttl", ("raw",)),
    ("mcp.client.session:_later_revision_fields", "mcp", "later_revision_fields", ("method", "version")),
    ("mcp.client.session:ClientSession._output_schema_validator", "mcp", "output_schema_validator",
     ("self", "name", "output_schema")),
    ("mcp.client.session:ClientSession._absorb_tool_listing", "mcp", "absorb_tool_listing",
     ("self", "result", "complete")),
    ("mcp.client:Client._relist_tool", "mcp", "relist_tool", ("self", "name")),
    ("mcp.client:Client._drive_input_required", "mcp", "drive_input_required", ("self", "first", "retry")),
    ("mcp.client.auth:OAuthClientProvider._initialize", "mcp", "OAuthProviderSteps.load_state", ("self",)),
    ("mcp.client.auth:OAuthClientProvider._handle_token_response", "mcp",
     "OAuthProviderSteps.take_token_response", ("self", "response")),
    ("mcp.client.auth:OAuthClientProvider._handle_refresh_response", "mcp",
     "OAuthProviderSteps.take_refresh_response", ("self", "response")),
    ("mcp.client.auth:OAuthClientProvider._refresh_token", "mcp", "OAuthProviderSteps.refresh_request",
     ("self",)),
    ("mcp.client.auth:OAuthClientProvider._auth_flow", "mcp", "OAuthProviderSteps.sdk_flow",
     ("self", "request")),
    ("mcp.client.auth:OAuthClientProvider._exchange_token_authorization_code", "mcp",
     "OAuthProviderSteps.code_exchange_request", ("self", "auth_code", "code_verifier")),
    ("mcp.client.auth:OAuthClientProvider._perform_authorization_code_grant", "mcp",
     "OAuthProviderSteps.authorization_code_grant", ("self",)),
    ("mcp.client.auth:OAuthClientProvider._add_auth_header", "mcp", "OAuthProviderSteps.add_auth_header",
     ("self", "request")),
    ("mcp.client.auth.extensions.client_credentials:ClientCredentialsOAuthProvider"
     "._exchange_token_client_credentials", "mcp", "OAuthProviderSteps.client_credentials_request",
     ("self",)),
    ("mcp.client._transport:ReadStream", "mcp", "ReadStream (type)", None),
    ("mcp.client._transport:WriteStream", "mcp", "WriteStream (type)", None),
    ("mcp.client._transport:TransportStreams", "mcp", "TransportStreams (type)", None),
    ("langgraph._internal._constants:CONFIG_KEY_DURABILITY", "langgraph", "durability_config", None),
    ("langgraph._internal._constants:NS_SEP", "langgraph", "parent_namespace", None),
    ("langgraph._internal._constants:NULL_TASK_ID", "langgraph", "null_task_id", None),
    ("langgraph._internal._constants:NO_WRITES", "langgraph", "add_null_writes", None),
    ("langgraph._internal._constants:CONFIG_KEY_RESUMING", "langgraph", "resuming", None),
    ("langgraph._internal._constants:NS_END", "langgraph", "namespace_node", None),
    ("langchain.chat_models.base:_BUILTIN_PROVIDERS", "langchain", "chat_model_providers", None),
    ("langchain.chat_models.base:_parse_model", "langchain", "inferred_provider",
     ("model", "model_provider")),
    ("langchain_core.language_models:BaseChatModel._get_ls_params", "langchain-core",
     "chat_model_trace_params", ("self", "stop", "kwargs")),
    ("langchain_core.language_models:BaseChatModel._llm_type", "langchain-core", "chat_model_type", None),
    ("anyio._core._eventloop:get_async_backend", "anyio", "open_process", ()),
    ("httpx2._utils:get_environment_proxies", "httpx2", "environment_proxies", ()),
    ("langgraph.checkpoint.postgres.aio:AsyncPostgresSaver._cursor", "langgraph-checkpoint-postgres",
     "saver_cursor", ("self", "pipeline")),
    ("jinja2.environment:Environment._parse", "jinja2", "TemplateParseSteps.parsed_template",
     ("self", "source", "name", "filename")),
    ("langchain_openai.data._profiles:_PROFILES", "langchain-openai", "partner_model_profile", None),
]

# Attributes an SDK object gets in its __init__ (no instance is made: read from the source).
# (class, attribute, distribution, runner.sdk user)
INSTANCE_ATTRIBUTES: list[tuple[str, str, str, str]] = [
    ("mcp.client.session:ClientSession", "_stamp", "mcp", "send_raw"),
    ("mcp.client.session:ClientSession", "_dispatcher", "mcp", "send_raw"),
    ("mcp.client.session:ClientSession", "_session_read_timeout_seconds", "mcp", "send_raw"),
    ("mcp.client.session:ClientSession", "_call_tool_adapter", "mcp", "call_tool_result_adapter"),
    ("mcp.client.session:ClientSession", "_tool_output_schemas", "mcp", "tool_output_schemas"),
    ("mcp.client.session:ClientSession", "_tool_output_validators", "mcp", "tool_output_validators"),
    ("mcp.client.session:ClientSession", "_x_mcp_header_maps", "mcp", "header_maps"),
    ("mcp.server.session:ServerSession", "_connection", "mcp", "session_connection"),
    ("mcp.server.streamable_http_manager:StreamableHTTPSessionManager", "_server_instances", "mcp",
     "http_session_transports"),
    ("mcp.client.auth:OAuthClientProvider", "_initialized", "mcp", "OAuthProviderSteps.state_loaded"),
]


@pytest.mark.parametrize(("member", "distribution", "user", "parameters"), CALLABLES,
                         ids=[row[0] for row in CALLABLES])
def test_each_private_member_runner_sdk_uses_still_exists(
    member: str, distribution: str, user: str, parameters: tuple[str, ...] | None
) -> None:
    try:
        target = _resolve(member)
    except (ImportError, AttributeError):
        pytest.fail(_missing(member, distribution, "no longer exists", user))
    if parameters is None:
        return
    if not callable(target):
        pytest.fail(_missing(member, distribution, "is no longer callable", user))
    found = tuple(inspect.signature(target).parameters)
    if found[: len(parameters)] != parameters:
        pytest.fail(_missing(member, distribution, f"now takes {found}, not {parameters}", user))


@pytest.mark.parametrize(("owner", "attribute", "distribution", "user"), INSTANCE_ATTRIBUTES,
                         ids=[f"{row[0]}.{row[1]}" for row in INSTANCE_ATTRIBUTES])
def test_each_private_attribute_runner_sdk_reads_is_still_set(
    owner: str, attribute: str, distribution: str, user: str
) -> None:
    member = f"{owner}.{attribute}"
    try:
        cls = _resolve(owner)
    except (ImportError, AttributeError):
        pytest.fail(_missing(owner, distribution, "no longer exists", user))
    if attribute in getattr(cls, "__annotations__", {}) or any(
        f.name == attribute for f in (dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ())
    ):
        return
    source = inspect.getsource(cls)
    if not re.search(rf"self\.{re.escape(attribute)}\b(\s*:[^=\n]+)?\s*=", source):
        pytest.fail(_missing(member, distribution, "is no longer set by the class", user))


def test_the_clients_folded_extensions_still_map_result_models_to_claims() -> None:
    from mcp.client import Client

    user = "result_claim"
    fields = {f.name: f for f in dataclasses.fields(Client)}
    if "_folded_extensions" not in fields:
        pytest.fail(_missing("mcp.client.Client._folded_extensions", "mcp", "no longer exists", user))
    folded = _resolve("mcp.client.client:_FoldedExtensions")
    if "by_model" not in {f.name for f in dataclasses.fields(folded)}:
        pytest.fail(_missing("mcp.client.client._FoldedExtensions.by_model", "mcp", "no longer exists", user))


def test_the_sdks_auth_flow_still_runs_through_the_private_steps_runner_sdk_overrides() -> None:
    """The overrides of :class:`runner.sdk.OAuthProviderSteps` matter only if the SDK calls them."""
    from mcp.client.auth import OAuthClientProvider

    source = inspect.getsource(OAuthClientProvider)
    for step in ("_initialize", "_refresh_token", "_handle_refresh_response", "_handle_token_response",
                 "_exchange_token_authorization_code", "_perform_authorization_code_grant"):
        if f"self.{step}(" not in source:
            pytest.fail(_missing(f"mcp.client.auth.OAuthClientProvider.{step}", "mcp",
                                 "is no longer called by the provider's flow", "OAuthProviderSteps"))
    auth_flow = "".join(inspect.getsource(cls) for cls in OAuthClientProvider.__mro__
                        if cls.__module__.startswith("mcp.") and cls is not OAuthClientProvider)
    if "self._auth_flow(" not in auth_flow:
        pytest.fail(_missing("mcp.client.auth.OAuthClientProvider._auth_flow", "mcp",
                             "is no longer what async_auth_flow drives",
                             "OAuthProviderSteps.authorizing_flow"))


def test_the_mcp_sdk_is_pinned_to_its_minor_version_while_runner_sdk_uses_its_privates() -> None:
    text = (ROOT.parent / "pyproject.toml").read_text(encoding="utf-8")
    pin = re.search(r'"mcp>=(\d+)\.(\d+)[^,"]*,<(\d+)\.(\d+)"', text)
    installed = tuple(int(part) for part in _version("mcp").split(".")[:2])
    assert pin is not None, "pin the MCP SDK's minor version in pyproject.toml (mcp>=X.Y,<X.Y+1)"
    low, high = (int(pin[1]), int(pin[2])), (int(pin[3]), int(pin[4]))
    assert high == (low[0], low[1] + 1), f"the pin allows more than one minor version: {pin[0]}"
    assert low == installed, f"the pin {pin[0]} is not the installed mcp {_version('mcp')}"


# --- no private member of a package not ours outside runner/sdk.py -----------------------------


def _ours_or_stdlib(module: str) -> bool:
    top = module.split(".")[0]
    return top == "runner" or top in sys.stdlib_module_names or top == "__future__"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _sources() -> list[Path]:
    return sorted(path for path in ROOT.rglob("*.py") if path != SDK_MODULE)


def _runner_private_names() -> set[str]:
    """Private names runner itself defines: functions, classes, module and class attributes, slots,
    and attributes it sets on ``self``/``cls``."""
    names: set[str] = set()
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    names.add(node.attr)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name)
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                                    for t in node.targets):
                names.update(c.value for c in ast.walk(node.value)
                             if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return {name for name in names if _private(name)}


def private_touches(path: Path, ours: set[str]) -> list[str]:
    """Where ``path`` names a private member of a package not ours (static: imports, attributes,
    getattr/hasattr/setattr with a literal name)."""
    found = []
    where = path.relative_to(ROOT.parent) if path.is_relative_to(ROOT.parent) else path
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _ours_or_stdlib(node.module):
                continue
            parts = [p for p in node.module.split(".") if _private(p)]
            parts += [alias.name for alias in node.names if _private(alias.name)]
            if parts:
                found.append(f"{where}:{node.lineno} imports {', '.join(parts)} from {node.module}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if not _ours_or_stdlib(alias.name) and any(_private(p) for p in alias.name.split(".")):
                    found.append(f"{where}:{node.lineno} imports {alias.name}")
        elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in ours:
            found.append(f"{where}:{node.lineno} uses {ast.unparse(node)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr", "setattr", "delattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and _private(node.args[1].value) and node.args[1].value not in ours):
            found.append(f"{where}:{node.lineno} uses {ast.unparse(node)}")
    return found


def test_no_module_but_runner_sdk_names_a_private_member_of_a_package_not_ours() -> None:
    ours = _runner_private_names()
    touches = [touch for path in _sources() for touch in private_touches(path, ours)]
    assert touches == [], "reach these through a named function of runner/sdk.py:\n" + "\n".join(touches)


def _module_names() -> list[str]:
    names = []
    for path in _sources():
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        names.append(".".join(parts).removesuffix(".__init__"))
    return names


def _defined_by(cls: type) -> set[str]:
    """Private names the source of ``cls`` defines: its methods and class attributes, and the
    attributes its methods set on ``self`` (not what metaclasses add, such as ``_abc_impl``)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return set()
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    names.update(node.attr for node in ast.walk(tree)
                 if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                 and isinstance(node.value, ast.Name) and node.value.id == "self")
    return {name for name in names if _private(name)}


# Underscored, yet the documented way to extend the class: LangChain's guide to a custom chat model
# has a subclass implement these.
DOCUMENTED_HOOKS = {("BaseChatModel", name) for name in ("_generate", "_agenerate", "_stream", "_astream",
                                                         "_llm_type")}


def overridden_privates(module: Any) -> list[str]:
    """Private methods, class attributes or instance attributes that a class of ``module``
    defines over a private member of a package's class it derives from."""
    found = []
    for cls in vars(module).values():
        if not inspect.isclass(cls) or cls.__module__ != module.__name__:
            continue
        foreign = [base for base in cls.__mro__[1:]
                   if not _ours_or_stdlib(base.__module__) and base.__module__ != "builtins"]
        if not foreign:
            continue
        mine = _defined_by(cls)
        for name in sorted(mine):
            for base in foreign:
                if (base.__name__, name) in DOCUMENTED_HOOKS:
                    break
                if name in vars(base) or _sets(base, name):
                    found.append(f"{module.__name__}.{cls.__name__}.{name} overrides "
                                 f"{base.__module__}.{base.__name__}.{name}")
                    break
    return found


def _sets(cls: type, name: str) -> bool:
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return False
    return re.search(rf"self\.{re.escape(name)}\b(\s*:[^=\n]+)?\s*=", source) is not None


def test_no_class_outside_runner_sdk_overrides_a_private_member_of_a_package_class() -> None:
    found = []
    for name in _module_names():
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional extra that is not installed here
            continue
        found.extend(overridden_privates(module))
    assert found == [], ("override a public-named hook of runner/sdk.py instead (as runner.auth.flow "
                         "does through OAuthProviderSteps):\n" + "\n".join(found))


def test_the_checks_catch_a_private_touch(tmp_path: Path) -> None:
    """The static check is not vacuous: each kind of touch is found."""
    bad = tmp_path / "bad.py"
    bad.write_text("from mcp.client._transport import TransportStreams\n"
                   "import anyio._core._eventloop\n"
                   "from mcp.client.session import _clamp_inbound_ttl\n"
                   "def f(session, server):\n"
                   "    session._stamp({}, {})\n"
                   "    return getattr(server.session_manager, '_server_instances')\n", encoding="utf-8")
    touches = private_touches(bad, _runner_private_names())
    assert len(touches) == 5, touches


def test_the_checks_catch_an_overridden_private_method() -> None:
    from types import ModuleType

    from mcp.client.auth import OAuthClientProvider

    class Overriding(OAuthClientProvider):
        async def _initialize(self) -> None:
            pass

    module = ModuleType(__name__)
    module.Overriding = Overriding  # type: ignore[attr-defined]
    assert overridden_privates(module) == [
        f"{__name__}.Overriding._initialize overrides mcp.client.auth.oauth2.OAuthClientProvider._initialize"
    ]



class _Seen(TypedDict):
    seen: Annotated[list[str], operator.add]


async def test_writes_of_no_task_from_two_writers_on_one_checkpoint_are_all_applied() -> None:
    """A turn's left-over spending and a stopped call's record may land on the same checkpoint."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, StateGraph

    from runner import sdk

    builder = StateGraph(_Seen)
    builder.add_node("step", lambda state: {"seen": ["step"]})
    builder.add_edge(START, "step")
    graph = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    await graph.ainvoke({"seen": []}, config)
    latest = (await graph.aget_state(config)).config
    await sdk.add_null_writes(graph.checkpointer, latest, [("seen", ["first"])])
    await sdk.add_null_writes(graph.checkpointer, latest, [("seen", ["second"]), ("seen", ["third"])])
    assert (await graph.aget_state(config)).values["seen"] == ["step", "first", "second", "third"]
