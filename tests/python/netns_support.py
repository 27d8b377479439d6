"""Several "hosts" on one machine for the tests: Linux network namespaces on a bridge.

>>> with Hosts(3) as lan:                                    # doctest: +SKIP
...     server = PgServer.start(listen=f"127.0.0.1,{lan.server}")
...     lan.run(0, ["python", "-m", "backfill.cli", ...])    # inside host 0
...     lan.cut(1)                                           # host 1 loses its link
...     lan.mend(1)

The host side gets a bridge with the server address (``.1`` of a private /24); each namespace is
a host with its own network stack (loopback, one veth into the bridge, ``.2``, ``.3``, ...). Its
processes share this machine's files and processes (not its network): the same Python, venv and
project folders, and signals reach them by pid. :meth:`Hosts.cut` sets the host's bridge port
down: a partition, not a closed socket, so its TCP connections hang rather than fail, as when a
cable or switch dies. Everything is removed on exit, also after a failure.

Needs root (``ip netns``, iproute2). :func:`unavailable` says why the tests must skip, if so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def unavailable() -> str | None:
    """Why network namespaces cannot be made here (None when they can): tried for real."""
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    if os.geteuid() != 0:
        return f"network namespaces need root (`ip netns add` as uid {os.geteuid()})"
    name = f"bfprobe{os.getpid()}"
    try:
        _ip("netns", "add", name)
    except subprocess.CalledProcessError as exc:
        return f"`ip netns add` failed: {exc.stderr.strip()}"
    try:
        _ip("link", "add", f"bfp{os.getpid() % 100000}", "type", "bridge")
        _ip("link", "del", f"bfp{os.getpid() % 100000}")
        _ip("-n", name, "link", "set", "lo", "up")
    except subprocess.CalledProcessError as exc:
        return f"`ip {' '.join(exc.cmd[1:])}` failed: {exc.stderr.strip()}"
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return None


class Hosts:
    """``count`` network namespaces on a bridge; :attr:`server` is the bridge's address."""

    made = 0  # instances of this process so far: names and subnets differ between them

    def __init__(self, count: int) -> None:
        n = Hosts.made = Hosts.made + 1
        tag = f"{os.getpid() % 100000}{chr(ord('a') + n % 26)}"
        self.count = count
        self.subnet = f"10.{231 + n % 20}.{os.getpid() % 250}"
        self.server = f"{self.subnet}.1"
        self.bridge = f"bfbr{tag}"
        self.names = [f"bfhost{tag}-{i}" for i in range(count)]
        self.ports = [f"bfh{tag}-{i}" for i in range(count)]  # host ends of the veths

    def __enter__(self) -> Hosts:
        try:
            self._make()
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def _make(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.server}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i, (ns, port) in enumerate(zip(self.names, self.ports, strict=True)):
            _ip("netns", "add", ns)
            _ip("link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", port, "master", self.bridge)
            _ip("link", "set", port, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "addr", "add", f"{self.subnet}.{i + 2}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")

    def remove(self) -> None:
        """Deletes the namespaces (their veths go with them) and the bridge; never raises."""
        for ns in self.names:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        for port in self.ports:
            subprocess.run(["ip", "link", "del", port], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)

    def address(self, i: int) -> str:
        return f"{self.subnet}.{i + 2}"

    def popen(self, i: int, args: list[str], **kwargs: Any) -> subprocess.Popen[str]:
        """``args`` as a process of host ``i`` (``ip netns exec`` execs it: the pid is its)."""
        return subprocess.Popen(["ip", "netns", "exec", self.names[i], *args], text=True, **kwargs)

    def run(self, i: int, args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", self.names[i], *args],
            text=True,
            capture_output=True,
            timeout=60,
            **kwargs,
        )

    def cut(self, i: int) -> None:
        """Host ``i``'s link goes down (its bridge port): packets to and from it are lost."""
        _ip("link", "set", self.ports[i], "down")

    def mend(self, i: int) -> None:
        _ip("link", "set", self.ports[i], "up")


def trust_subnet(server: Any, subnet: str) -> None:
    """Lets clients of ``subnet``.0/24 connect to the test cluster ``server`` (pg_support)
    without a password, like its 127.0.0.1 entry, and reloads its configuration."""
    from pg_support import _as_owner, pg_bindir

    hba = Path(server.data) / "pg_hba.conf"
    subprocess.run(
        _as_owner(["sh", "-c", f"echo 'host all all {subnet}.0/24 trust' >> {hba}"]), check=True
    )
    subprocess.run(
        _as_owner([str(pg_bindir() / "pg_ctl"), "-D", str(server.data), "reload"]),
        check=True,
        capture_output=True,
    )
