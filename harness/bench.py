"""``xharness bench [CASE]``: measurements of the harness, each against a peer, in one run.

Cases (``BENCHES``; ``xharness bench`` alone runs ``step``):

- ``step``: steady-state training-step time of the reference runtime vs. plain JAX (below);
- ``race``: schedule control against the stress baseline on ``race-on-handles`` and ``wait-gap``
  (``harness.bench_race``);
- ``matrix``: the project's matrix run cold and warm, against an earlier revision
  (``harness.bench_matrix``).

The rest of this docstring is the ``step`` case.

Why it exists: the runtime records IR op by op in Python and only then hands XLA one program, so
its cost over ``jax.jit`` is per-step Python work (recording, graph walk, cache lookup, the
executor handoff). A tiny step shows that overhead almost alone; a medium step shows whether the
compiled program itself is as good as JAX's; the tiny ViT shows a realistic op count.

Cases (all data-parallel on a 1-D mesh of 4 CPU devices, or of every device of ``--backend gpu``
or ``tpu``: batch sharded, parameters replicated, SGD, parameters donated on both sides):

- ``tiny``: linear model, batch 64, 64 -> 16, MSE (per-step overhead dominates);
- ``medium``: linear model, batch 1024, 1024 -> 256, MSE (compute dominates);
- ``vit``: ``models.TinyViT`` (defaults, attention through the kernel path), batch 16,
  softmax cross-entropy.

Device count: JAX fixes it when its backend starts, and the process running the CLI may already
have started it with another count, so every case runs in a fresh child process
(``python -m harness.bench --child CASE``) with ``JAX_NUM_CPU_DEVICES=4``; the child prints one
JSON line and the parent collects them. With ``--backend gpu`` (or ``tpu``) the child selects that
platform (``JAX_PLATFORMS``) and shards over every device of it the process sees, one included (a
mesh of one device is still a mesh); a batch that the count does not divide is rounded up to a
multiple of it (1, 2, 4 and 8 devices divide every case's batch), and the table and JSON name the
device kind and count measured. The parent asks the matrix probe first, without starting JAX: a
backend whose plugin or devices are absent, or that JAX then fails to start in the child, ends
the command with exit 5 and the reason (``EXIT_NO_BACKEND``).

Timing method (the same on both sides, so the ratio is fair): each step is timed on its own, from
before the first op is recorded to the moment the step's results exist on the device:

- runtime: forward, ``backward``, ``opt.step``, ``opt.zero_grad``, ``xr.mark_step()``, then
  ``xr.wait_device_ops()``, which returns once the step's execution has completed on the device;
  nothing is read back to the host;
- JAX: one call of the ``jax.jit``-ed step (``donate_argnums`` on the parameters), then
  ``jax.block_until_ready`` on its outputs.

Both sides therefore pay dispatch and device time and neither pipelines one step under the next.
The reported figure is the median of the per-step times (``--steps``, at least 50 for a published
figure, after ``--warmup`` untimed steps that include every compile). Timed steps alternate in
blocks (runtime block, JAX block, then JAX first in the next round, ...) so that noise from a
shared machine lands on both sides alike. Before timing, the first step's loss of both sides is
compared: the two sides must compute the same thing for the ratio to mean anything.

The runtime's step is also reported by phase (medians): recording the ops (forward,
``backward``, optimizer), ``mark_step`` (the walk, the plan lookup, the launch) and the wait,
which holds the execution itself: the wait over ``jax.jit``'s whole step is the ratio the
runtime would have if its Python work cost nothing.

Targets (reported, never asserted: timing on a shared machine is not a test): tiny and ViT
ratios at most 1.3, medium at most 1.05. Runtime compiles during the timed steps must be 0; a
non-zero count makes the command exit 1.

Memory: after the timed steps, with each side still holding its last loss as a training loop
does, the live device bytes each side holds are measured as the drop in ``jax.live_arrays()``
bytes (every device's copy counted) when that side's objects are released: the JAX side first,
then the runtime side. They are reported next to the parameter plus optimizer-state bytes. With
param aliasing on, the runtime must hold no more than ``jax.jit`` does (updated parameters are
donated, so the buffers they replaced are gone); more makes the command exit 1. Process-wide
caches outlive both releases and are not counted: the runtime's packed Python scalars (a few
bytes, the counterpart of the constants ``jax.jit`` bakes into its program).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.backends import Backend
from harness.errors import UsageError
from harness.exits import EXIT_NO_BACKEND

if TYPE_CHECKING:  # numpy only where a case runs: the command line starts without it
    import numpy as np

DEVICES = 4
BLOCK = 10  # timed steps per interleaved block
#: backends ``--backend`` accepts (the platform each selects is the matrix's: ``config.BACKENDS``)
BENCH_BACKENDS: tuple[str, ...] = tuple(Backend)


@dataclass(frozen=True)
class Case:
    """One benchmark configuration."""

    name: str
    description: str
    target: float | None  # the ratio (runtime / jax) the runtime must stay at or under, if any
    target_text: str


CASES: dict[str, Case] = {
    "tiny": Case("tiny", "linear 64->16, batch 64, MSE, SGD", 1.3, "<= 1.3"),
    "medium": Case("medium", "linear 1024->256, batch 1024, MSE, SGD", 1.05, "<= 1.05"),
    "vit": Case("vit", "TinyViT (8x8x3, dim 16, depth 2), batch 16, softmax CE, SGD", 1.3, "<= 1.3"),
}

LINEAR_SIZES = {"tiny": (64, 64, 16), "medium": (1024, 1024, 256)}  # batch, in, out
VIT_BATCH = 16
LR = 0.01


# --------------------------------------------------------------------------- CLI (parent)


@dataclass(frozen=True)
class Bench:
    """One ``xharness bench`` case: what it measures and the function that runs it (it returns
    the exit code)."""

    name: str
    help: str
    run: Callable[[argparse.Namespace], int]


def backend_absent(backend: str) -> str | None:
    """Why ``backend`` cannot be measured here (the matrix probe's reason: no plugin, no device),
    or None. Asked without starting JAX, so the answer costs no backend start-up."""
    if backend == Backend.CPU:
        return None
    from harness.matrix.config import Cell
    from harness.matrix.probe import probe

    found = probe(Cell(name=f"bench-{backend}", backend=backend, devices=1))
    return None if found.available else found.reason


def _no_backend(backend: str, reason: str) -> int:
    print(f"xharness bench: {backend} backend not available: {reason}", file=sys.stderr)
    return EXIT_NO_BACKEND


def run_step(args: argparse.Namespace) -> int:
    if args.steps < 1 or args.warmup < 1:
        raise UsageError("--steps and --warmup must be at least 1")
    backend = getattr(args, "backend", Backend.CPU)
    absent = backend_absent(backend)
    if absent is not None:
        return _no_backend(backend, absent)
    names = [args.only] if args.only else list(CASES)
    devices = DEVICES if backend == Backend.CPU else None
    results = []
    for name in names:
        result = _run_child(name, args.steps, args.warmup, backend, devices)
        if result.get("no_backend"):  # the probe saw it, but JAX could not start it
            return _no_backend(backend, str(result["error"]))
        results.append(result)
    measured = next((r for r in results if "error" not in r), {})
    report = {
        "command": "xharness bench " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["bench"] else "xharness bench",
        "backend": backend,
        "devices": measured.get("devices", devices),
        "device_kind": measured.get("device_kind"),
        "steps": args.steps,
        "warmup": args.warmup,
        "method": "per-step wall time to device completion, median; runtime and jax blocks interleaved",
        "cases": results,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_table(report)
    failed = any("error" in r or r["runtime_compiles"]["timed"] != 0 or not _memory_ok(r) for r in results)
    return 1 if failed else 0


def _memory_ok(result: dict[str, Any]) -> bool:
    """With param aliasing on, the runtime holds no more device bytes than ``jax.jit`` does."""
    memory = result.get("memory")
    if memory is None or not result.get("param_aliasing", True):
        return True
    return bool(memory["runtime_bytes"] <= memory["jax_bytes"])


def run_race(args: argparse.Namespace) -> int:
    from harness import bench_race as race_bench

    if args.seeds < 1:
        raise UsageError("--seeds must be at least 1")
    cmd = [sys.executable, "-m", "harness.bench_race", "--seeds", str(args.seeds)]
    env = _child_env(race_bench.DEVICES)
    env.pop("HARNESS_FAULTS", None)  # the case switches the fault itself, on then off
    report = _child_report("race", cmd, env)
    if report is None:
        return 1
    report["command"] = "xharness bench race" + (f" --seeds {args.seeds}" if args.seeds != 20 else "")
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        race_bench.print_report(report)
    return race_bench.exit_code(report)


def _child_report(case: str, cmd: list[str], env: dict[str, str]) -> dict[str, Any] | None:
    """Run a benchmark child (a fresh process: the device count is fixed when JAX starts) and
    return the JSON document it printed last, or None after saying why there is none."""
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    except subprocess.TimeoutExpired:
        print(f"xharness bench {case}: the benchmark child timed out after 3600 s", file=sys.stderr)
        return None
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
        print(f"xharness bench {case}: the benchmark child exited {proc.returncode}", file=sys.stderr)
        print("\n".join(tail), file=sys.stderr)
        return None
    report: dict[str, Any] = json.loads(lines[-1])
    return report


def run_properties(args: argparse.Namespace) -> int:
    """Examples per second per invariant under the CI profile, in a fresh 8-device process."""
    cmd = [sys.executable, "-m", "harness.properties.speed", "--json"]
    report = _child_report("properties", cmd, _child_env(8))
    if report is None:
        return 1
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        from harness.properties.speed import Speed, table

        print("xharness bench properties: 8 CPU devices, CI profile (derandomized), generation phase only;")
        print("cold = first run in the process (compiles), warm = the same examples again")
        print(table([Speed(**{k: v for k, v in row.items() if k != "met"}) for row in report["invariants"]]))
    return 0


def run_matrix(args: argparse.Namespace) -> int:
    """The project's matrix, cold and warm, against a revision (``harness.bench_matrix``)."""
    from harness import bench_matrix

    return bench_matrix.run(args)


#: every case of ``xharness bench``, by name: a new case is one entry here
BENCHES: dict[str, Bench] = {
    "properties": Bench("properties", "examples per second per invariant (CI profile, 8 CPU devices)", run_properties),
    "step": Bench("step", "runtime step time vs. jax.jit (4 CPU devices, or --backend's)", run_step),
    "race": Bench("race", "PCT/DFS/random/hypothesis vs. stress on race-on-handles and wait-gap", run_race),
    "matrix": Bench("matrix", "the project's matrix run cold then warm (fresh caches, no history), the "
                    "working tree against --against REV: wall, cell-seconds, idle core-seconds, tests/s", run_matrix),
}


def _child_env(devices: int = DEVICES) -> dict[str, str]:
    env = dict(os.environ)
    env["JAX_NUM_CPU_DEVICES"] = str(devices)
    env["JAX_PLATFORMS"] = "cpu"
    # an inherited forced host device count would fight JAX_NUM_CPU_DEVICES
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")]
    env["XLA_FLAGS"] = " ".join(flags)
    return env


def _step_env(backend: str, devices: int | None) -> dict[str, str]:
    """The step child's environment: CPU devices made to the count, or the accelerator's platform
    selected with the devices the environment already shows (all of them, unless it narrows them)."""
    if backend == Backend.CPU:
        return _child_env(devices or DEVICES)
    from harness.matrix.config import BACKENDS

    env = dict(os.environ)
    env["JAX_PLATFORMS"] = BACKENDS[backend]
    return env


def _run_child(
    name: str, steps: int, warmup: int, backend: str = Backend.CPU, devices: int | None = DEVICES
) -> dict[str, Any]:
    """One case in a fresh child on ``backend``; ``devices`` is the count it must see (the CPU
    count it is given), None for every device of an accelerator."""
    cmd = [sys.executable, "-m", "harness.bench", "--child", name, "--steps", str(steps), "--warmup", str(warmup),
           "--backend", backend]
    if devices is not None:
        cmd += ["--devices", str(devices)]
    try:
        proc = subprocess.run(cmd, env=_step_env(backend, devices), capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        return {"name": name, "error": "benchmark child timed out after 1800 s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode == EXIT_NO_BACKEND and lines:
        absent: dict[str, Any] = json.loads(lines[-1])
        return {"name": name, "error": absent.get("error", "the backend did not start"), "no_backend": True}
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
        return {"name": name, "error": f"benchmark child exited {proc.returncode}", "stderr": "\n".join(tail)}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _print_table(report: dict[str, Any]) -> None:
    if report.get("backend", Backend.CPU) == Backend.CPU:
        where = f"{report['devices']} CPU devices"
    else:
        kind = report.get("device_kind") or "no case measured"
        where = f"{report['devices'] or 'no'} {report['backend'].upper()} device(s), {kind}"
    print(
        f"xharness bench: {where}, data-parallel; median of {report['steps']} "
        f"timed steps per side after {report['warmup']} warm-up steps"
    )
    header = (
        f"{'case':<8} {'runtime ms':>11} {'jax ms':>9} {'ratio':>7}  {'target':<14} {'compiles (warm-up/timed)':<25} "
        f"{'live KiB rt/jax (params+state)':<31} loss diff"
    )
    print(header)
    print("-" * len(header))
    for r in report["cases"]:
        if "error" in r:
            print(f"{r['name']:<8} ERROR: {r['error']}")
            if r.get("stderr"):
                print("  " + r["stderr"].replace("\n", "\n  "))
            continue
        c = r["runtime_compiles"]
        mark = "" if r["meets_target"] is None else (" ok" if r["meets_target"] else " MISSED")
        m = r["memory"]
        live = f"{m['runtime_bytes'] / 1024:.1f}/{m['jax_bytes'] / 1024:.1f} ({m['param_opt_bytes'] / 1024:.1f})"
        live += "" if _memory_ok(r) else " MORE"
        print(
            f"{r['name']:<8} {r['runtime_ms']['median']:>11.3f} {r['jax_ms']['median']:>9.3f} "
            f"{r['ratio']:>7.2f}  {r['target'] + mark:<14} {str(c['warmup']) + '/' + str(c['timed']):<25} "
            f"{live:<31} {r['loss_abs_diff']:.2e}"
        )
    for r in report["cases"]:
        if "error" not in r:
            ph = r["runtime_phases_ms"]
            print(
                f"  {r['name']}: {r['description']}; runtime step (medians) = record {ph['record']:.3f} + "
                f"mark_step {ph['mark_step']:.3f} + wait {ph['wait']:.3f} ms, the wait alone "
                f"{r['wait_over_jax']:.2f}x jax.jit's step"
            )


# --------------------------------------------------------------------------- child: the models


def _stats(times: list[float]) -> dict[str, float]:
    ms = sorted(t * 1e3 for t in times)
    return {
        "median": statistics.median(ms),
        "mean": statistics.fmean(ms),
        "p10": ms[int(0.1 * (len(ms) - 1))],
        "p90": ms[int(0.9 * (len(ms) - 1))],
        "min": ms[0],
    }


def _jax_linear(params: dict[str, Any], x: Any) -> Any:
    return x @ params["fc.weight"].T + params["fc.bias"]


def _jax_vit(cfg: dict[str, int]) -> Callable[[dict[str, Any], Any], Any]:
    """TinyViT's forward written directly in JAX (same layout as ``models.TinyViT``)."""
    import jax
    import jax.numpy as jnp

    from harness.runtime.kernels import attention_kernel

    def linear(p: dict[str, Any], name: str, x: Any) -> Any:
        return x @ p[name + ".weight"].T + p[name + ".bias"]

    def layernorm(p: dict[str, Any], name: str, x: Any) -> Any:
        c = x - x.mean(-1, keepdims=True)
        var = (c * c).mean(-1, keepdims=True)
        return c * jax.lax.rsqrt(var + 1e-5) * p[name + ".weight"] + p[name + ".bias"]

    g, pt, d, heads = cfg["image"] // cfg["patch"], cfg["patch"], cfg["dim"], cfg["heads"]

    def forward(p: dict[str, Any], images: Any) -> Any:
        b, c = images.shape[:2]
        patches = images.reshape(b, c, g, pt, g, pt).transpose(0, 2, 4, 1, 3, 5).reshape(b, g * g, c * pt * pt)
        x = (p["patch_embed.weight"] @ patches.transpose(0, 2, 1) + p["patch_embed.bias"]).transpose(0, 2, 1)
        x = jnp.concatenate([jnp.broadcast_to(p["cls_token"], (b, 1, d)), x], axis=1) + p["pos_embed"]
        n = x.shape[1]
        for i in range(cfg["depth"]):
            pre = f"blocks.{i}."
            qkv = linear(p, pre + "attn.qkv", layernorm(p, pre + "norm1", x))
            qkv = qkv.reshape(b, n, 3, heads, d // heads).transpose(2, 0, 3, 1, 4)
            out = attention_kernel(qkv[0], qkv[1], qkv[2]).transpose(0, 2, 1, 3).reshape(b, n, d)
            x = x + linear(p, pre + "attn.proj", out)
            hidden = jax.nn.gelu(linear(p, pre + "fc1", layernorm(p, pre + "norm2", x)), approximate=False)
            x = x + linear(p, pre + "fc2", hidden)
        return linear(p, "head", layernorm(p, "norm", x)[:, 0])

    return forward


def _fit(batch: int, devices: int) -> int:
    """The least multiple of ``devices`` at or above ``batch``: the batch is sharded over them."""
    return -(-batch // devices) * devices


@dataclass
class _Workload:
    """One case's model and data, and the same loss written for each side."""

    model: Any
    batch: int
    x_host: np.ndarray
    y_host: np.ndarray
    rt_loss: Callable[[Any, Any], Any]
    jax_forward: Callable[[dict[str, Any], Any], Any]
    jax_loss_of: Callable[[Any, Any], Any]

    @property
    def specs(self) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """The batch split over the mesh's ``data`` axis, inputs and labels."""
        return (("data",) + (None,) * (self.x_host.ndim - 1), ("data",) + (None,) * (self.y_host.ndim - 1))


def _workload(name: str, count: int, rng: np.random.Generator) -> _Workload:
    import jax
    import numpy as np

    from harness.runtime import models, nn

    if name in LINEAR_SIZES:
        batch, fin, fout = LINEAR_SIZES[name]
        batch = _fit(batch, count)
        return _Workload(models.LinearModel(fin, fout), batch,
                         rng.standard_normal((batch, fin)).astype(np.float32),
                         rng.standard_normal((batch, fout)).astype(np.float32),
                         nn.mse_loss, _jax_linear, lambda out, y: ((out - y) ** 2).mean())
    cfg = {"image": 8, "patch": 4, "channels": 3, "dim": 16, "depth": 2, "heads": 2, "classes": 10}
    batch = _fit(VIT_BATCH, count)
    return _Workload(models.TinyViT(**cfg), batch,
                     rng.standard_normal((batch, cfg["channels"], cfg["image"], cfg["image"])).astype(np.float32),
                     np.eye(cfg["classes"], dtype=np.float32)[rng.integers(0, cfg["classes"], batch)],
                     nn.cross_entropy, _jax_vit(cfg),
                     lambda out, y: -(jax.nn.log_softmax(out, axis=-1) * y).sum(-1).mean())


class _JaxSide:
    """The peer: the same step as one ``jax.jit`` program, same initial parameters, same layout."""

    def __init__(self, work: _Workload, mesh: Any) -> None:
        import jax
        from jax.sharding import NamedSharding, PartitionSpec

        import harness.runtime as xr

        jmesh = mesh.jax_mesh
        replicated = NamedSharding(jmesh, PartitionSpec())
        params = {k: jax.device_put(p.numpy(), replicated) for k, p in work.model.named_parameters()}
        batch_spec, label_spec = work.specs
        x = jax.device_put(work.x_host, NamedSharding(jmesh, PartitionSpec(*batch_spec)))
        y = jax.device_put(work.y_host, NamedSharding(jmesh, PartitionSpec(*label_spec)))

        forward, loss_of = work.jax_forward, work.jax_loss_of  # not the workload: it holds the model

        def step(params: dict[str, Any], x: Any, y: Any) -> tuple[dict[str, Any], Any]:
            # the precision the runtime's programs ask for, so that both sides do the same arithmetic
            # (left to JAX's default, a GPU's float32 products would be TF32 on this side only)
            with jax.default_matmul_precision(xr.options.matmul_precision):
                loss, grads = jax.value_and_grad(lambda p: loss_of(forward(p, x), y))(params)
            return jax.tree.map(lambda p, g: p - g * LR, params, grads), loss

        self.jitted = jax.jit(step, donate_argnums=(0,), out_shardings=({k: replicated for k in params}, replicated))
        self.state: dict[str, Any] = {"params": params, "x": x, "y": y}

    def run(self) -> Any:
        import jax

        new, loss = self.jitted(self.state["params"], self.state["x"], self.state["y"])
        jax.block_until_ready((new, loss))
        self.state["params"] = new
        self.state["loss"] = loss  # held until the next step, as a training loop holds its loss
        return loss

    def compiles(self) -> int:
        return int(self.jitted._cache_size())


class _RuntimeSide:
    """The runtime's training step, timed by phase: recording the ops, ``mark_step``, the wait."""

    def __init__(self, work: _Workload, mesh: Any) -> None:
        import harness.runtime as xr

        x, y = xr.tensor(work.x_host), xr.tensor(work.y_host)
        batch_spec, label_spec = work.specs
        xr.mark_sharding(x, mesh, batch_spec)
        xr.mark_sharding(y, mesh, label_spec)
        self.loss_fn = work.rt_loss
        self.state: dict[str, Any] = {"model": work.model, "opt": xr.optim.SGD(work.model.parameters(), lr=LR),
                                      "x": x, "y": y}
        self.phases: list[tuple[float, float, float]] = []  # per step: record, mark_step, wait

    def run(self) -> Any:
        import harness.runtime as xr

        clock, state = time.perf_counter, self.state
        t0 = clock()
        loss = self.loss_fn(state["model"](state["x"]), state["y"])
        loss.backward()
        state["opt"].step()
        state["opt"].zero_grad()
        t1 = clock()
        xr.mark_step()
        t2 = clock()
        xr.wait_device_ops()
        self.phases.append((t1 - t0, t2 - t1, clock() - t2))
        state["loss"] = loss  # held until the next step, as a training loop holds its loss
        return loss


def _timed(runtime: _RuntimeSide, peer: _JaxSide, steps: int) -> tuple[list[float], list[float]]:
    """Seconds per step of each side, in blocks that alternate which side goes first."""
    rt_times: list[float] = []
    jax_times: list[float] = []
    perf = time.perf_counter
    rounds = 0
    while len(rt_times) < steps:
        n = min(BLOCK, steps - len(rt_times))
        order = (runtime.run, peer.run) if rounds % 2 == 0 else (peer.run, runtime.run)
        for fn in order:
            sink = rt_times if fn == runtime.run else jax_times
            for _ in range(n):
                t0 = perf()
                fn()
                sink.append(perf() - t0)
        rounds += 1
    return rt_times, jax_times


def _memory(runtime: _RuntimeSide, peer: _JaxSide) -> dict[str, Any]:
    """What each side holds after the steady state, as the live device bytes that go away when
    that side is dropped (the JAX side first, then the runtime side). Empties both sides."""
    import harness.runtime as xr
    from harness.runtime.transfers import device_bytes, live_device_bytes

    model, opt = runtime.state["model"], runtime.state["opt"]
    param_opt_bytes = sum(device_bytes(p.rt_storage.node.data.array()) for p in model.parameters())
    param_opt_bytes += sum(device_bytes(b.rt_storage.node.data.array()) for b in opt.state_tensors())
    del model, opt
    xr.wait_device_ops()
    gc.collect()
    live_all = live_device_bytes()
    peer.state.clear()
    gc.collect()
    live_runtime = live_device_bytes()
    runtime.state.clear()
    gc.collect()
    live_neither = live_device_bytes()
    return {
        "param_opt_bytes": param_opt_bytes,
        "runtime_bytes": live_runtime - live_neither,
        "jax_bytes": live_all - live_runtime,
        "runtime_over_jax": (live_runtime - live_neither) / max(1, live_all - live_runtime),
    }


def _measure(
    name: str, steps: int, warmup: int, backend: str = Backend.CPU, expected: int | None = DEVICES
) -> dict[str, Any]:
    """Both sides of one case: the same first step (the comparison is fair only if they compute
    the same), warm-up, the timed steps, then what each holds."""
    import jax
    import numpy as np

    import harness.runtime as xr

    found = jax.devices()
    count = len(found)
    if expected is not None and count != expected:
        hint = " (JAX_NUM_CPU_DEVICES)" if backend == Backend.CPU else ""
        raise RuntimeError(f"expected {expected} {backend} devices, JAX has {count}{hint}")
    xr.manual_seed(0)
    mesh = xr.Mesh(list(range(count)), (count,), ("data",))
    work = _workload(name, count, np.random.default_rng(0))
    peer = _JaxSide(work, mesh)
    runtime = _RuntimeSide(work, mesh)
    batch = work.batch
    del work  # the sides hold what they use; the memory measure drops them one at a time

    compiles0 = xr.compile_count()
    first_rt = float(runtime.run().numpy())
    first_jax = float(np.asarray(peer.run()))
    for _ in range(warmup - 1):
        runtime.run()
        peer.run()
    compiles_warm = xr.compile_count() - compiles0
    jax_cache_warm = peer.compiles()
    rt_times, jax_times = _timed(runtime, peer, steps)
    compiles_timed = xr.compile_count() - compiles0 - compiles_warm
    jax_compiles = {"warmup": jax_cache_warm, "timed": peer.compiles() - jax_cache_warm}
    phases = runtime.phases[warmup:]  # the warm-up steps came first
    memory = _memory(runtime, peer)
    return _step_result(name, backend, found, batch, rt_times, jax_times, phases, memory, {
        "runtime_compiles": {"warmup": compiles_warm, "timed": compiles_timed},
        "jax_compiles": jax_compiles,
        "loss_abs_diff": abs(first_rt - first_jax),
        "first_loss": first_rt,
        "steps": steps,
        "warmup": warmup,
    })


def _step_result(name: str, backend: str, found: list[Any], batch: int, rt_times: list[float],
                 jax_times: list[float], phases: list[tuple[float, float, float]], memory: dict[str, Any],
                 counts: dict[str, Any]) -> dict[str, Any]:
    """One case's figures, as ``xharness bench --json`` prints them."""
    import jax

    import harness.runtime as xr

    rt, jx_stats = _stats(rt_times), _stats(jax_times)
    ratio = rt["median"] / jx_stats["median"]
    runtime_phases = {
        phase: statistics.median(p[i] for p in phases) * 1e3
        for i, phase in enumerate(("record", "mark_step", "wait"))
    }
    case = CASES[name]
    return {
        "name": name,
        "description": case.description,
        # where it ran: the backend asked for, the platform and kind JAX reports, the mesh's size
        "backend": backend,
        "platform": found[0].platform,
        "device_kind": found[0].device_kind,
        "devices": len(found),
        "batch": batch,
        "runtime_ms": rt,
        "jax_ms": jx_stats,
        "ratio": ratio,
        "target": case.target_text,
        "meets_target": None if case.target is None else ratio <= case.target,
        "param_aliasing": xr.options.param_aliasing,
        "runtime_compiles": counts["runtime_compiles"],
        # the step's medians by phase: recording the ops, ``mark_step`` (walk, plan, launch) and
        # the wait for the execution, which is jax.jit's step plus the executor thread's hand-off
        "runtime_phases_ms": runtime_phases,
        "wait_over_jax": runtime_phases["wait"] / jx_stats["median"],
        "memory": memory,
        "jax_compiles": counts["jax_compiles"],
        "loss_abs_diff": counts["loss_abs_diff"],
        "first_loss": counts["first_loss"],
        "faults": sorted(xr.faults.enabled()),
        "jax_version": jax.__version__,
        "steps": counts["steps"],
        "warmup": counts["warmup"],
    }


def _child_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.bench")
    parser.add_argument("--child", required=True, choices=sorted(CASES))
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--backend", choices=BENCH_BACKENDS, default=Backend.CPU)
    parser.add_argument("--devices", type=int, default=None,
                        help="the device count JAX must show (default: every device of the backend)")
    args = parser.parse_args(argv)
    import jax

    try:
        jax.devices()
    except Exception as exc:  # the plugin is there (or not), but the backend does not start
        # JAX raises RuntimeError, or trips an assertion with no message when JAX_PLATFORMS names
        # a platform none of its plugins registered: name the error either way
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else (
            f"JAX_PLATFORMS={os.environ.get('JAX_PLATFORMS', '')!r} names no platform JAX could start"
        )
        message = f"JAX could not start its {args.backend} backend ({type(exc).__name__}: {detail})"
        print(json.dumps({"name": args.child, "error": message}), flush=True)
        return EXIT_NO_BACKEND
    result = _measure(args.child, args.steps, args.warmup, args.backend, args.devices)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
