"""Installed distributions made on the fly: a ``*.dist-info`` directory with its entry points and
the modules they name, in a directory a test puts on ``sys.path`` (or ``PYTHONPATH``). It is what
``pip install`` leaves behind, so ``importlib.metadata`` finds it as it finds any plugin."""

from __future__ import annotations

import textwrap
from pathlib import Path


def fake_dist(site: Path, name: str, version: str, entry_points: dict[str, dict[str, str]],
              modules: dict[str, str] | None = None) -> Path:
    """Write distribution ``name`` ``version`` into ``site``: its metadata, its entry points by
    group, and ``modules`` (dotted name -> source). Returns ``site``."""
    site.mkdir(parents=True, exist_ok=True)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = []
    for group, items in entry_points.items():
        lines.append(f"[{group}]")
        lines += [f"{key} = {value}" for key, value in items.items()]
        lines.append("")
    (info / "entry_points.txt").write_text("\n".join(lines))
    for dotted, source in (modules or {}).items():
        path = site.joinpath(*dotted.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(site).parents:
            if str(parent) != ".":
                (site / parent / "__init__.py").touch()
        path.write_text(textwrap.dedent(source))
    return site


#: a plugin scenario on the reference runtime: it fails, with its signature, when the reference
#: runtime's ``lost-sharding`` switch is on
REFERENCE_SCENARIO = '''
from harness import api

class Seen(AssertionError):
    pass

def _variant(ctx):
    from harness.runtime import faults
    if faults.active("lost-sharding"):
        raise Seen("the switch is on")

SCENARIO = api.Scenario(
    id="plug-seen", title="a plugin's scenario", upstream=(), component="test",
    trigger="look at the switch", fault="lost-sharding",
    signatures=(api.Signature("seen", "plug_pkg.scen:Seen", "switch is on"),),
    variants={"look": _variant},
)
NOT_A_SCENARIO = 42
WRONG_ID = api.Scenario(
    id="other-id", title="t", upstream=(), component="c", trigger="t", fault="lost-sharding",
    signatures=(), variants={},
)
ON_UNKNOWN_RUNTIME = api.Scenario(
    id="plug-elsewhere", title="t", upstream=(), component="c", trigger="t", fault="x",
    signatures=(), variants={}, runtime="nowhere",
)
'''

INVARIANTS = '''
from hypothesis import strategies as st
from harness import api

def _check(n):
    assert n >= 0

GOOD = api.Invariant(id="plug-inv", title="a plugin's invariant", check=_check,
                     examples=lambda: st.fixed_dictionaries({"n": st.integers(0, 3)}),
                     needs=(api.TENSORS,))
ODD_NEED = api.Invariant(id="plug-odd", title="t", check=_check,
                         examples=lambda: st.just({"n": 1}), needs=("teleport",))
'''

ADAPTERS = '''
from harness import api

class Partial:
    name = "partial"
    capabilities = frozenset()

class Teleporting(api.BaseAdapter):
    name = "teleporting"
    capabilities = frozenset({"teleport"})
    def device_count(self): return 1
    def tensor(self, host): return host
    def to_host(self, t): return t
    def mesh(self, ids, shape, names): return None
    def mark_sharding(self, t, mesh, spec): return t
    def sharding_spec(self, t): return None
    def device_shards(self, t): return {}
    def derive(self, t): return t * 2 + 1

class Misnamed(Teleporting):
    name = "something-else"
    capabilities = frozenset({api.TENSORS})

class Good(Teleporting):
    name = "good"
    capabilities = frozenset({api.TENSORS})
'''
