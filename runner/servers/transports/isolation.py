"""How a stdio server's command is launched: directly, inside a container, or under bubblewrap.

:func:`prepare_launch` turns a ``StdioServerSpec`` into the exact argv, environment and working
directory of the process ``stdio`` spawns. The stdio transport stays the same for all three: the
engine's ``run -i`` / ``exec -i`` and ``bwrap`` pass stdin and stdout through, so supervision,
heartbeats, timeouts and restarts do not know the difference.

- **Container** (``container:``): ``docker|podman run --rm -i`` of ``image`` with ``--network none``
  by default and read-only mounts, or ``exec -i`` into a running container. Only the manifest's
  ``env`` and ``env_passthrough`` enter the container (named with ``-e NAME``, values travel in the
  engine client's environment, never in argv). Fresh containers carry the label
  ``mcp-run.run=<pid>.<start time>``: :func:`remove_container` removes one when its server stops,
  and the first container start of a run removes containers whose run has died (``kill -9``, a
  crash). A container entered with ``exec`` is not ours and is never removed.
- **Sandbox** (``sandbox:``): ``bwrap`` with the host read-only, a private ``/tmp``, every namespace
  unshared (no network, not even loopback, unless ``network: true``), the ``writable`` paths bound
  read-write, and ``--die-with-parent``.

Neither shows a server mcp-run's own files (:func:`private_folders`: the state folder beside the
manifest, the per-user state folders and the token store, which hold conversations, logs and login
secrets): the sandbox lays an empty folder over each, and a container mount that holds one gets an
empty one at that place. A ``writable`` path or mount inside one is still granted, as the manifest
names it.

Problems the user must fix (engine or bwrap not installed, daemon not running, image missing,
permission denied) raise :class:`IsolationUnavailable`, which the translation table turns into a
``ServerStartError``.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import anyio

from runner.auth.store import token_dir
from runner.manifest import ContainerSpec, SandboxSpec, StdioServerSpec
from runner.servers.transports.environment import (
    allowlisted_environment,
    server_environment,
    working_directory,
)
from runner.store.state_folder import user_state_root

logger = logging.getLogger(__name__)

ENGINES = ("docker", "podman")
RUN_LABEL = "mcp-run.run"
SERVER_LABEL = "mcp-run.server"
HOST_LABEL = "mcp-run.host"
ENGINE_COMMAND_TIMEOUT = 30.0  # an inspect or rm that takes longer means the daemon is stuck
# Variables the engine client itself needs (daemon socket, rootless runtime dir); never the server's.
ENGINE_ENV_PREFIXES = ("DOCKER_", "CONTAINER_HOST", "CONTAINERS_", "PODMAN_", "XDG_RUNTIME_DIR")

_names = itertools.count(1)
_swept_engines: set[str] = set()


class IsolationUnavailable(Exception):
    """The container engine or bubblewrap cannot run the server; the message says what to fix."""

    def __init__(self, message: str, *, permanent: bool = True) -> None:
        super().__init__(message)
        self.permanent = permanent


@dataclass(frozen=True)
class Launch:
    """The process to spawn; ``container`` names a fresh container to remove when it stops."""

    command: list[str]
    env: dict[str, str]
    cwd: Path
    engine: str | None = None
    container: str | None = None


async def prepare_launch(key: str, spec: StdioServerSpec, base_dir: Path) -> Launch:
    """The argv, environment and cwd of server ``key`` (values of ``env`` are secret)."""
    cwd = working_directory(key, spec, base_dir)
    if spec.container is not None:
        return await _container_launch(key, spec, spec.container, base_dir, cwd)
    if spec.sandbox is not None:
        return _sandbox_launch(spec, spec.sandbox, base_dir, cwd)
    return Launch([spec.command, *spec.args], server_environment(spec), cwd)


def _sandbox_launch(spec: StdioServerSpec, sandbox: SandboxSpec, base_dir: Path, cwd: Path) -> Launch:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise IsolationUnavailable(
            "the sandbox needs bubblewrap, and 'bwrap' is not on PATH (install the 'bubblewrap' package)"
        )
    command = [
        bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
        "--unshare-all", "--die-with-parent", "--new-session",
    ]
    if sandbox.network:
        command.append("--share-net")
    # The working folder stays visible even when it lives under the private /tmp.
    command += ["--ro-bind", str(cwd), str(cwd)]
    writable = []
    for entry in sandbox.writable:
        path = (base_dir / entry).resolve()
        if not path.exists():
            raise IsolationUnavailable(f"sandbox.writable: {str(path)!r} does not exist")
        writable.append(path)
        command += ["--bind", str(path), str(path)]
    hidden = [folder for folder in private_folders(base_dir) if folder.is_dir()]
    for folder in hidden:
        command += ["--tmpfs", str(folder)]
    # What the manifest grants inside a hidden folder is bound again over the empty one.
    if any(cwd.is_relative_to(folder) for folder in hidden):
        command += ["--ro-bind", str(cwd), str(cwd)]
    for path in writable:
        if any(path.is_relative_to(folder) for folder in hidden):
            command += ["--bind", str(path), str(path)]
    command += ["--chdir", str(cwd), "--", spec.command, *spec.args]
    return Launch(command, server_environment(spec), cwd)


def private_folders(base_dir: Path) -> list[Path]:
    """mcp-run's own folders, which an isolated server never sees: the state folder beside the
    manifest, the per-user state folders and the token store (resolved, outermost first)."""
    folders = {path.resolve() for path in (base_dir / ".mcp-run", user_state_root(os.environ), token_dir())}
    return sorted(folder for folder in folders if not any(folder != other and folder.is_relative_to(other)
                                                          for other in folders))


async def _container_launch(
    key: str, spec: StdioServerSpec, container: ContainerSpec, base_dir: Path, cwd: Path
) -> Launch:
    engine = _find_engine(container.engine)
    inner_env = {name: os.environ[name] for name in spec.env_passthrough if name in os.environ}
    inner_env.update(spec.env)
    env = _engine_environment()
    env.update(inner_env)
    variables = [item for name in inner_env for item in ("-e", name)]
    options = [*(["-w", container.workdir] if container.workdir else [])]
    options += ["-u", container.user] if container.user else []
    if container.exec_ is not None:
        await _check(engine, env, ["container", "inspect", "--format", "{{.State.Running}}", container.exec_],
                     what=f"container {container.exec_!r}", expect="true")
        command = [engine, "exec", "-i", *options, *variables, *container.args, container.exec_,
                   spec.command, *spec.args]
        return Launch(command, env, cwd, engine=engine)
    assert container.image is not None
    await _check(engine, env, ["image", "inspect", "--format", "{{.Id}}", container.image],
                 what=f"image {container.image!r}")
    await _sweep_leftovers(engine, env)
    name = f"mcp-run-{key}-{os.getpid()}-{next(_names)}"
    mounts: list[str] = []
    for mount in container.mounts:
        source = (base_dir / mount.source).resolve()
        if not source.exists():
            raise IsolationUnavailable(f"container.mounts: {str(source)!r} does not exist")
        mounts += ["-v", f"{source}:{mount.target}:{'rw' if mount.writable else 'ro'}"]
        for folder in private_folders(base_dir):
            if folder.is_relative_to(source) and folder.is_dir():
                inside = PurePosixPath(mount.target) / folder.relative_to(source).as_posix()
                mounts += ["--tmpfs", str(inside)]
    command = [
        engine, "run", "--rm", "-i", "--name", name,
        "--label", f"{RUN_LABEL}={run_id()}", "--label", f"{SERVER_LABEL}={key}",
        "--label", f"{HOST_LABEL}={socket.gethostname()}",
        "--network", container.network, *mounts, *options, *variables, *container.args,
        container.image, spec.command, *spec.args,
    ]
    return Launch(command, env, cwd, engine=engine, container=name)


async def remove_container(launch: Launch) -> None:
    """Remove the fresh container of ``launch`` (gone already is fine); bounded, never raises."""
    if launch.container is None or launch.engine is None:
        return
    with anyio.move_on_after(ENGINE_COMMAND_TIMEOUT):
        result = await anyio.run_process(
            [launch.engine, "rm", "-f", launch.container], env=launch.env, check=False
        )
        gone = any(sign in result.stderr for sign in (b"No such container", b"in progress"))
        if result.returncode != 0 and not gone:
            logger.warning("could not remove container %s: %s", launch.container, _first_line(result.stderr))


def run_id(pid: int | None = None) -> str:
    """``<pid>.<start time>`` of a process: unlike a pid alone, it is never reused."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}.{_start_ticks(pid) or 0}"


def run_alive(run: str) -> bool:
    pid_text, _, ticks = run.partition(".")
    if not pid_text.isdigit():
        return False
    started = _start_ticks(int(pid_text))
    if started is None:
        try:
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return not Path("/proc/self/stat").exists()  # no /proc: the pid is all there is to go on
    return str(started) == ticks


def _start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22 (starttime); the command name in parentheses may itself hold spaces.
    return int(stat.rpartition(")")[2].split()[19])


def _find_engine(wanted: str | None) -> str:
    for name in (wanted,) if wanted else ENGINES:
        path = shutil.which(name)
        if path is not None:
            return path
    if wanted:
        raise IsolationUnavailable(f"container engine {wanted!r} is not installed (not on PATH)")
    raise IsolationUnavailable("no container engine is installed: neither docker nor podman is on PATH")


def _engine_environment() -> dict[str, str]:
    env = allowlisted_environment()
    env.update({name: value for name, value in os.environ.items() if name.startswith(ENGINE_ENV_PREFIXES)})
    return env


async def _check(engine: str, env: dict[str, str], args: list[str], *, what: str, expect: str = "") -> None:
    """Run an inspect command; a failure becomes an IsolationUnavailable that says what to fix."""
    engine_name = Path(engine).name
    result = None
    with anyio.move_on_after(ENGINE_COMMAND_TIMEOUT):
        try:
            result = await anyio.run_process([engine, *args], env=env, check=False)
        except OSError as exc:
            raise IsolationUnavailable(f"cannot run {engine_name}: {exc.strerror or exc}") from exc
    if result is None:
        raise IsolationUnavailable(
            f"{engine_name} did not answer within {ENGINE_COMMAND_TIMEOUT:g}s (is its daemon stuck?)",
            permanent=False,
        )
    output = result.stdout.decode(errors="replace").strip()
    if result.returncode == 0 and (not expect or output == expect):
        return
    error = result.stderr.decode(errors="replace")
    lowered = error.lower()
    first = _first_line(result.stderr)
    if "permission denied" in lowered:
        raise IsolationUnavailable(
            f"permission denied talking to {engine_name} ({first}); "
            "run as a member of its group or use rootless podman"
        )
    if any(sign in lowered for sign in ("cannot connect", "daemon running", "connection refused")):
        raise IsolationUnavailable(f"the {engine_name} daemon is not running ({first})", permanent=False)
    if "image" in what and ("no such" in lowered or "not known" in lowered or "not found" in lowered):
        raise IsolationUnavailable(f"{what} is not present locally; pull or build it first")
    if "container" in what and (result.returncode == 0 or "no such" in lowered):
        raise IsolationUnavailable(f"{what} is not running; start it first or use 'image'")
    reason = first or f"exit code {result.returncode}"
    raise IsolationUnavailable(f"{engine_name} cannot inspect {what}: {reason}")


async def _sweep_leftovers(engine: str, env: dict[str, str]) -> None:
    """Remove, once per engine and run, the containers of dead runs on this host."""
    if engine in _swept_engines:
        return
    _swept_engines.add(engine)
    host = socket.gethostname()
    template = f'{{{{.ID}}}} {{{{.Label "{RUN_LABEL}"}}}} {{{{.Label "{HOST_LABEL}"}}}}'
    with anyio.move_on_after(ENGINE_COMMAND_TIMEOUT):
        listing = await anyio.run_process(
            [engine, "ps", "-a", "--filter", f"label={RUN_LABEL}", "--format", template], env=env, check=False
        )
        dead = []
        for line in listing.stdout.decode(errors="replace").splitlines():
            fields = line.split()
            if len(fields) == 3 and fields[2] == host and not run_alive(fields[1]):
                dead.append(fields[0])
        if dead:
            logger.info("removing %d container(s) left by runs that died", len(dead))
            await anyio.run_process([engine, "rm", "-f", *dead], env=env, check=False)


def _first_line(data: bytes) -> str:
    lines = data.decode(errors="replace").strip().splitlines()
    return lines[0].strip() if lines else ""
