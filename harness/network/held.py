"""A fabric held by a process of its own, for hosts whose daemons outlive any one command: the
one-machine SLURM cluster's nodes (``ci/cluster.sh start --network namespaces``).

A :class:`~harness.network.fabric.Fabric` lives as long as its ``with`` block. A cluster is
started by one command and stopped by another, so ``up`` keeps the block open in a process that
does nothing else: it makes the fabric, writes its plan where the other commands read it, and
removes the fabric, with every process still in it, when it is told to stop (SIGTERM, SIGINT,
SIGHUP). While it lives it holds the fabric's lock, so a sweep leaves the fabric alone; once it is
killed outright, the fabric is an orphan that ``ci/network.sh sweep`` removes.

    python -m harness.network.held up --names N1,N2,... --plan FILE
    python -m harness.network.held hosts --plan FILE      one line a host: NAME NAMESPACE ADDRESS
    python -m harness.network.held exec --plan FILE NAME -- ARGV...   ARGV as host NAME

The plan holds the fabric's number and the hosts' names only: every address and namespace is
computed from them by ``harness.network.addresses``, here as everywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from types import FrameType

from harness.network.addresses import FabricPlan, HostPlan
from harness.network.fabric import Fabric, FabricError, host_argv


def read_plan(path: Path) -> FabricPlan:
    """The plan ``up`` wrote; a missing one says that no fabric is held there."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise FabricError(f"no held fabric at {path} ({exc})") from None
    names = tuple(data["names"])
    return FabricPlan(int(data["number"]), len(names), names)


def _host(plan: FabricPlan, name: str) -> HostPlan:
    for host in plan.members:
        if host.hostname == name:
            return host
    raise FabricError(f"no host {name!r} in fabric {plan.number} ({', '.join(plan.names)})")


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def up(names: list[str], plan_path: Path) -> int:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    try:
        with Fabric(len(names), names) as fabric:
            assert fabric.plan is not None
            tmp = plan_path.with_name(plan_path.name + ".new")
            tmp.write_text(json.dumps({"number": fabric.plan.number, "names": names, "pid": os.getpid()}))
            tmp.replace(plan_path)  # whole or absent: a reader never sees half a plan
            print(f"fabric {fabric.plan.number} held: " + ", ".join(
                f"{h.hostname} {h.address}" for h in fabric.members), flush=True)
            while True:
                signal.pause()
    finally:
        plan_path.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.network.held")
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("up", help="make a fabric and hold it until SIGTERM")
    make.add_argument("--names", required=True, help="the hosts' hostnames, comma-separated")
    make.add_argument("--plan", type=Path, required=True)
    hosts = sub.add_parser("hosts", help="the held fabric's hosts: NAME NAMESPACE ADDRESS")
    hosts.add_argument("--plan", type=Path, required=True)
    run = sub.add_parser("exec", help="run a command as one host of the held fabric")
    run.add_argument("--plan", type=Path, required=True)
    run.add_argument("name")
    run.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            return up([n for n in args.names.split(",") if n], args.plan)
        plan = read_plan(args.plan)
        if args.command == "hosts":
            for host in plan.members:
                print(host.hostname, host.namespace, host.address)
            return 0
        command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        if not command:
            parser.error("exec needs a command after the host's name")
        argv = host_argv(_host(plan, args.name), command)
        os.execvp(argv[0], argv)
    except (FabricError, ValueError) as exc:
        print(f"held fabric: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
