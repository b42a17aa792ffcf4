"""The nemesis for real: hosts of their own in network namespaces, each fault of the case table
run against JAX and judged, the verdicts compared with the release's measured row, and nothing
left behind. Needs root, iproute2 and nftables (ci/test.sh runs it as root); skipped otherwise."""

from __future__ import annotations

import subprocess
import sys

import jax
import pytest

from harness import network
from harness.network import JobSpec, Partition, fabric
from harness.network.cases import CASES, agrees, expected

pytestmark = pytest.mark.skipif(bool(fabric.unavailable()), reason=fabric.unavailable() or "available")
RELEASE = f"jax {jax.__version__}"


def _root_view() -> tuple[str, str, str]:
    """The root namespace's links, routes and rules: a fabric must change none of them."""
    run = lambda *a: subprocess.run(a, capture_output=True, text=True).stdout  # noqa: E731
    return run("ip", "-o", "link", "show"), run("ip", "route", "show", "table", "all"), run("nft", "list", "ruleset")


def test_hosts_have_their_own_names_addresses_and_no_way_out() -> None:
    before = _root_view()
    with network.Fabric(2) as made:
        h0, h1 = made.members
        probe = ("import socket; print(socket.gethostname(), socket.gethostbyname(socket.gethostname()),"
                 f" socket.gethostbyname('{h1.hostname}'))")
        out = subprocess.run(made.exec_argv(0, [sys.executable, "-c", probe]), capture_output=True, text=True)
        assert out.stdout.split() == [h0.hostname, h0.address, h1.address], out.stderr
        routes = made.run_in(0, "ip", "route", "show", "table", "all").stdout
        assert "default" not in routes and str(made.plan.network) in routes
        assert made.plan.hub in fabric.namespaces()
        number = made.plan.number
    assert _root_view() == before
    assert not [name for name in fabric.leftovers() if name.startswith(f"xh{number}-")]


def test_a_killed_owner_leaves_nothing_the_sweep_does_not_remove(tmp_path) -> None:
    code = ("import os, harness.network as n; f = n.Fabric(2).__enter__(); "
            "print(f.plan.number, flush=True); os._exit(0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    number = int(done.stdout)
    assert any(name.startswith(f"xh{number}-") for name in fabric.orphans())
    fabric.sweep()
    assert fabric.orphans() == []


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_fault_is_recorded_and_judged_as_measured(case) -> None:
    outcome = network.run_faulted(case.faults, case.spec, bound=case.bound)
    history = outcome.history
    # the record: every fault started (a late rank: started late), every rank ended
    if not any(isinstance(f, network.Late) for f in case.faults):
        assert history.of("fault-start"), outcome.report()
    assert sorted(history.ends) == list(range(case.spec.ranks))
    assert fabric.orphans() == []
    want = expected(case.name, RELEASE)
    if want is None:
        pytest.skip(f"no measured row for {case.name} on {RELEASE}: `xharness nemesis {case.name}` measures it")
    assert agrees(want, outcome.summary()), f"{case.name} on {RELEASE}: expected {want}\n{outcome.report()}"


def test_the_reference_runtime_bounds_a_gather_a_cut_peer_blocks(monkeypatch) -> None:
    """Without the bound the reference runtime's host read of a value split across processes
    blocked in gloo until the job's hard limit (bounded: violated, seen before the fix)."""
    spec = JobSpec(heartbeat=5.0, limit=40.0, runtime="reference", env={"HARNESS_WAIT_TIMEOUT": "5"})
    outcome = network.run_faulted([Partition(1, traffic="collectives")], spec, bound=15.0)
    assert outcome.verdicts["bounded"].holds is True, outcome.report()
    errors = [e for r in (0, 1) for e in outcome.history.rank_events(r, "error")]
    assert errors and all(e["type"] == "ExecutionTimeoutError" for e in errors), outcome.report()
    assert outcome.verdicts["silent"].holds is True


def test_the_stale_on_timeout_switch_is_caught_across_processes() -> None:
    """The same cut with the reference runtime's ``stale-on-timeout`` switch on in every rank: the
    timed-out gather hands back the last value read, and ``silent`` says so."""
    spec = JobSpec(heartbeat=5.0, limit=40.0, runtime="reference",
                   env={"HARNESS_WAIT_TIMEOUT": "5", "HARNESS_FAULTS": "stale-on-timeout"})
    outcome = network.run_faulted([Partition(1, traffic="collectives")], spec, bound=15.0)
    assert outcome.verdicts["silent"].holds is False, outcome.report()
    assert "collective 2 returned [1.0, 2.0], not [2.0, 4.0]" in outcome.verdicts["silent"].why
