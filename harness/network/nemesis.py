"""Starting and healing faults on a running job: the only code that touches a fabric's links.

Each fault becomes the kernel's own tool, run in the target host's namespace: a partition is an
nftables table (``harness.network.firewall``), a throttle a ``tc`` token bucket on both ends of
the host's link, a pause SIGSTOP and SIGCONT, a kill SIGKILL. A late start is the job's business
(it starts that rank later). Every action returns what it did, for the history.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable

from harness.network import firewall
from harness.network.fabric import Fabric, FabricError
from harness.network.faults import Fault, Flap, Kill, Late, Partition, Pause, Throttle

#: a rank's process id, or None once it has exited
PidOf = Callable[[int], int | None]


class Nemesis:
    """The faults of one job over ``fabric``, whose coordinator listens on ``port``."""

    def __init__(self, fabric: Fabric, port: int, pid_of: PidOf) -> None:
        self.fabric = fabric
        self.port = port
        self.pid_of = pid_of
        self._cuts = 0

    def _peers(self, rank: int) -> list[str]:
        return [h.address for h in self.fabric.members if h.index != rank]

    def cut(self, rank: int, direction: str = "both", traffic: str = "all") -> str:
        """Install a partition; returns the table that holds it (its heal deletes it)."""
        self._cuts += 1
        table = firewall.table_name(self._cuts)
        text = firewall.ruleset(self._cuts, self._peers(rank), direction, traffic, self.port)
        ns = self.fabric.host(rank).namespace
        done = subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=text,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise FabricError(f"nft in {ns}: {done.stderr.strip()}")
        return table

    def uncut(self, rank: int, table: str) -> None:
        self.fabric.run_in(rank, "nft", "delete", "table", "inet", table, check=False)

    def _signal(self, rank: int, sig: signal.Signals) -> str:
        pid = self.pid_of(rank)
        if pid is None:
            return "already exited"
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return "already exited"
        return f"{sig.name} to pid {pid}"

    def _throttle(self, rank: int, rate: str, on: bool) -> None:
        host = self.fabric.host(rank)
        assert self.fabric.plan is not None
        ends = [(host.namespace, host.device), (self.fabric.plan.hub, host.peer_device)]
        for ns, dev in ends:
            if on:
                argv = ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
                        "burst", "32kbit", "latency", "10s"]
            else:
                argv = ["tc", "qdisc", "del", "dev", dev, "root"]
            done = subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True)
            if on and done.returncode != 0:
                raise FabricError(f"{' '.join(argv)} in {ns}: {done.stderr.strip()}")

    def start(self, fault: Fault) -> str:
        """Start ``fault`` (a flap's first cut); returns what was done."""
        if isinstance(fault, Partition):
            return self.cut(fault.rank, fault.direction, fault.traffic)
        if isinstance(fault, Flap):
            return self.cut(fault.rank)
        if isinstance(fault, Pause):
            return self._signal(fault.rank, signal.SIGSTOP)
        if isinstance(fault, Kill):
            return self._signal(fault.rank, signal.SIGKILL)
        if isinstance(fault, Throttle):
            self._throttle(fault.rank, fault.rate, True)
            return f"tbf {fault.rate}"
        if isinstance(fault, Late):
            return "started late"
        raise TypeError(f"no way to start {type(fault).__name__}")

    def heal(self, fault: Fault, started: str) -> str:
        """End what ``start`` did (``started`` is what it returned)."""
        if isinstance(fault, Partition | Flap):
            self.uncut(fault.rank, started)
            return f"deleted {started}"
        if isinstance(fault, Pause):
            return self._signal(fault.rank, signal.SIGCONT)
        if isinstance(fault, Throttle):
            self._throttle(fault.rank, fault.rate, False)
            return "tbf removed"
        return "nothing to heal"
