"""A real PostgreSQL and a real HAProxy for the tests, started from Debian's packages.

PostgreSQL runs from a temporary data folder on 127.0.0.1 (``initdb`` then ``pg_ctl start`` from
/usr/lib/postgresql/*/bin); it refuses to run as root, so as root it runs as the ``postgres`` user
the package creates, the folder chowned to it. HAProxy runs in the foreground (``-db``) with a
configuration written to a temporary folder, logging one line per request to its stdout.

Both are session fixtures (one per xdist worker); each test gets a database of its own. When a
binary is missing or cannot start, the tests that need it are skipped with the reason.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

START_WAIT = 30.0
STOP_WAIT = 15.0
POLL_INTERVAL = 0.05
# A test process is a child subreaper: background workers postgres would spawn later (autovacuum,
# parallel query) would count as its leftovers; the tests need neither.
POSTGRES_SETTINGS = (
    "-c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    " -c autovacuum=off -c max_parallel_workers_per_gather=0 -c max_connections=200"
)


class ServiceUnavailable(Exception):
    """A service cannot start here; the message says why (the tests are skipped with it)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for programs that cannot bind port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, timeout: float, *, alive: subprocess.Popen[bytes] | None = None) -> None:
    """Bounded wait until 127.0.0.1:``port`` accepts connections (and ``alive`` has not exited)."""
    deadline = time.monotonic() + timeout
    while True:
        if alive is not None and alive.poll() is not None:
            raise ServiceUnavailable(f"the process exited with code {alive.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise ServiceUnavailable(f"nothing listened on port {port} within {timeout:g}s") from None
        time.sleep(POLL_INTERVAL)  # a listening socket sends no notification


# --------------------------------------------------------------------------- PostgreSQL


@dataclass
class PostgresServer:
    folder: Path
    port: int
    bin_dir: Path
    user: str | None  # the system user it runs as (root cannot run it), None: the current user
    databases: list[str] = field(default_factory=list)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        self.databases.append(name)
        return self.url(name)

    def drop_database(self, url: str) -> None:
        import psycopg

        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _postgres_bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda path: int(path.split("/")[4]))
    if not found:
        raise ServiceUnavailable("PostgreSQL is not installed (scripts/test.sh installs Debian's postgresql)")
    return Path(found[-1]).parent


def _as_user(user: str | None, command: list[str]) -> list[str]:
    return command if user is None else ["runuser", "-u", user, "--", *command]


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=START_WAIT,
                          stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise ServiceUnavailable(f"{what} failed with code {done.returncode}: {tail}")


def start_postgres() -> PostgresServer:
    """initdb + pg_ctl start in a fresh temporary folder; raises ServiceUnavailable with the reason."""
    bin_dir = _postgres_bin_dir()
    user: str | None = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            raise ServiceUnavailable("running as root, and no 'postgres' user to run PostgreSQL as") from None
        user = "postgres"
    # In /tmp, not under pytest's folder: that one is private to the current user.
    folder = Path(tempfile.mkdtemp(prefix="mcp-pg-", dir="/tmp"))
    if user is not None:
        shutil.chown(folder, user, user)
    data = folder / "data"
    try:
        _run(_as_user(user, [str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                             "--no-sync", "-E", "UTF8"]), "initdb")
        for attempt in range(3):  # the port was free when chosen; another program may take it first
            port = free_port()
            options = f"-p {port} -k {folder} {POSTGRES_SETTINGS}"
            start = _as_user(user, [str(bin_dir / "pg_ctl"), "-D", str(data), "-l",
                                    str(folder / "postgres.log"), "-o", options, "-w",
                                    "-t", str(int(START_WAIT)), "start"])
            try:
                _run(start, "pg_ctl start")
                return PostgresServer(folder, port, bin_dir, user)
            except ServiceUnavailable:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")
    except BaseException as exc:
        log = folder / "postgres.log"
        shutil.rmtree(folder, ignore_errors=True)
        if isinstance(exc, ServiceUnavailable) and log.exists():
            raise ServiceUnavailable(f"{exc} (log: {log.read_text(errors='replace')[-300:]})") from None
        raise


def stop_postgres(server: PostgresServer) -> None:
    subprocess.run(
        _as_user(server.user, [str(server.bin_dir / "pg_ctl"), "-D", str(server.folder / "data"),
                               "-m", "immediate", "-w", "-t", str(int(STOP_WAIT)), "stop"]),
        capture_output=True, timeout=STOP_WAIT + 5, check=False, stdin=subprocess.DEVNULL,
    )
    shutil.rmtree(server.folder, ignore_errors=True)


# --------------------------------------------------------------------------- HAProxy


@dataclass
class LoadBalancer:
    """HAProxy in front of ``backends`` (round robin); ``requests()`` reads its log of requests."""

    port: int
    backends: dict[str, int]  # server name -> port on 127.0.0.1
    folder: Path
    process: subprocess.Popen[bytes]

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def served_by(self) -> list[str]:
        """The backend name of each request logged so far, in order (HAProxy logs a request at its end)."""
        lines = (self.folder / "haproxy.log").read_text(errors="replace").splitlines()
        return [line.split("served_by=", 1)[1].split()[0] for line in lines if "served_by=" in line]


# A configuration as a person writes it (the README's scale-out recipe shows the same): fixed ports,
# servers a and b. ``localized`` moves it to the ports of a test and adds a log line per request.
BALANCER_CONFIG = """\
defaults
    mode http
    timeout connect 5s
    timeout client 120s
    timeout server 120s
    retries 2
    option redispatch
frontend agents
    bind 127.0.0.1:8000
    default_backend instances
backend instances
    balance roundrobin
    server a 127.0.0.1:8001 check
    server b 127.0.0.1:8002 check
"""
LOGGING = ("    log global", "    option dontlognull", '    log-format "served_by=%s status=%ST %HM %HU"')


def localized(config: str, port: int, backends: dict[str, int]) -> str:
    """``config`` listening on ``port``, balancing over ``backends``, logging each request to stdout.

    Connection checks every 200 ms take a dead instance out of the rotation at its first failed
    check; a request sent to it before that is dispatched again to another ("redispatch").
    """
    lines = ["global", "    log stdout format raw local0 info"]
    for line in config.splitlines():
        words = line.split()
        if words[:1] == ["server"]:
            continue
        lines.append(f"    bind 127.0.0.1:{port}" if words[:1] == ["bind"] else line)
        if words[:1] == ["defaults"]:
            lines += LOGGING
        if words[:1] == ["balance"]:
            lines += [f"    server {name} 127.0.0.1:{backend} check inter 200ms fall 1 rise 1"
                      for name, backend in backends.items()]
    return "\n".join(lines) + "\n"


def start_haproxy(backends: dict[str, int], *, config: str = BALANCER_CONFIG) -> LoadBalancer:
    """HAProxy on a free loopback port with ``config`` (see :func:`localized`) over ``backends``;
    raises ServiceUnavailable with the reason when it cannot start."""
    binary = shutil.which("haproxy") or next(iter(glob.glob("/usr/sbin/haproxy")), None)
    if binary is None:
        raise ServiceUnavailable("HAProxy is not installed (scripts/test.sh installs Debian's haproxy)")
    folder = Path(tempfile.mkdtemp(prefix="mcp-lb-", dir="/tmp"))
    for attempt in range(3):
        port = free_port()
        (folder / "haproxy.cfg").write_text(localized(config, port, backends))
        log = (folder / "haproxy.log").open("wb")
        process = subprocess.Popen([binary, "-db", "-f", str(folder / "haproxy.cfg")], stdout=log, stderr=log,
                                   stdin=subprocess.DEVNULL)
        log.close()
        try:
            wait_for_port(port, START_WAIT, alive=process)
            return LoadBalancer(port, dict(backends), folder, process)
        except ServiceUnavailable as exc:
            stop_process(process)
            if attempt == 2:
                reason = (folder / "haproxy.log").read_text(errors="replace").strip()[-300:]
                shutil.rmtree(folder, ignore_errors=True)
                raise ServiceUnavailable(f"haproxy did not start: {exc}: {reason}") from None
    raise AssertionError("unreachable")


def stop_haproxy(balancer: LoadBalancer) -> None:
    stop_process(balancer.process)
    shutil.rmtree(balancer.folder, ignore_errors=True)


def stop_process(process: subprocess.Popen[bytes], timeout: float = STOP_WAIT) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)


# --------------------------------------------------------------------------- fixtures


def postgres_or_skip() -> Iterator[PostgresServer]:
    """A PostgreSQL started for the caller and stopped after it; the test is skipped, with the reason,
    when it cannot run. The body of the fixtures below."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed (the 'postgres' extra)")
    try:
        server = start_postgres()
    except ServiceUnavailable as exc:
        pytest.skip(f"no PostgreSQL: {exc}")
    try:
        yield server
    finally:
        stop_postgres(server)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL per test session (per xdist worker)."""
    yield from postgres_or_skip()


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL of the test alone: the test may stop and restart it (:func:`pg_ctl`)."""
    yield from postgres_or_skip()


def pg_ctl(server: PostgresServer, *action: str) -> None:
    """``pg_ctl ACTION`` on ``server`` (``"-m", "immediate", "stop"``; ``"start"``), waiting until done."""
    options = f"-p {server.port} -k {server.folder} {POSTGRES_SETTINGS}"
    command = [str(server.bin_dir / "pg_ctl"), "-D", str(server.folder / "data"), "-l",
               str(server.folder / "postgres.log"), "-o", options, "-w", "-t", str(int(START_WAIT)), *action]
    subprocess.run(_as_user(server.user, command), capture_output=True, timeout=STOP_WAIT + START_WAIT,
                   check=True, stdin=subprocess.DEVNULL)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """The URL of a new empty database on the session's PostgreSQL, dropped after the test."""
    url = postgres_server.create_database()
    yield url
    postgres_server.drop_database(url)


@pytest.fixture
def load_balancer() -> Iterator[Callable[..., LoadBalancer]]:
    """``load_balancer({name: port, ...}, config=...)`` -> a running HAProxy, stopped after the test.

    Skipped with the reason when HAProxy cannot run here."""
    started: list[LoadBalancer] = []

    def start(backends: dict[str, int], *, config: str = BALANCER_CONFIG) -> LoadBalancer:
        try:
            balancer = start_haproxy(backends, config=config)
        except ServiceUnavailable as exc:
            pytest.skip(f"no load balancer: {exc}")
        started.append(balancer)
        return balancer

    try:
        yield start
    finally:
        for balancer in started:
            stop_haproxy(balancer)


def require(programs: Sequence[str]) -> None:
    """Skip (with the reason) unless every program is on PATH."""
    missing = [name for name in programs if shutil.which(name) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)}")
