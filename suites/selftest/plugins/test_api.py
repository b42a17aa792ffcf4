"""The public surface for plugin authors: a plugin written against ``harness.api`` alone passes
every check the registries make of it. (That the documentation names and documents every name of
the surface is ``suites/selftest/test_docs.py``'s.)"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.cell_independent

PLUGIN = """
from hypothesis import strategies as st
from harness import api

class Mine(api.BaseAdapter):
    name = "mine"
    capabilities = frozenset({api.TENSORS, api.FAULT_SWITCHES})
    def device_count(self): return 1
    def tensor(self, host): return host.copy()
    def to_host(self, t): return t
    def mesh(self, ids, shape, names): return None
    def mark_sharding(self, t, mesh, spec): return t
    def sharding_spec(self, t): return None
    def device_shards(self, t): return {}
    def derive(self, t): return t * 2 + 1

SCENARIO = api.Scenario(id="mine-scenario", title="t", upstream=(), component="c", trigger="t",
                        fault="f", signatures=(api.Signature("s", AssertionError, "x"),),
                        variants={"v": lambda ctx: None}, needs=api.Needs(devices=1), runtime="mine")
INVARIANT = api.Invariant(id="mine-invariant", title="t", check=lambda n: None,
                          examples=lambda: st.just({"n": 1}), needs=(api.TENSORS,))
print(sorted(api.__all__) == sorted(n for n in dir(api) if not n.startswith("_") and n != "annotations"))
"""


def test_a_plugin_needs_nothing_but_harness_api() -> None:
    """In a fresh interpreter that imports only ``harness.api`` (no other harness module by name)."""
    done = subprocess.run([sys.executable, "-c", PLUGIN], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"  # __all__ is exactly the module's public names


def test_what_harness_api_names_passes_the_registries_checks() -> None:
    from harness import adapters, entrypoints
    from harness.properties import registry as invariants
    from harness.scenarios import registry as scenarios

    namespace: dict[str, object] = {}
    exec(compile(PLUGIN.replace("print(", "(").replace("\n(sorted", "\n_ = (sorted"), "plugin", "exec"),
         namespace)
    entry = entrypoints.EntryPoint("g", "mine", "plugin:Mine", "mine-dist", "1.0")
    assert adapters.check_adapter_class(entry, namespace["Mine"]) is None
    inv = entrypoints.EntryPoint("g", "mine-invariant", "plugin:INVARIANT", "mine-dist", "1.0")
    assert invariants.check_invariant(inv, namespace["INVARIANT"]) is None
    scen = entrypoints.EntryPoint("g", "mine-scenario", "plugin:SCENARIO", "mine-dist", "1.0")
    # the scenario's runtime must be registered: "mine" is not, here
    assert "not registered" in (scenarios.check_scenario(scen, namespace["SCENARIO"]) or "")
