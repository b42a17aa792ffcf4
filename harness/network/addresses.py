"""Names and addresses of the hosts of a fabric: pure, so that every other part agrees on them.

Every address comes from 198.18.0.0/15, the block reserved for network benchmarking (RFC 2544),
so a host of a fabric can never reach or shadow a real network. A fabric takes one /24 of that
block by its number (0 to 511), and its hosts take ``.1`` upwards. Interface names are short
(the kernel allows 15 characters), and every name the harness creates starts with ``xh`` so that a
sweep finds what an interrupted run left behind without touching anything else.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

BLOCK = ipaddress.ip_network("198.18.0.0/15")
PREFIX_LEN = 24
#: how many fabrics may exist at once on one machine (one /24 of the block each)
FABRICS = 2 ** (PREFIX_LEN - BLOCK.prefixlen)
#: hosts of one fabric (.1 to .250); the rest of the /24 is never used
MAX_HOSTS = 250
#: how a cell's ranks reach each other: over the loopback they share, or each a host of its own
LOOPBACK, NAMESPACES = "loopback", "namespaces"
NETWORKS = (LOOPBACK, NAMESPACES)
#: the prefix of every namespace, interface and /etc/netns directory the harness makes
NAME_PREFIX = "xh"
#: a hostname its owner may give a host: one DNS label
HOSTNAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


@dataclass(frozen=True)
class HostPlan:
    """One host of a fabric: its namespace, hostname, address and the two ends of its link."""

    fabric: int
    index: int  # 0-based: host 0 is the first rank (and the coordinator)
    name: str = ""  # the hostname its owner gave it (a cluster's node name); "": the namespace's

    @property
    def namespace(self) -> str:
        return f"{NAME_PREFIX}{self.fabric}-h{self.index}"

    @property
    def hostname(self) -> str:
        """The host's name is its namespace's, one name to look for in a log or ``ip netns``,
        unless its owner named it: a cluster's nodes keep the names its configuration knows."""
        return self.name or self.namespace

    @property
    def address(self) -> str:
        return str(subnet(self.fabric)[self.index + 1])

    #: the host's end of its link, inside its namespace
    device = "eth0"

    @property
    def peer_device(self) -> str:
        """The bridge's end of the host's link, inside the fabric's hub namespace."""
        return f"{NAME_PREFIX}{self.fabric}p{self.index}"


@dataclass(frozen=True)
class FabricPlan:
    """The names of a fabric of ``hosts`` hosts numbered ``number``: nothing is created here."""

    number: int
    hosts: int
    names: tuple[str, ...] = ()  # the hosts' hostnames, in order; none: their namespaces'

    def __post_init__(self) -> None:
        subnet(self.number)  # a number outside the block raises
        if not 1 <= self.hosts <= MAX_HOSTS:
            raise ValueError(f"a fabric has 1 to {MAX_HOSTS} hosts, not {self.hosts}")
        if self.names and (len(self.names) != self.hosts or len(set(self.names)) != self.hosts
                           or not all(HOSTNAME.fullmatch(n) for n in self.names)):
            raise ValueError(f"{self.hosts} hosts need {self.hosts} distinct hostnames, not {self.names}")

    @property
    def hub(self) -> str:
        """The namespace that holds the bridge: the root namespace never sees the fabric."""
        return f"{NAME_PREFIX}{self.number}-hub"

    @property
    def bridge(self) -> str:
        return f"{NAME_PREFIX}{self.number}br"

    @property
    def network(self) -> ipaddress.IPv4Network:
        return subnet(self.number)

    @property
    def members(self) -> tuple[HostPlan, ...]:
        names = self.names or ("",) * self.hosts
        return tuple(HostPlan(self.number, i, names[i]) for i in range(self.hosts))

    def hosts_file(self) -> str:
        """The ``/etc/hosts`` every host of the fabric sees (``ip netns exec`` mounts it): each
        hostname resolves to its own address, which is what gloo connects to."""
        lines = ["127.0.0.1 localhost", "::1 localhost"]
        lines += [f"{h.address} {h.hostname}" for h in self.members]
        return "\n".join(lines) + "\n"


def subnet(number: int) -> ipaddress.IPv4Network:
    """The /24 of fabric ``number`` inside 198.18.0.0/15."""
    if not 0 <= number < FABRICS:
        raise ValueError(f"fabric number {number} outside 0..{FABRICS - 1}")
    first = int(BLOCK.network_address) + number * 2 ** (32 - PREFIX_LEN)
    return ipaddress.ip_network((first, PREFIX_LEN))


def is_ours(name: str) -> bool:
    """Whether a namespace or ``/etc/netns`` entry is one a fabric makes (``xh<N>-...``)."""
    if not name.startswith(NAME_PREFIX):
        return False
    head, _, tail = name[len(NAME_PREFIX):].partition("-")
    return head.isdigit() and (tail == "hub" or (tail.startswith("h") and tail[1:].isdigit()))
