"""The network room's pure parts, without root: names and addresses, the nftables text, the
fault values, the blame read from real JAX messages, and each check over histories that hold and
histories that break it (every check seen failing)."""

from __future__ import annotations

import ipaddress

import pytest

from harness.network import blame, checks, firewall
from harness.network.addresses import BLOCK, FabricPlan, is_ours
from harness.network.faults import AtPoint, Flap, Kill, Late, Partition, Pause, heals_within
from harness.network.history import History, RankEnd

# what JAX 0.10.2 printed here, abridged to the lines the blame reads
UNHEALTHY = ("E1205 18:56:47.356769 5135 coordination_service.cc:1549] [1976] Use error polling to propagate "
             "the following error to all tasks: UNAVAILABLE: The following tasks are unhealthy (stopped "
             "sending heartbeats):\n1\nThe tasks have crashed. Check the task logs for an earlier error.\n")
HEARTBEAT_RPC = ("F1205 18:52:39.370286 3102 client.h:80] Terminating process because the JAX distributed "
                 "service detected fatal errors. absl::Status: DEADLINE_EXCEEDED: Deadline Exceeded\n"
                 "RPC: /xla.coordination.CoordinationService/Heartbeat\n")
TASK_TIMEOUT = "Barrier failed because: task is set to ERROR: UNAVAILABLE: Task 1 heartbeat timeout. This indicates\n"
LEADER = ("absl::Status: UNAVAILABLE: Failed to send RPC to coordination service. Either the leader task "
          "was preempted/died/restarted unexpectedly or this task is experiencing network issues.\n")
ADDRESSES = {"198.18.0.1": 0, "198.18.0.2": 1}


def test_every_address_is_in_the_benchmarking_block_and_every_name_fits_the_kernel() -> None:
    for number in (0, 1, 255, 511):
        plan = FabricPlan(number, 8)
        for host in plan.members:
            assert ipaddress.ip_address(host.address) in BLOCK
            assert ipaddress.ip_address(host.address) in plan.network
            assert len(host.peer_device) <= 15 and len(plan.bridge) <= 15
            assert is_ours(host.namespace)
        assert is_ours(plan.hub)
        assert f"{plan.members[1].address} {plan.members[1].hostname}" in plan.hosts_file()
    assert len({FabricPlan(n, 1).network for n in range(512)}) == 512
    with pytest.raises(ValueError):
        FabricPlan(512, 2)
    for name in ("xhost", "xh-1", "xh1-foo", "eth0", "xh1h0", "ns1"):
        assert not is_ours(name), name


def test_a_partition_drops_what_it_names_and_nothing_else() -> None:
    text = firewall.ruleset(3, ["198.18.0.1", "198.18.0.3"], "out", "all", 8476)
    assert "table inet xh_cut3" in text and "hook output" in text and "hook input" not in text
    assert "ip daddr { 198.18.0.1, 198.18.0.3 } drop" in text
    coordinator = firewall.ruleset(1, ["198.18.0.1"], "in", "coordinator", 8476)
    assert "ip saddr { 198.18.0.1 } tcp dport 8476 drop" in coordinator
    assert "ip saddr { 198.18.0.1 } tcp sport 8476 drop" in coordinator
    collectives = firewall.ruleset(1, ["198.18.0.1"], "both", "collectives", 8476).splitlines()
    # the coordinator's port is let through before the drop, in both chains
    for chain in ("saddr", "daddr"):
        rules = [r.strip() for r in collectives if f"ip {chain}" in r]
        assert rules == [f"ip {chain} {{ 198.18.0.1 }} tcp dport 8476 accept",
                         f"ip {chain} {{ 198.18.0.1 }} tcp sport 8476 accept", f"ip {chain} {{ 198.18.0.1 }} drop"]
    with pytest.raises(ValueError):
        firewall.ruleset(1, [], "both", "all", 1)


def test_fault_values_refuse_what_cannot_happen() -> None:
    with pytest.raises(ValueError):
        Partition(1, direction="sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Kill(0, heal_after=1.0)
    with pytest.raises(ValueError):
        AtPoint("collective")
    with pytest.raises(ValueError):
        Flap(1, times=0)
    assert Flap(1, down=1.5, up=1.0, times=3).cuts() == [(0.0, 1.5), (2.5, 4.0), (5.0, 6.5)]
    assert heals_within(Pause(1, heal_after=2.0), 5.0) and not heals_within(Pause(1, heal_after=6.0), 5.0)
    assert not heals_within(Partition(1), 5.0) and heals_within(Late(1, seconds=3.0), 5.0)
    assert "inbound, collectives only" in Partition(1, direction="in", traffic="collectives").describe()


@pytest.mark.parametrize(("text", "ranks", "kind"), [
    (UNHEALTHY, {1}, blame.CRASHED),
    (HEARTBEAT_RPC, {0}, blame.UNREACHABLE),
    (TASK_TIMEOUT, {1}, blame.HEARTBEAT),
    (LEADER, {0}, blame.UNREACHABLE),
    ("Gloo context initialization failed: timed out connecting: SO_ERROR: Connection refused, "
     "remote=[198.18.0.2]:40321", {1}, blame.UNREACHABLE),
    ("ExecutionTimeoutError: reading a value: execution 3 has not completed within 5 s", set(), blame.TIMEOUT),
])
def test_the_blame_is_read_from_the_runtimes_own_words(text: str, ranks: set[int], kind: str) -> None:
    said = blame.read(text, ADDRESSES)
    assert said is not None and said.ranks == frozenset(ranks) and said.kind == kind
    assert not said.evidence.startswith(("E1205", "F1205"))  # glog's head is not evidence
    assert blame.read("ValueError: bad shape", ADDRESSES) is None


def _history(ends: dict[int, tuple[int | None, float | None, str]], collectives: dict[int, list[tuple[int, bool]]],
             fault_at: float | None = 1.0, checkpoints: dict[int, str | None] | None = None) -> History:
    h = History(ranks=2, heartbeat=5.0, faults=["a fault"])
    for rank in (0, 1):
        h.add(0.0, "rank-start", rank)
    if fault_at is not None:
        h.add(fault_at, "fault-start", 1)
    for rank, rows in collectives.items():
        for k, ok in rows:
            right = [float(k), float(2 * k)]
            h.add(0.5 + k, "rank-event", rank, event="collective", k=k, value=right if ok else [0.0, 0.0],
                  expected=right, ok=ok)
    for rank, (code, at, stderr) in ends.items():
        h.ends[rank] = RankEnd(rank, code, at, stderr)
        if at is not None:
            h.add(at, "rank-exit", rank, code=code)
    h.checkpoints = checkpoints or {}
    return h


def test_bounded_fails_on_a_hang_and_on_an_end_past_the_bound() -> None:
    done = _history({0: (0, 3.0, ""), 1: (0, 3.0, "")}, {})
    assert checks.bounded(done, 10.0).holds is True
    hung = _history({0: (None, None, ""), 1: (-6, 4.0, "")}, {})
    assert checks.bounded(hung, 10.0).holds is False
    assert "killed by the harness" in checks.bounded(hung, 10.0).why
    slow = _history({0: (-6, 30.0, ""), 1: (-6, 4.0, "")}, {})
    assert checks.bounded(slow, 10.0).holds is False


def test_blamed_fails_on_crashed_for_a_partition_and_holds_for_a_kill() -> None:
    cut = _history({0: (-6, 7.0, UNHEALTHY), 1: (-6, 7.0, HEARTBEAT_RPC)}, {})
    verdict = checks.blamed(cut, [Partition(1)], ADDRESSES)
    assert verdict.holds is False and "rank 0 blamed crashed" in verdict.why
    assert "rank 1 blamed" not in verdict.why  # rank 1, cut off, rightly blamed its lost coordinator
    killed = _history({0: (-6, 7.0, TASK_TIMEOUT), 1: (-9, 1.0, "")}, {})
    assert checks.blamed(killed, [Kill(1)], ADDRESSES).holds is True
    silent_failure = _history({0: (1, 7.0, "ValueError: nothing about the network"), 1: (0, 7.0, "")}, {})
    assert checks.blamed(silent_failure, [Partition(1)], ADDRESSES).holds is False
    before = _history({0: (1, 0.5, UNHEALTHY), 1: (1, 0.5, "")}, {}, fault_at=1.0)
    assert checks.blamed(before, [Partition(1)], ADDRESSES).holds is None  # failed before any fault


def test_survived_fails_when_a_short_fault_ends_the_job_or_loses_a_step() -> None:
    short = [Pause(1, heal_after=2.0)]
    whole = _history({0: (0, 5.0, ""), 1: (0, 5.0, "")}, {0: [(1, True), (2, True)], 1: [(1, True), (2, True)]})
    assert checks.survived(whole, short, 2).holds is True
    died = _history({0: (-6, 5.0, UNHEALTHY), 1: (-6, 5.0, "")}, {0: [(1, True)], 1: [(1, True)]})
    assert checks.survived(died, short, 2).holds is False
    twice = _history({0: (0, 5.0, ""), 1: (0, 5.0, "")}, {0: [(1, True), (1, True)], 1: [(1, True), (2, True)]})
    assert "not 1..2 once each" in checks.survived(twice, short, 2).why
    assert checks.survived(whole, [Partition(1)], 2).holds is None  # never heals: n/a


def test_silent_fails_on_a_wrong_value() -> None:
    right = _history({0: (0, 5.0, ""), 1: (0, 5.0, "")}, {0: [(1, True)], 1: [(1, True)]})
    assert checks.silent(right).holds is True
    stale = _history({0: (0, 5.0, ""), 1: (0, 5.0, "")}, {0: [(1, True)], 1: [(1, False)]})
    assert checks.silent(stale).holds is False and "rank 1 collective 1" in checks.silent(stale).why


def test_torn_fails_on_a_half_file_a_lost_save_and_a_wrong_value() -> None:
    def saved(rank_k: int, text: str | None) -> History:
        h = _history({0: (0, 5.0, ""), 1: (0, 5.0, "")}, {}, checkpoints={0: text})
        h.add(4.0, "rank-event", 0, event="checkpoint", k=rank_k)
        return h

    assert checks.torn(saved(2, '{"rank": 0, "k": 2, "value": [2.0, 4.0]}')).holds is True
    assert checks.torn(saved(2, '{"rank": 0, "k": 2, "val')).holds is False
    assert checks.torn(saved(2, None)).holds is False
    assert checks.torn(saved(2, '{"rank": 0, "k": 1, "value": [1.0, 2.0]}')).holds is False
    assert checks.torn(saved(2, '{"rank": 0, "k": 2, "value": [1.0, 2.0]}')).holds is False


def test_a_history_reads_back_as_it_was_written() -> None:
    h = _history({0: (0, 5.0, "x"), 1: (None, None, "")}, {0: [(1, True)]}, checkpoints={0: None})
    again = History.from_json(h.to_json())
    assert again.to_json() == h.to_json()
    assert again.ends[1].describe().startswith("did not end by itself")
