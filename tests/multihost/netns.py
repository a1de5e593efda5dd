"""Hosts as Linux network namespaces, for the multi-host tests (root only).

Every host is a namespace with its own loopback and one veth per network it is on; each network
is a bridge in a namespace of its own, so that nothing is added to the machine's own namespace
and no packet can leave the namespaces made here. Addresses come from the benchmark range
198.18.0.0/15. Every name carries the prefix `cq<pid>-` of the test process that made it: a
new run deletes what a dead run left, and the harness deletes all of its own when it ends
(finalizer and atexit alike).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import itertools
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field

CLONE_NEWNET = 0x40000000
NETNS_DIR = "/run/netns"
LEFTOVER = re.compile(r"^cq(\d+)-")
# The third octet of each network's /24 in 198.18.0.0/15.
NETWORKS = {"back": 0, "front": 1}


def ip(*args: str) -> str:
    """Run `ip ARGS`; its output, or an error with what it said."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def netns_names() -> list[str]:
    """Every network namespace name on the machine."""
    return [line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers() -> list[str]:
    """Delete the namespaces of dead harness runs (their veths and bridges go with them)."""
    removed = []
    for name in netns_names():
        found = LEFTOVER.match(name)
        if found and not _pid_alive(int(found.group(1))):
            with contextlib.suppress(RuntimeError):
                ip("netns", "del", name)
                removed.append(name)
    return removed


def _setns(path: str) -> None:
    """Move the calling thread into the network namespace at `path`."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if ctypes.CDLL("libc.so.6", use_errno=True).setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {path}")
    finally:
        os.close(fd)


@dataclass
class Host:
    """One namespace: its name, its short tag (in interface names), its address per network."""

    ns: str
    tag: str
    addresses: dict[str, str] = field(default_factory=dict)

    @property
    def ip(self) -> str:
        """Its address on the back network (where Redis, workers and the upstream are)."""
        return self.addresses.get("back") or next(iter(self.addresses.values()))

    def veth(self, network: str) -> str:
        """The name of its interface on `network` (inside its namespace)."""
        return f"{self.ns.split('-', 1)[0]}-{self.tag}{network[0]}"

    @property
    def prefix(self) -> list[str]:
        """The command prefix that runs a program on this host."""
        return ["ip", "netns", "exec", self.ns]


class Net:
    """Hosts on networks; `cut` and `mend` take one host's link down and up."""

    made = itertools.count()

    def __init__(self) -> None:
        # One number per Net of this process: a Net whose deletion failed stands in no one's way.
        self.prefix = f"cq{os.getpid()}-{next(Net.made)}-"
        self.switch = self.prefix + "net"
        self.hosts: dict[str, Host] = {}
        self._made: list[str] = []
        remove_leftovers()
        atexit.register(self.delete)
        self._add_ns(self.switch)
        for network in NETWORKS:
            bridge = self._bridge(network)
            ip("-n", self.switch, "link", "add", bridge, "type", "bridge")
            ip("-n", self.switch, "link", "set", bridge, "up")

    def _bridge(self, network: str) -> str:
        # In this Net's own switch namespace: no number needed (interface names are short).
        return f"cq{os.getpid()}-br{network[0]}"

    def _add_ns(self, name: str) -> None:
        ip("netns", "add", name)
        self._made.append(name)
        ip("-n", name, "link", "set", "lo", "up")

    def add(self, name: str, tag: str, networks: tuple[str, ...] = ("back",)) -> Host:
        """A host on `networks`, tagged `tag` (at most 3 characters) in interface names."""
        host = Host(self.prefix + name, tag)
        self._add_ns(host.ns)
        number = 10 + len(self.hosts)
        for network in networks:
            inner, outer = host.veth(network), host.veth(network) + "x"
            peer = ("peer", outer, "netns", self.switch)
            ip("-n", host.ns, "link", "add", inner, "type", "veth", *peer)
            ip("-n", self.switch, "link", "set", outer, "master", self._bridge(network), "up")
            address = f"198.18.{NETWORKS[network]}.{number}"
            ip("-n", host.ns, "addr", "add", f"{address}/24", "dev", inner)
            ip("-n", host.ns, "link", "set", inner, "up")
            host.addresses[network] = address
        self.hosts[name] = host
        return host

    def cut(self, name: str, network: str = "back") -> None:
        """Take host `name`'s link to `network` down."""
        host = self.hosts[name]
        ip("-n", host.ns, "link", "set", host.veth(network), "down")

    def mend(self, name: str, network: str = "back") -> None:
        """Bring host `name`'s link to `network` back up."""
        host = self.hosts[name]
        ip("-n", host.ns, "link", "set", host.veth(network), "up")

    def pids(self, name: str) -> list[int]:
        """The processes running on host `name`."""
        return [int(p) for p in ip("netns", "pids", self.hosts[name].ns).split()]

    @contextlib.contextmanager
    def inside(self, name: str) -> Iterator[Host]:
        """Run the calling thread (and the threads it starts) on host `name` meanwhile."""
        home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            _setns(f"{NETNS_DIR}/{self.hosts[name].ns}")
            yield self.hosts[name]
        finally:
            if ctypes.CDLL("libc.so.6", use_errno=True).setns(home, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back home")
            os.close(home)

    def delete(self) -> None:
        """Delete every namespace made (their veths and bridges with them)."""
        while self._made:
            with contextlib.suppress(RuntimeError):
                ip("netns", "del", self._made.pop())
        atexit.unregister(self.delete)
