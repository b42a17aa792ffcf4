"""Forward, backward and an SGD step against numpy on 1, 3, 4 (and 8) devices.

An SPMD mesh covers every device exactly once and the device count is fixed when JAX starts. In a
cell of the matrix the step runs in the test's own process, on the cell's devices: the matrix has
cells of 1, 3, 4 and 8 devices, so each count is checked where its topology already exists. Outside
the matrix (a plain pytest run) each of 1, 3 and 4 runs in a process of its own, started together
to pay JAX's start-up once in wall time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from harness.plugin import current_cell

SCRIPT = textwrap.dedent(
    """
    import json
    from test_rt_device_counts import training_step
    print(json.dumps(training_step()))
    """
)


def training_step() -> dict:
    """One MLP training step over a data-parallel mesh of every device, as JSON-ready values."""
    import jax

    import harness.runtime as xr

    n = len(jax.devices())
    mesh = xr.Mesh(np.arange(n), (n,), ("data",))
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((24, 5)).astype(np.float32)
    y_np = rng.standard_normal((24, 3)).astype(np.float32)
    xr.manual_seed(0)
    model = xr.models.MLP(5, 6, 3)
    init = {k: p.numpy().tolist() for k, p in model.named_parameters()}
    opt = xr.optim.SGD(model.parameters(), lr=0.1)
    x, y = xr.tensor(x_np), xr.tensor(y_np)
    xr.mark_sharding(x, mesh, ("data", None))
    xr.mark_sharding(y, mesh, ("data", None))
    out = model(x)
    loss = xr.nn.mse_loss(out, y)
    loss.backward()
    grads = {k: p.grad for k, p in model.named_parameters()}
    opt.step()
    xr.mark_step()
    return {
        "devices": n,
        "spec": list(xr.sharding_spec(x) or ()),
        "init": init,
        "out": out.numpy().tolist(),
        "loss": float(loss.numpy()),
        "grads": {k: g.numpy().tolist() for k, g in grads.items()},
        "after": {k: p.numpy().tolist() for k, p in model.named_parameters()},
    }


def _reference(init: dict[str, np.ndarray]) -> dict:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((24, 5)).astype(np.float32).astype(np.float64)
    y = rng.standard_normal((24, 3)).astype(np.float32).astype(np.float64)
    w1, b1, w2, b2 = (init[k] for k in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"))
    pre = x @ w1.T + b1
    h = np.maximum(pre, 0)
    out = h @ w2.T + b2
    d = 2 * (out - y) / (out - y).size
    dh = (d @ w2) * (pre > 0)
    grads = {"fc1.weight": dh.T @ x, "fc1.bias": dh.sum(0), "fc2.weight": d.T @ h, "fc2.bias": d.sum(0)}
    return {
        "out": out,
        "loss": ((out - y) ** 2).mean(),
        "grads": grads,
        "after": {k: init[k] - 0.1 * g for k, g in grads.items()},
    }


def _check(got: dict, n: int, backend: str | None = None) -> None:
    """``got`` against numpy, within the numerics the step ran under: the runtime's matmul
    precision (a child inherits it with the environment) on ``backend`` (default: this process')."""
    from harness.runtime.testing import tolerance

    assert got["devices"] == n
    assert got["spec"] == ["data", None]  # kept as requested, even over a single device
    init = {k: np.array(v, np.float64) for k, v in got["init"].items()}
    ref = _reference(init)
    tol = tolerance(np.float32, backend=backend)
    np.testing.assert_allclose(got["out"], ref["out"], **tol, err_msg=f"{n} devices")
    np.testing.assert_allclose(got["loss"], ref["loss"], **tol, err_msg=f"{n} devices")
    for k in init:
        np.testing.assert_allclose(got["grads"][k], ref["grads"][k], **tol, err_msg=f"{n} devices {k}")
        np.testing.assert_allclose(got["after"][k], ref["after"][k], **tol, err_msg=f"{n} devices {k}")


def test_training_step_on_1_3_and_4_devices(request: pytest.FixtureRequest) -> None:
    if current_cell(request.config) is not None:  # the cell's own topology is one of the counts
        import jax

        _check(training_step(), len(jax.devices()))
        return
    procs: dict[int, subprocess.Popen[str]] = {}
    here = str(Path(__file__).parent)
    try:
        for n in (1, 3, 4):
            env = {**os.environ, "JAX_NUM_CPU_DEVICES": str(n), "JAX_PLATFORMS": "cpu"}
            env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
            env.pop("XLA_FLAGS", None)
            procs[n] = subprocess.Popen(
                [sys.executable, "-c", SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        for n, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=180)
            assert proc.returncode == 0, f"{n} devices:\n{stderr[-3000:]}"
            _check(json.loads(stdout.strip().splitlines()[-1]), n, backend="cpu")
    finally:  # a failed check or a timeout leaves no child behind
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.communicate()  # reaps it and closes its pipes
