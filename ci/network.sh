#!/usr/bin/env bash
# The hosts of the network-fault suites (suites/network, xharness nemesis): each a network and UTS
# namespace on a bridge in a hub namespace, addresses from 198.18.0.0/15 only, nothing routed out.
# The harness makes and removes them itself (harness.network.fabric); this script is for what an
# interrupted run left, and for CI's proof that nothing was left.
#
#   ci/network.sh install  install nftables and iproute2 from the OS packages when missing (root)
#   ci/network.sh sweep    remove every fabric no live run holds (namespaces, /etc/netns entries)
#   ci/network.sh check    exit 1 when a namespace, /etc/netns entry or nftables table of the
#                          harness is left (names xh<N>-...), or the root namespace has an xh link
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
  install)
    missing=()
    command -v nft >/dev/null || missing+=(nftables)
    command -v ip >/dev/null || missing+=(iproute2)
    [ ${#missing[@]} -eq 0 ] && exit 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
      echo "network: missing ${missing[*]}: install them (apt-get install ${missing[*]}) as root" >&2; exit 3
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    ;;
  sweep)
    exec .venv/bin/xharness nemesis --sweep
    ;;
  check)
    left=$(.venv/bin/python -c 'from harness.network import fabric; print(" ".join(fabric.leftovers()))')
    links=$(ip -o link show | awk -F': ' '{print $2}' | grep -E '^xh[0-9]' || true)
    tables=$(nft list tables 2>/dev/null | grep -E 'xh_cut' || true)
    if [ -n "$left$links$tables" ]; then
      echo "network: left behind: ${left} ${links} ${tables}" >&2; exit 1
    fi
    echo "network: nothing left behind"
    ;;
  *)
    echo "usage: ci/network.sh install|sweep|check" >&2; exit 2
    ;;
esac
