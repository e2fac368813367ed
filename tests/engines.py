"""A private Docker daemon for the container tests, and a local image to run servers in.

The daemon runs from a temporary folder on its own socket (``dockerd --bridge=none
--iptables=false``), so the tests neither need nor touch a system daemon. No registry is reachable:
the image is ``docker import`` of a tiny root filesystem (empty folders, merged-/usr symlinks, a
passwd file); containers mount the host's /usr, the interpreter's prefix, the venv and the test
servers read-only, which is all a Python MCP server needs.

The daemon is started under a small launcher that makes itself a child subreaper: containerd's
shims, which detach from their parent, are re-parented to the daemon's tree rather than to the test
process, so the orphan-process guard sees them only while a container of the current test lives.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

DAEMON_START_WAIT = 60.0
DAEMON_STOP_WAIT = 20.0
ENGINE_COMMAND_WAIT = 60.0
POLL_INTERVAL = 0.1
IMAGE = "mcp-run-test:latest"
RUN_LABEL = "mcp-run.run"
SUBREAPER_LAUNCHER = (
    "import ctypes, os, sys; ctypes.CDLL(None).prctl(36, 1, 0, 0, 0); os.execvp(sys.argv[1], sys.argv[1:])"
)


ACTIVE: DockerDaemon | None = None  # the session's daemon, once a test has asked for it


class EngineUnavailable(Exception):
    """The daemon cannot start here; the message says why (the tests are skipped with it)."""


@dataclass
class DockerDaemon:
    folder: Path
    process: subprocess.Popen[bytes]
    # Found when the daemon starts: a test may narrow PATH (to hide bwrap, say) before the
    # leftover-container check of its teardown runs this client.
    client: str = "docker"

    @property
    def host(self) -> str:
        return f"unix://{self.folder / 'docker.sock'}"

    def docker(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        environ = {**os.environ, "DOCKER_HOST": self.host}
        done = subprocess.run(
            [self.client, *args], capture_output=True, text=True, env=environ, timeout=ENGINE_COMMAND_WAIT,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args)} failed: {done.stderr.strip()}")
        return done

    def run_containers(self) -> list[str]:
        """``id name`` of every container a run of mcp-run labelled, running or not."""
        listing = self.docker("ps", "-a", "--filter", f"label={RUN_LABEL}", "--format", "{{.ID}} {{.Names}}")
        return listing.stdout.split("\n")[:-1]

    def wait_for_containers(self, count: int, timeout: float = ENGINE_COMMAND_WAIT) -> list[str]:
        """Bounded wait until exactly ``count`` labelled containers exist."""
        deadline = time.monotonic() + timeout
        while len(found := self.run_containers()) != count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"expected {count} container(s), found {found}")
            time.sleep(POLL_INTERVAL)  # the engine has no event for "a labelled container exists"
        return found

    def remove_run_containers(self) -> list[str]:
        found = self.run_containers()
        if found:
            self.docker("rm", "-f", *(line.split()[0] for line in found), check=False)
        return found


def start_docker_daemon() -> DockerDaemon:
    """Start dockerd in a fresh temporary folder; raises EngineUnavailable with the reason."""
    if shutil.which("dockerd") is None or shutil.which("docker") is None:
        raise EngineUnavailable("dockerd/docker are not installed (scripts/test.sh installs docker.io)")
    # A short path: the socket's path must fit in a sockaddr_un.
    folder = Path(tempfile.mkdtemp(prefix="mcpd-", dir="/tmp"))
    log = (folder / "dockerd.log").open("wb")
    command = [
        "dockerd", "--data-root", str(folder / "data"), "--exec-root", str(folder / "exec"),
        "-H", f"unix://{folder / 'docker.sock'}", "-p", str(folder / "dockerd.pid"),
        "--bridge=none", "--iptables=false", "--ip6tables=false",
    ]
    process = subprocess.Popen(
        [sys.executable, "-c", SUBREAPER_LAUNCHER, *command], stdout=log, stderr=log,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )
    log.close()
    daemon = DockerDaemon(folder, process, client=shutil.which("docker") or "docker")
    deadline = time.monotonic() + DAEMON_START_WAIT
    while True:
        if process.poll() is not None:
            reason = (folder / "dockerd.log").read_text(errors="replace").strip().splitlines()[-3:]
            shutil.rmtree(folder, ignore_errors=True)
            raise EngineUnavailable(f"dockerd exited with code {process.returncode}: {' | '.join(reason)}")
        if (folder / "docker.sock").exists() and daemon.docker("version", check=False).returncode == 0:
            return daemon
        if time.monotonic() > deadline:
            stop_docker_daemon(daemon)
            raise EngineUnavailable(f"dockerd did not answer within {DAEMON_START_WAIT:g}s")
        time.sleep(POLL_INTERVAL)  # no readiness notification without systemd


def stop_docker_daemon(daemon: DockerDaemon) -> None:
    daemon.remove_run_containers()
    if daemon.process.poll() is None:
        daemon.process.send_signal(signal.SIGTERM)
        try:
            daemon.process.wait(timeout=DAEMON_STOP_WAIT)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.process.pid, signal.SIGKILL)
            daemon.process.wait(timeout=DAEMON_STOP_WAIT)
    # What containerd left (shims) dies with the daemon's process group.
    try:
        os.killpg(daemon.process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    subprocess.run(["umount", "-R", "-l", str(daemon.folder / "exec")], capture_output=True, check=False)
    subprocess.run(["umount", "-R", "-l", str(daemon.folder / "data")], capture_output=True, check=False)
    shutil.rmtree(daemon.folder, ignore_errors=True)


def import_test_image(daemon: DockerDaemon) -> str:
    """``docker import`` of a minimal root filesystem; returns the image name."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for folder in ("etc", "tmp", "proc", "dev", "sys", "root", "usr", "work"):
            entry = tarfile.TarInfo(folder)
            entry.type, entry.mode = tarfile.DIRTYPE, 0o1777 if folder == "tmp" else 0o755
            archive.addfile(entry)
        for link in ("bin", "lib", "lib64", "sbin"):
            entry = tarfile.TarInfo(link)
            entry.type, entry.linkname = tarfile.SYMTYPE, f"usr/{link}"
            archive.addfile(entry)
        for name, text in (
            ("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/usr/sbin/nologin\n"),
            ("etc/group", "root:x:0:\nnogroup:x:65534:\n"),
        ):
            data = text.encode()
            entry = tarfile.TarInfo(name)
            entry.size = len(data)
            archive.addfile(entry, io.BytesIO(data))
    environ = {**os.environ, "DOCKER_HOST": daemon.host}
    done = subprocess.run(
        [daemon.client, "import", "-", IMAGE], input=buffer.getvalue(), capture_output=True, env=environ,
        timeout=ENGINE_COMMAND_WAIT,
    )
    if done.returncode != 0:
        raise EngineUnavailable(f"docker import failed: {done.stderr.decode(errors='replace').strip()}")
    return IMAGE


def python_mounts() -> list[str]:
    """Read-only mounts that let this interpreter (a venv's python is a symlink into its prefix) and
    the test servers run in the test image, at their host paths."""
    tests = Path(__file__).resolve().parent
    folders = ["/usr", sys.base_prefix, sys.prefix, str(tests / "mcp_servers")]
    unique = [folder for index, folder in enumerate(folders) if folder not in folders[:index]]
    inside_usr = [folder for folder in unique if folder.startswith("/usr/")]  # /usr covers them
    return [f"{folder}:{folder}" for folder in unique if folder not in inside_usr]
