"""Network namespaces for the multi-host tests (tests/multihost/, docs/testing.md).

A :class:`Network` is one Linux bridge on this host with an address ``198.18.N.1/24``
(198.18.0.0/15 is reserved for benchmarks: it never routes anywhere real). Each
:class:`Node` is a network namespace joined to that bridge by a veth pair, with the address
``198.18.N.(10+i)``, its own loopback and no default route: a process inside reaches the
host's bridge address (where the tests' PostgreSQL and scripted model listen), the other
nodes of the same network, and nothing else. A node's veth can be taken down and up again
(a network partition of that node alone).

Names carry their owner: namespaces are ``a0n-<pid>-<tag>-<i>``, links have the alias
``a0-netns:<pid>``. :func:`sweep_stale` (run once per test process) removes what processes
that no longer exist left behind, so a test killed half-way leaves nothing for long;
:meth:`Network.destroy` removes the network's processes, namespaces and links, and runs
on every exit path of the ``with`` block. Subnets are chosen under a file lock, so pytest
processes running at the same time never pick the same one.

Needs root and ``ip`` (iproute2; scripts/test.sh installs it).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TEST_NET = ipaddress.ip_network("198.18.0.0/15")
LOCK_PATH = Path("/run/lock/a0-netns.lock")
ALIAS = "a0-netns:"
_NS_NAME = re.compile(r"^a0n-(\d+)-[0-9a-f]+-\d+$")


class NetnsUnavailable(RuntimeError):
    """No ``ip``, not root, or the kernel refuses to make a namespace."""


def ip(*args: str, check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    """Run ``ip ARGS``; a failure raises with ip's own message."""
    done = subprocess.run(
        ["ip", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def check_available() -> None:
    """Raise NetnsUnavailable with the reason when these tests cannot run here."""
    if shutil.which("ip") is None:
        raise NetnsUnavailable("no `ip` command (scripts/test.sh installs iproute2)")
    if os.geteuid() != 0:
        raise NetnsUnavailable("network namespaces need root")
    probe = f"a0n-{os.getpid()}-{secrets.token_hex(3)}-0"
    made = ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        raise NetnsUnavailable(f"cannot create a network namespace: {made.stderr.strip()}")
    ip("netns", "del", probe, check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
    with LOCK_PATH.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _links() -> list[dict[str, Any]]:
    return list(json.loads(ip("-j", "link", "show").stdout or "[]"))


def _kill_namespace_processes(name: str) -> None:
    """SIGKILL the processes inside one of the tests' namespaces (they are the tests')."""
    pids = ip("netns", "pids", name, check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def sweep_stale() -> list[str]:
    """Remove namespaces and links left by test processes that no longer run."""
    removed = []
    with _locked():
        for line in ip("netns", "list", check=False).stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            found = _NS_NAME.match(name)
            if found and not _alive(int(found.group(1))):
                _kill_namespace_processes(name)
                ip("netns", "del", name, check=False)
                removed.append(name)
        for link in _links():
            alias = link.get("ifalias") or ""
            if alias.startswith(ALIAS) and not _alive(int(alias[len(ALIAS) :] or 0)):
                ip("link", "del", link["ifname"], check=False)
                removed.append(link["ifname"])
    return removed


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 of 198.18.0.0/15 that no local address uses (call under the lock)."""
    used = set()
    for entry in json.loads(ip("-j", "-4", "addr", "show").stdout or "[]"):
        for info in entry.get("addr_info", []):
            address = ipaddress.ip_address(info["local"])
            if address in TEST_NET:
                used.add(ipaddress.ip_network(f"{address}/24", strict=False))
    for subnet in TEST_NET.subnets(new_prefix=24):
        if subnet not in used:
            return subnet
    raise NetnsUnavailable("every /24 of 198.18.0.0/15 is in use")


@dataclass
class Node:
    """One network namespace on the bridge: a host of its own with one address."""

    name: str
    address: str
    host_veth: str  # the bridge's end, in this host's namespace
    network: Network
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the namespace (``ip netns exec`` execs it: same pid)."""
        return ["ip", "netns", "exec", self.name, *argv]

    def popen(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, **kwargs: Any
    ) -> subprocess.Popen[bytes]:
        """Start a process inside the namespace; destroy() kills it if it still runs."""
        process = subprocess.Popen(self.command(argv), env=env, **kwargs)
        self.processes.append(process)
        return process

    def run(self, argv: Sequence[str], timeout: float = 20) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(argv), capture_output=True, text=True, timeout=timeout, check=False
        )

    def link_down(self) -> None:
        """Cut this node off: its veth goes down, packets either way are dropped."""
        ip("link", "set", self.host_veth, "down")

    def link_up(self) -> None:
        ip("link", "set", self.host_veth, "up")


class Network:
    """A bridge with nodes; ``with Network() as net:`` removes everything on exit."""

    def __init__(self) -> None:
        self.tag = secrets.token_hex(3)
        self.pid = os.getpid()
        self.bridge = f"a0b{self.tag}"
        self.subnet: ipaddress.IPv4Network | None = None
        self.nodes: list[Node] = []
        self._links: list[str] = []

    @property
    def host_address(self) -> str:
        """This host's address on the bridge: what servers for the nodes listen on."""
        assert self.subnet is not None, "the network is not created"
        return str(self.subnet.network_address + 1)

    def create(self) -> Network:
        with _locked():
            self.subnet = _free_subnet()
            ip("link", "add", self.bridge, "type", "bridge")
            self._links.append(self.bridge)
            ip("link", "set", self.bridge, "alias", f"{ALIAS}{self.pid}")
            ip("addr", "add", f"{self.host_address}/24", "dev", self.bridge)
            ip("link", "set", self.bridge, "up")
        return self

    def add_node(self) -> Node:
        """A new namespace joined to the bridge, loopback and veth up."""
        assert self.subnet is not None, "create() the network first"
        index = len(self.nodes)
        name = f"a0n-{self.pid}-{self.tag}-{index}"
        host_end, node_end = f"a0h{self.tag}{index}", f"a0v{self.tag}{index}"
        address = str(self.subnet.network_address + 10 + index)
        ip("netns", "add", name)
        node = Node(name, address, host_end, self)
        self.nodes.append(node)
        ip("link", "add", host_end, "type", "veth", "peer", "name", node_end)
        self._links.append(host_end)
        ip("link", "set", host_end, "alias", f"{ALIAS}{self.pid}")
        ip("link", "set", node_end, "netns", name)
        ip("link", "set", host_end, "master", self.bridge)
        ip("link", "set", host_end, "up")
        ip("-n", name, "link", "set", "lo", "up")
        ip("-n", name, "addr", "add", f"{address}/24", "dev", node_end)
        ip("-n", name, "link", "set", node_end, "up")
        return node

    def destroy(self) -> None:
        """Kill the nodes' processes, remove namespaces and links; never raises."""
        for node in self.nodes:
            for process in node.processes:
                if process.poll() is None:
                    process.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(10)
                for pipe in (process.stdin, process.stdout, process.stderr):
                    if pipe is not None:
                        with contextlib.suppress(OSError):
                            pipe.close()
            _kill_namespace_processes(node.name)
        for link in reversed(self._links):  # a veth pair goes with either end
            ip("link", "del", link, check=False)
        for node in self.nodes:
            ip("netns", "del", node.name, check=False)
        self.nodes.clear()
        self._links.clear()

    def leftovers(self) -> list[str]:
        """Namespaces and links of this network that still exist (empty after destroy)."""
        names = {n.split()[0] for n in ip("netns", "list").stdout.splitlines() if n.strip()}
        mine = [n for n in names if n.startswith(f"a0n-{self.pid}-{self.tag}-")]
        return mine + [link["ifname"] for link in _links() if self.tag in link["ifname"]]

    def __enter__(self) -> Network:
        try:
            return self.create()
        except BaseException:
            self.destroy()
            raise

    def __exit__(self, *exc: object) -> None:
        self.destroy()


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.02) -> Any:
    """Poll ``predicate`` until it returns something truthy, within a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
