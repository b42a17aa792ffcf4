"""A fabric: hosts of their own on one machine, each a network and UTS namespace on a bridge.

Built from the kernel's own tools (``ip`` from iproute2), so what the harness does is what a user
would type: a hub namespace holds the bridge, every host is a namespace with one veth link to it,
an address from 198.18.0.0/15 (``harness.network.addresses``) and an ``/etc/netns/NS/hosts`` that
``ip netns exec`` mounts over ``/etc/hosts``, so that each hostname resolves to its own address
(gloo connects to the address of the process's hostname). Nothing is routed out of a fabric and
nothing in the root namespace changes: no link, no route, no rule.

A fabric's number is held by an ``flock`` on a file under ``LOCK_DIR`` for as long as its owner
lives, so concurrent runs never share one, and what a killed owner left behind is swept by the
next owner of that number or by :func:`sweep` (``ci/network.sh sweep``).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from harness.errors import UsageError
from harness.network.addresses import FABRICS, FabricPlan, HostPlan, is_ours

LOCK_DIR = Path("/run/xharness-net")
NETNS_ETC = Path("/etc/netns")
NETNS_RUN = Path("/run/netns")


class FabricError(UsageError):
    """A fabric cannot be made here (not root, no ``ip``, no namespaces): a usage problem of the
    machine, said with what to do, never a test failure."""


def unavailable() -> str:
    """Why no fabric can be made on this machine ("" when one can)."""
    if os.geteuid() != 0:
        return "network namespaces need root (run as root, or in CI as root)"
    for tool in ("ip", "nft", "tc", "unshare"):
        if shutil.which(tool) is None:
            package = {"ip": "iproute2", "tc": "iproute2", "nft": "nftables", "unshare": "util-linux"}[tool]
            return f"{tool} is not installed (apt-get install {package})"
    return ""


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """One ``ip`` command; a failure raises with its own words."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise FabricError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done


def namespaces() -> list[str]:
    """The named network namespaces of this machine."""
    try:
        return sorted(p.name for p in NETNS_RUN.iterdir())
    except OSError:
        return []


class Fabric:
    """``hosts`` hosts on a bridge, made on ``__enter__`` and removed, with every process in them,
    on ``__exit__``. ``exec_argv`` wraps a command to run as one of the hosts."""

    def __init__(self, hosts: int, names: Sequence[str] = ()) -> None:
        self.hosts = hosts
        self.names = tuple(names)  # the hosts' hostnames, when its owner names them
        self.plan: FabricPlan | None = None
        self._lock: int | None = None

    # ------------------------------------------------------------------------------ life cycle
    def __enter__(self) -> Fabric:
        why = unavailable()
        if why:
            raise FabricError(f"cannot make a network of hosts: {why}")
        number, self._lock = _take_number()
        try:
            self.plan = FabricPlan(number, self.hosts, self.names)
            remove(self.plan.number)  # what a killed owner of this number left
            _build(self.plan)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.plan is not None:
            remove(self.plan.number)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    # ------------------------------------------------------------------------------ use
    @property
    def members(self) -> tuple[HostPlan, ...]:
        assert self.plan is not None, "the fabric is not made"
        return self.plan.members

    def host(self, index: int) -> HostPlan:
        return self.members[index]

    def exec_argv(self, index: int, argv: Sequence[str]) -> list[str]:
        """``argv`` run as host ``index``: in its network namespace, with its ``/etc/hosts``, and
        in a UTS namespace of its own whose hostname is the host's."""
        return host_argv(self.host(index), argv)

    def run_in(self, index: int, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A command of the host's network stack (``nft``, ``tc``), run in its namespace."""
        ns = self.host(index).namespace
        done = subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True)
        if check and done.returncode != 0:
            raise FabricError(f"{' '.join(argv)} in {ns}: {done.stderr.strip() or done.returncode}")
        return done


def host_argv(host: HostPlan, argv: Sequence[str]) -> list[str]:
    """``argv`` run as ``host`` (see :meth:`Fabric.exec_argv`), for an owner that holds the
    fabric in another process (``harness.network.held``)."""
    return ["ip", "netns", "exec", host.namespace, "unshare", "--uts", "--",
            "sh", "-c", 'hostname "$0" && exec "$@"', host.hostname, *argv]


def _lock(number: int) -> int | None:
    """Take fabric ``number``'s lock: the descriptor that holds it, or None when a live process
    holds it (closing the descriptor releases it)."""
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCK_DIR / f"fabric-{number}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _take_number() -> tuple[int, int]:
    """The lowest fabric number no live process holds, and the descriptor that holds it."""
    for number in range(FABRICS):
        fd = _lock(number)
        if fd is not None:
            return number, fd
    raise FabricError(f"all {FABRICS} fabric numbers are in use ({LOCK_DIR})")


def _build(plan: FabricPlan) -> None:
    ip("netns", "add", plan.hub)
    ip("-n", plan.hub, "link", "set", "lo", "up")
    ip("-n", plan.hub, "link", "add", plan.bridge, "type", "bridge")
    ip("-n", plan.hub, "link", "set", plan.bridge, "up")
    hosts_file = plan.hosts_file()
    for host in plan.members:
        ip("netns", "add", host.namespace)
        ip("-n", host.namespace, "link", "set", "lo", "up")
        ip("link", "add", host.device, "netns", host.namespace, "type", "veth",
           "peer", "name", host.peer_device, "netns", plan.hub)
        ip("-n", host.namespace, "addr", "add", f"{host.address}/{plan.network.prefixlen}",
           "dev", host.device)
        ip("-n", host.namespace, "link", "set", host.device, "up")
        ip("-n", plan.hub, "link", "set", host.peer_device, "master", plan.bridge, "up")
        etc = NETNS_ETC / host.namespace
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "hosts").write_text(hosts_file)


def _kill_inside(namespace: str) -> None:
    """SIGKILL every process in ``namespace``: a namespace outlives its name while one runs."""
    for _ in range(50):
        done = ip("netns", "pids", namespace, check=False)
        pids = [int(p) for p in done.stdout.split()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)


def remove(number: int) -> list[str]:
    """Remove fabric ``number``'s namespaces (their links and nftables tables go with them), the
    processes in them and their ``/etc/netns`` entries; the names removed."""
    prefix = f"xh{number}-"
    removed = []
    for ns in namespaces():
        if ns.startswith(prefix) and is_ours(ns):
            _kill_inside(ns)
            ip("netns", "delete", ns, check=False)
            removed.append(ns)
    try:
        entries = list(NETNS_ETC.iterdir())
    except OSError:
        entries = []
    for entry in entries:
        if entry.name.startswith(prefix) and is_ours(entry.name):
            shutil.rmtree(entry, ignore_errors=True)
            if entry.name not in removed:
                removed.append(entry.name)
    return removed


def _held(number: int) -> bool:
    """Whether a live process holds fabric ``number``."""
    fd = _lock(number)
    if fd is None:
        return True
    os.close(fd)
    return False


def _number(name: str) -> int:
    return int(name[2:].partition("-")[0])


def orphans() -> list[str]:
    """What the harness made and no live process holds: what an interrupted run left behind."""
    names = leftovers()
    held = {n: _held(n) for n in {_number(name) for name in names}}
    return [name for name in names if not held[_number(name)]]


def sweep() -> list[str]:
    """Remove every fabric no live process holds: what an interrupted run left behind."""
    removed = []
    for number in sorted({_number(name) for name in orphans()}):
        fd = _lock(number)
        if fd is None:
            continue  # a run took it meanwhile
        try:
            removed += remove(number)
        finally:
            os.close(fd)
    return removed


def leftovers() -> list[str]:
    """What the harness made and nothing removed yet: namespaces and ``/etc/netns`` entries."""
    names = [n for n in namespaces() if is_ours(n)]
    try:
        names += [e.name for e in NETNS_ETC.iterdir() if is_ours(e.name)]
    except OSError:
        pass
    return sorted(set(names))
