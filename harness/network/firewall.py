"""A partition as nftables text: pure, so that what is cut can be read and tested without root.

Each cut is a table of its own in the target host's namespace (``inet xh_cut<N>``), so that cuts
overlap and heal one by one (``nft delete table``). The coordination service is one TCP port on
the coordinator; gloo's collectives use other ports, so "coordinator" matches that port either
way and "collectives" everything else between the ranks (an ``accept`` ends only this table's
chain: another cut's table still sees the packet).
"""

from __future__ import annotations

from collections.abc import Sequence


def table_name(number: int) -> str:
    return f"xh_cut{number}"


def _rules(traffic: str, port: int, field: str, addresses: str) -> list[str]:
    """The rules of one chain. "collectives" lets the coordinator's port through and drops the
    rest: the shorter ``tcp sport != P tcp dport != P drop`` is merged by nft (1.0.6) into one
    comparison of the concatenated ports, which is true when either differs, and so drops the
    coordination service too."""
    peers = f"ip {field} {addresses}"
    if traffic == "all":
        return [f"{peers} drop"]
    if traffic == "coordinator":
        return [f"{peers} tcp dport {port} drop", f"{peers} tcp sport {port} drop"]
    if traffic == "collectives":
        return [f"{peers} tcp dport {port} accept", f"{peers} tcp sport {port} accept", f"{peers} drop"]
    raise ValueError(f"unknown traffic {traffic!r}")


def ruleset(number: int, peers: Sequence[str], direction: str, traffic: str, port: int) -> str:
    """The ``nft -f`` text of cut ``number``: drop the target's traffic with ``peers``."""
    if not peers:
        raise ValueError("a partition needs at least one peer")
    if direction not in ("both", "in", "out"):
        raise ValueError(f"unknown direction {direction!r}")
    addresses = "{ " + ", ".join(peers) + " }"
    chains = []
    if direction in ("both", "in"):
        rules = [f"    {r}" for r in _rules(traffic, port, "saddr", addresses)]
        chains.append("  chain input {\n    type filter hook input priority -10; policy accept;\n"
                      + "\n".join(rules) + "\n  }")
    if direction in ("both", "out"):
        rules = [f"    {r}" for r in _rules(traffic, port, "daddr", addresses)]
        chains.append("  chain output {\n    type filter hook output priority -10; policy accept;\n"
                      + "\n".join(rules) + "\n  }")
    return f"table inet {table_name(number)} {{\n" + "\n".join(chains) + "\n}\n"
