"""The catalog's scenarios against a real PyTorch/XLA release, written in upstream's own API.

Against the reference runtime a scenario turns a fault switch on and off; a release has no switch,
so here each variant is the upstream trigger as the issue (or the test its fix added) wrote it,
and the outcome says whether the release still has the bug: ``reproduced`` (the bug's upstream
signature showed), ``passed``, ``failed`` (something else broke) or ``skipped`` (the release or
this machine cannot run it, with the reason). Whether that outcome is good news for the release is
the expected-outcomes table's business (``harness.scenarios.expected``), never this module's.

Each variant runs in a fresh process (``python -m harness.scenarios.upstream_torch_xla SCENARIO
VARIANT``), for three reasons: PyTorch/XLA reads its flags (functionalization, param aliasing,
the CPU device count) once at import; SPMD mode cannot be left once entered; and a release that
aborts in a C++ CHECK takes its process down, which the parent records as a crash (signal, the
CHECK message and the stack tails) and matches against the scenario's crash signatures.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import re
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from harness import stack_dumps
from harness.adapters.base import Unsupported
from harness.backends import platform_backend
from harness.scenarios import expected, warm_fork
from harness.scenarios.base import InvariantViolation, Signature
from harness.scenarios.known_findings import names as finding_names
from harness.scenarios.reproducer import (
    RUNTIME,
    CrashSignature,
    MachineLacks,
    Reproducer,
    torch_xla_sharding_api,
)
from harness.scenarios.upstream_findings import FINDING_REPRODUCERS

RESULT_MARKER = "XHARNESS-UPSTREAM-RESULT"
REPRODUCED, PASSED, FAILED, SKIPPED = "reproduced", "passed", "failed", "skipped"
FLAKY = expected.FLAKY  # the runs of a trigger disagreed (``run_repeated``)
#: CPU devices a variant gets (PyTorch/XLA ignores JAX's device-count flags: CPU_NUM_DEVICES)
CPU_DEVICES = 4
STDERR_TAIL = 60
#: how many times a race's trigger is tried before the race counts as not happening
RACE_ATTEMPTS = 8
DEFAULT_TIMEOUT = 300.0


class StaleValue(InvariantViolation):
    """A host read returned an older version of a tensor than the program wrote."""


class ShardingLost(InvariantViolation):
    """A parameter FSDPv2 sharded is replicated (or unannotated) afterwards."""


@dataclass
class VariantOutcome:
    scenario: str
    variant: str
    outcome: str
    signature: str = ""  # the signature that showed (reproduced) or ""
    error: str = ""  # one line: the exception, the crash, the skip reason
    details: str = ""  # traceback, or the crashed process' stderr tail (CHECK message, stacks)
    machine_skip: bool = False  # skipped because of this machine, not the release
    release: str = ""  # torch_xla.__version__ as the child imported it
    backend: str = ""  # the platform the variant ran on (cpu, gpu, tpu), as the child saw it
    versions: dict[str, str] = field(default_factory=dict)
    signal: int | None = None
    exit_code: int | None = None
    seconds: float = 0.0
    command: str = ""  # the one line that reruns exactly this variant
    #: how many of its runs showed each outcome (a race or crash trigger runs several times:
    #: ``Reproducer.runs``); empty for a single run
    counts: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------ shared set-up
def _spmd_mesh(axis_names: tuple[str, str] = ("fsdp", "model")) -> Any:
    """SPMD on, and the (devices, 1) mesh FSDPv2's docs and the issues use."""
    import numpy as np
    import torch_xla.distributed.spmd as xs
    import torch_xla.runtime as xr

    xr.use_spmd()
    n = xr.global_runtime_device_count()
    return xs.Mesh(np.arange(n), (n, 1), axis_names)


def _sharding_text(t: Any) -> str:
    import torch_xla

    return str(torch_xla._XLAC._get_xla_sharding_spec(t))


def _is_sharded(t: Any) -> bool:
    text = _sharding_text(t)
    return bool(text) and "replicated" not in text and "devices=" in text


# ------------------------------------------------------------------------------ unhashable-spec
def fsdpv2_scalar_parameter() -> None:
    """Issue #8522: "test SpmdFullyShardedDataParallel (i.e. FSDPv2) with any model that contains
    a scalar parameter". The constructor marks every parameter with the spec
    ``_prepare_spmd_partition_spec`` built; for the 0-d one that was a list, and the
    ``lru_cache`` of ``Mesh.get_op_sharding`` raised ``TypeError: unhashable type: 'list'``."""
    import torch
    import torch.nn as nn
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.spmd as xs
    from torch_xla.experimental.spmd_fully_sharded_data_parallel import (
        SpmdFullyShardedDataParallel as FSDPv2,
    )

    mesh = _spmd_mesh()

    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(16, 16)
            self.scale = nn.Parameter(torch.tensor(0.5))  # the 0-d parameter

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x) * self.scale

    model = FSDPv2(Scaled().to(xm.xla_device()), mesh=mesh)
    x = torch.randn(16, 16).to(xm.xla_device())
    xs.mark_sharding(x, mesh, ("fsdp", None))
    loss = model(x).sum()
    loss.backward()
    xm.mark_step()
    inner = model.module
    if not _is_sharded(inner.fc.weight):
        raise ShardingLost(
            f"fc.weight replicated instead of sharded: {_sharding_text(inner.fc.weight)!r}"
        )
    if not bool(torch.isfinite(loss.cpu())):
        raise AssertionError(f"loss is not finite: {loss.cpu()}")


# ------------------------------------------------------------------------------ aliased-save
def detach_add_read() -> None:
    """Issue #8482, its reproducer: ``t2 = t1.detach(); mark_step; t2.add_(t2); mark_step;`` then
    ``_xla_get_cpu_tensors([t1, t2])``. Both alias one value, which is now 2; a release without
    PR #8489 transfers ``t1``'s stale device data (1)."""
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm

    device = xm.xla_device()
    t1 = torch.tensor([1], device=device)
    t2 = t1.detach()
    xm.mark_step()
    t2.add_(t2)
    xm.mark_step()
    t1_cpu, t2_cpu = torch_xla._XLAC._xla_get_cpu_tensors([t1, t2])
    got = (int(t1_cpu.item()), int(t2_cpu.item()))
    if got != (2, 2):
        raise StaleValue(
            f"stale value: _xla_get_cpu_tensors([t1, t2]) returned {got}, expected (2, 2) "
            f"(t1.item() says {t1.item()})"
        )


def _inplace_then_sync(sync: Callable[[Any], None], what: str) -> None:
    """``t2 = t0 + t1; t1.add_(1)``, then ``sync(t1)``, then a step: ``t2`` must read 3. A sync
    of ``t1`` alone that behaves like a step marker donates ``t1``'s old buffer although the
    pending ``t2`` still reads it ("buffer with shape ... is deleted")."""
    import torch
    import torch_xla.core.xla_model as xm

    device = xm.xla_device()
    t0 = torch.tensor([1], device=device)
    t1 = torch.tensor([2], device=device)
    xm.mark_step()
    t2 = t0 + t1
    t1.add_(1)
    sync(t1)
    xm.mark_step()
    value = int(t2.cpu().item())
    if value != 3:
        raise StaleValue(f"stale value: t2 = t0 + t1 read {value} after {what}, expected 3")


def save_after_inplace() -> None:
    """Issue #8422 / the test PR #8484 added: the sync is ``xm.save(t1, devnull)``."""
    import torch_xla.core.xla_model as xm

    _inplace_then_sync(lambda t1: xm.save(t1, os.devnull), "the save")


# ------------------------------------------------------------------------------ partial-sync-donation
def unlazy_after_inplace() -> None:
    """The #8422 sequence with ``xm.unlazy([t1])`` where the issue had ``xm.save(t1)``: #8484
    changed the save, not the sync underneath, so unlazy still donates ``t1``'s old buffer
    while the pending ``t2`` reads it."""
    import torch_xla.core.xla_model as xm

    _inplace_then_sync(lambda t1: xm.unlazy([t1]), "unlazy([t1])")


def unlazy_derived_read() -> None:
    """What the sync-aliasing state machine shrank it to: ``t.add_(1); u = t * 2 + 1;
    xm.unlazy([t]); u.cpu()``."""
    import torch
    import torch_xla.core.xla_model as xm

    device = xm.xla_device()
    host = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    t = host.to(device)
    xm.mark_step()
    t.add_(1)
    u = t * 2 + 1
    xm.unlazy([t])
    got = u.cpu()
    if not torch.equal(got, (host + 1) * 2 + 1):
        raise StaleValue("stale value: u = t * 2 + 1 read wrong values after unlazy([t])")


# ------------------------------------------------------------------------------ lost-sharding
def _replicated(model: Any) -> list[str]:
    """Parameters FSDPv2 should have sharded (any dimension the mesh divides) that the runtime
    holds replicated, read back from the runtime itself."""
    n = CPU_DEVICES if os.environ.get("PJRT_DEVICE") == "CPU" else 2
    return [
        f"{name} {_sharding_text(p)!r}"
        for name, p in model.named_parameters()
        if p.dim() >= 1 and any(d % n == 0 for d in p.shape) and not _is_sharded(p)
    ]


def _tiny_vit() -> tuple[Any, type]:
    """A small ViT with the structure of timm's ``VisionTransformer`` the issue trained: patch
    embedding, class token and position embedding, pre-norm blocks whose attention splits heads
    with views (reshape/permute), an MLP, a head."""
    import torch
    import torch.nn as nn

    class Attention(nn.Module):
        def __init__(self, dim: int, heads: int) -> None:
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(dim, dim * 3, bias=True)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, n, c = x.shape
            qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            attn = ((q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5).softmax(dim=-1)
            return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))

    class Block(nn.Module):
        def __init__(self, dim: int, heads: int) -> None:
            super().__init__()
            self.norm1 = nn.LayerNorm(dim)
            self.attn = Attention(dim, heads)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, dim * 4), nn.GELU(), nn.Linear(dim * 4, dim))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class VisionTransformer(nn.Module):
        def __init__(self, image: int = 32, patch: int = 8, dim: int = 64, depth: int = 2,
                     heads: int = 4, classes: int = 8) -> None:
            super().__init__()
            self.patch_embed = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos_embed = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
            self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(depth)])
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.patch_embed(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
            return self.head(self.norm(self.blocks(x))[:, 0])

    return VisionTransformer(), Block


def fsdpv2_vit_without_functionalization() -> None:
    """Issue #8607: FSDPv2 + SPMD on a ViT with ``XLA_DISABLE_FUNCTIONALIZATION=1`` crashed
    ("Check failed: has_sharding()"), because without functionalization ``model.to(device)``
    left parameters replicated and a sharding annotated over a view landed on the view-update
    node. As the issue: global mesh ``(n, 1)`` over ``('fsdp', 'model')``, the model moved to the
    device, an ``MpDeviceLoader`` sharding the batch, ``transformer_auto_wrap_policy`` over the
    blocks, a few optimizer steps; smaller than the issue's ViT-B so that it runs on a CPU."""
    import functools

    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.parallel_loader as pl
    import torch_xla.distributed.spmd as xs
    import torch_xla.utils.utils as xu
    from torch_xla.distributed.fsdp.wrap import transformer_auto_wrap_policy
    from torch_xla.experimental.spmd_fully_sharded_data_parallel import (
        SpmdFullyShardedDataParallel as FSDPv2,
    )

    mesh = _spmd_mesh()
    xs.set_global_mesh(mesh)
    device = torch_xla.device() if hasattr(torch_xla, "device") else xm.xla_device()
    model, block = _tiny_vit()
    model.to(device)
    loader = pl.MpDeviceLoader(
        xu.SampleGenerator(data=torch.zeros(8, 3, 32, 32, dtype=torch.float32), sample_count=3),
        device,
        input_sharding=xs.ShardingSpec(mesh, ("fsdp", None, None, None)),
    )
    policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={block})
    model = FSDPv2(model, mesh=mesh, auto_wrap_policy=policy)
    # keep training when parameters came out replicated: the crash came in the step
    lost = _replicated(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for data in loader:
        optimizer.zero_grad()
        loss = model(data).sum()
        loss.backward()
        optimizer.step()
        xm.mark_step()
    lost = lost or _replicated(model)
    if lost:
        raise ShardingLost(
            f"{len(lost)} parameter(s) replicated instead of sharded after FSDPv2 wrapped the "
            "model (training ran on): " + "; ".join(lost[:3])
        )


# ------------------------------------------------------------------------------ race-on-handles
def gradient_accumulation_matches() -> None:
    """PR #9078 / issue #9128: ``test_gradient_accumulation_matches`` trains a linear model with
    ``torch_xla.experimental.gradient_accumulation`` and with a plain loop and compares them. The
    helper synced its inputs asynchronously and then collected device-data handles, reading a
    placeholder before its execution filled it: SIGSEGV in ``PjRtShardedData::GetHandle()``
    (seen on the T4 GPU runner only)."""
    import importlib

    try:
        ga = importlib.import_module("torch_xla.experimental.gradient_accumulation")
    except ImportError:
        raise Unsupported(
            "this release has no torch_xla.experimental.gradient_accumulation (the API of PR "
            "#9078 whose handle race the scenario exercises)"
        ) from None
    import torch
    import torch.nn as nn
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.spmd as xs

    mesh = _spmd_mesh(("data", "model"))
    device = xm.xla_device()
    steps, batch, features = 4, 8, 16
    torch.manual_seed(0)
    inputs = torch.randn(steps, batch, features)
    labels = torch.randn(steps, batch, 1)

    def make() -> nn.Module:
        torch.manual_seed(1)
        return nn.Sequential(nn.Linear(features, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)

    loss_fn = nn.MSELoss()

    # the plain loop: one graph per micro-batch, gradients accumulate in .grad
    plain = make()
    for i in range(steps):
        x, y = inputs[i].to(device), labels[i].to(device)
        xs.mark_sharding(x, mesh, ("data", None))
        (loss_fn(plain(x), y) / steps).backward()
        xm.mark_step()
    reference = [p.grad.detach().cpu() for p in plain.parameters()]

    model = make()
    xs_inputs, xs_labels = inputs.to(device), labels.to(device)
    xs.mark_sharding(xs_inputs, mesh, (None, "data", None))
    xs.mark_sharding(xs_labels, mesh, (None, "data", None))
    xm.mark_step()

    def train_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return loss_fn(model(x), y)  # the helper scales by the step count and runs backward

    ga.gradient_accumulation(train_step, (xs_inputs, xs_labels), model)
    xm.mark_step()
    got = [p.grad.detach().cpu() for p in model.parameters()]
    for index, (a, b) in enumerate(zip(reference, got, strict=True)):
        if not torch.allclose(a, b, rtol=1e-4, atol=1e-5):
            raise AssertionError(
                f"gradient {index} differs from the plain loop's: max |diff| "
                f"{float((a - b).abs().max()):.3g}"
            )


def helper_sequence_without_wait() -> None:
    """The helper of PR #9078 as it ran before the #9128 fix, in its own calls: in SPMD mode, an
    asynchronous sync of the loop's inputs (``_xla_sync_multi(..., wait=False,
    sync_xla_data=False)``), then at once the device-data nodes of the graph traced over them
    (``_get_tensors_xla_device_data_node``), which deduplicates by ``GetHandle()``, here of
    sharded data the execution has not filled yet. The fix waits for device ops in between.

    A race: the pending work is a chain of 512x512 matmuls, so that the execution is still
    running when the handles are read, and the sequence is tried up to ``RACE_ATTEMPTS`` times
    (on CPU it crashed 10 runs out of 10 on 2.5.1 and 2.9.0; with the wait, 0 out of 5)."""
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.spmd as xs

    mesh = _spmd_mesh(("data", "model"))
    device = xm.xla_device()
    size = 512
    for _attempt in range(RACE_ATTEMPTS):
        x = torch.ones(size, size, device=device)
        xs.mark_sharding(x, mesh, ("data", None))
        y = x
        for _ in range(4):
            y = (y @ x.T / size).relu()
        inputs = [y]  # pending: the loop's inputs, still being computed
        torch_xla._XLAC._xla_sync_multi(inputs, devices=[], wait=False, sync_xla_data=False)
        body = [inputs[0] * 2]  # the body traced over them
        torch_xla._XLAC._get_tensors_xla_device_data_node(body)
        value = float(body[0][0, 0].cpu())
        if value != 2.0:
            raise AssertionError(f"the body computed {value}, expected 2.0")


# ------------------------------------------------------------------------------ double-discovery
def _megascale_slices() -> int:
    try:
        return int(os.environ.get("MEGASCALE_NUM_SLICES", "1") or "1")
    except ValueError:
        return 1


def flash_attention_multislice() -> None:
    """Issue #8812 / PR #8819: on a multi-slice TPU, tracing the Pallas flash-attention kernel
    runs JAX's lowering, which initialized JAX's own TPU backend and ran MegaScale discovery a
    second time (training failed or hung) because nested ``requires_jax`` guards popped
    ``SKIP_MEGASCALE_PJRT_CLIENT`` too early. Needs real slices: no CPU stands in for them."""
    from harness.hardware import tpu_count

    if tpu_count() == 0:
        raise MachineLacks("needs a multi-slice TPU (MegaScale, 2 or more slices); no TPU here")
    slices = _megascale_slices()
    if slices < 2:
        raise MachineLacks(
            f"needs a multi-slice TPU (MegaScale, 2 or more slices); MEGASCALE_NUM_SLICES={slices}"
        )
    import torch
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.spmd as xs
    import torch_xla.runtime as xr
    from torch_xla.experimental.custom_kernel import flash_attention

    xr.use_spmd()
    n = xr.global_runtime_device_count()
    mesh = xs.HybridMesh(ici_mesh_shape=(n // slices, 1, 1, 1), dcn_mesh_shape=(slices, 1, 1, 1),
                         axis_names=("fsdp", "heads", "seq", "dim"))
    device = xm.xla_device()
    q, k, v = (torch.randn(n, 2, 128, 64).to(device) for _ in range(3))
    out = flash_attention(q, k, v, partition_spec=("fsdp", None, None, None), mesh=mesh)
    xm.mark_step()
    float(out.sum().cpu())


# ------------------------------------------------------------------------------ the variants
_ABORT = int(signal.SIGABRT)
#: a read of device data the execution has not filled: SIGSEGV for sharded data (#9128), the
#: CHECK of ``PjRtData::GetHandle()`` for a single device's
_SIGSEGV = CrashSignature("sigsegv", int(signal.SIGSEGV))
_PLACEHOLDER = Signature("placeholder-access", RuntimeError, r"[Pp]laceholder|Check failed: HasValue\(\)")
_STALE = Signature("stale-value", StaleValue, r"stale value")
_DELETED = Signature("deleted-buffer", RuntimeError, r"buffer with shape .* is deleted")
#: the abort of a read of a donated buffer: 2.5.1 on this machine says "CopyToHostAsync() called
#: on deleted or donated buffer"; "Failed to await future from buffer to literal" was seen too
_DELETED_ABORT = CrashSignature(
    "deleted-buffer", _ABORT,
    r"deleted or donated buffer|Failed to await future|buffer with shape .* is deleted",
)
# ------------------------------------------------------------------------ sharded-read-compiles
class CompiledEveryRead(InvariantViolation):
    """A loop whose every iteration records the same programs kept compiling."""


def _split_mesh() -> Any:
    """SPMD on, and a (n/2, 2) mesh whose second axis splits a dimension of two (the finding's
    (4, 2) mesh over eight devices)."""
    import numpy as np
    import torch_xla.runtime as xr

    xs = torch_xla_sharding_api()
    xr.use_spmd()
    n = xr.global_runtime_device_count()
    if n < 4 or n % 2:
        raise MachineLacks(f"needs an even count of 4 or more devices, this process has {n}")
    return xs.Mesh(np.arange(n), (n // 2, 2), ("model", "y"))


def _compiles() -> int:
    import torch_xla.debug.metrics as met

    return int((met.metric_data("CompileTime") or (0,))[0])


def _check_compiles(counts: list[int], what: str) -> None:
    if any(counts[1:]):
        raise CompiledEveryRead(
            f"{what}: compiled again on every iteration: compiles per iteration {counts}, "
            f"expected [k, 0, 0, 0] (each iteration records the same programs)"
        )


def gradient_read_in_loop() -> None:
    """The step-boundary invariant's shrunk program: a sharded input, a backward, ``.cpu()`` of
    the gradient before the step boundary, a fresh parameter each iteration. (No NumPy array
    meets torch here: releases before 2.3 were built against NumPy 1 and cannot read NumPy 2's.)"""
    import torch
    import torch_xla.core.xla_model as xm

    xs = torch_xla_sharding_api()
    mesh = _split_mesh()
    device = xm.xla_device()
    counts: list[int] = []
    for _ in range(4):
        before = _compiles()
        w = torch.full((2, 2), 0.5, device=device, requires_grad=True)
        x = torch.ones((3, 2), device=device)
        xs.mark_sharding(x, mesh, (None, "y"))
        ((x @ w.T) ** 2).mean().backward()
        w.grad.detach().cpu()  # the read before the step boundary
        xm.mark_step()
        counts.append(_compiles() - before)
    _check_compiles(counts, "a training loop reading its sharded gradient before each step boundary")


def repeated_read() -> None:
    """The mechanism alone: ``.cpu()`` of one split tensor three times."""
    import torch
    import torch_xla.core.xla_model as xm

    xs = torch_xla_sharding_api()
    mesh = _split_mesh()
    x = torch.arange(8, dtype=torch.float32).reshape(4, 2).to(xm.xla_device())
    xs.mark_sharding(x, mesh, (None, "y"))
    xm.mark_step()
    counts = []
    for _ in range(3):
        before = _compiles()
        x.cpu()
        counts.append(_compiles() - before)
    _check_compiles(counts, "reading one split tensor three times")


_COMPILES_EVERY_READ = Signature("compiles-every-read", CompiledEveryRead, r"compiled again on every iteration")


# --------------------------------------------------------------------- expanded-grad-accumulation
class WrongGradient(InvariantViolation):
    """An accumulated gradient differs from the one eager PyTorch accumulates."""


GRAD_SHAPE = (4, 6)


def _check_gradient(got: Any, want: Any, what: str) -> None:
    """``got`` (read from the device) against ``want`` (eager PyTorch on the CPU)."""
    import torch

    got = got.detach().cpu()
    if not torch.equal(got, want):
        raise WrongGradient(
            f"{what}: the accumulated gradient reads {sorted(set(got.flatten().tolist()))}, "
            f"eager PyTorch {sorted(set(want.flatten().tolist()))}"
        )


def _sum_backward_twice(device: Any) -> Any:
    import torch

    x = torch.ones(GRAD_SHAPE, device=device, requires_grad=True)
    x.sum().backward()
    x.sum().backward()
    return x.grad.detach().cpu()


def sum_backward_twice() -> None:
    """The semantics oracle's shrunk program: ``x.sum().backward()`` twice into one ``.grad``."""
    import torch_xla.core.xla_model as xm

    _check_gradient(_sum_backward_twice(xm.xla_device()), _sum_backward_twice("cpu"),
                    "x.sum().backward() twice")


def _accumulate_micro_batches(device: Any) -> tuple[Any, Any]:
    import torch

    torch.manual_seed(0)
    batches = torch.randn(4, *GRAD_SHAPE)
    w = torch.nn.Parameter(torch.zeros(GRAD_SHAPE, device=device))
    opt = torch.optim.SGD([w], lr=0.125)
    for batch in batches:  # gradient accumulation: one backward per micro-batch, then one step
        (batch.to(device) + w).sum().backward()
    grad = w.grad.detach().cpu().clone()
    opt.step()
    if str(device) != "cpu":
        import torch_xla.core.xla_model as xm

        xm.mark_step()
    return grad, w.detach().cpu()


def accumulate_micro_batches() -> None:
    """A training loop accumulating the gradients of four micro-batches whose loss is a sum."""
    import torch_xla.core.xla_model as xm

    grad, param = _accumulate_micro_batches(xm.xla_device())
    want_grad, want_param = _accumulate_micro_batches("cpu")
    _check_gradient(grad, want_grad, "4 micro-batches of (x + w).sum(), accumulated")
    _check_gradient(param, want_param, "the parameter after the optimizer step")


def _zero_grad_in_place(device: Any) -> Any:
    import torch

    w = torch.nn.Parameter(torch.zeros(GRAD_SHAPE, device=device))
    opt = torch.optim.SGD([w], lr=0.125)
    w.sum().backward()
    opt.zero_grad(set_to_none=False)
    return w.grad.detach().cpu()


def zero_grad_in_place() -> None:
    """``optimizer.zero_grad(set_to_none=False)`` after a sum's backward zeroes ``.grad`` in place."""
    import torch_xla.core.xla_model as xm

    _check_gradient(_zero_grad_in_place(xm.xla_device()), _zero_grad_in_place("cpu"),
                    "zero_grad(set_to_none=False) after w.sum().backward()")


_SUMMED_INTO_EXPAND = Signature("summed-into-expand", WrongGradient, r"the accumulated gradient reads")


_FUNCTIONALIZATION_ON = {"XLA_DISABLE_FUNCTIONALIZATION": "0"}

# the #8482 reproducer sets both flags: functionalization on, aliasing as the variant says
_ALIASING_OFF = {"XLA_DISABLE_FUNCTIONALIZATION": "0", "XLA_ENABLE_PARAM_ALIASING": "0"}
_ALIASING_ON = {"XLA_DISABLE_FUNCTIONALIZATION": "0", "XLA_ENABLE_PARAM_ALIASING": "1"}

REPRODUCERS: tuple[Reproducer, ...] = (
    Reproducer(
        "race-on-handles", "gradient-accumulation", gradient_accumulation_matches,
        "pytorch/xla#9078 test_train_spmd_linear_model.py::test_gradient_accumulation_matches",
        signatures=(_PLACEHOLDER,), crashes=(_SIGSEGV,), race=True,
    ),
    Reproducer(
        "race-on-handles", "helper-sequence-without-wait", helper_sequence_without_wait,
        "pytorch/xla#9128: gradient_accumulation.py before the wait_device_ops fix",
        signatures=(_PLACEHOLDER,), crashes=(_SIGSEGV,), race=True,
    ),
    Reproducer(
        "double-discovery", "flash-attention-multislice", flash_attention_multislice,
        "pytorch/xla#8812",
        signatures=(Signature("duplicate-discovery", RuntimeError, r"(?i)megascale"),),
    ),
    Reproducer(
        "unhashable-spec", "fsdpv2-scalar-parameter", fsdpv2_scalar_parameter,
        "pytorch/xla#8522",
        signatures=(Signature("unhashable-list", TypeError, r"unhashable type: 'list'"),),
    ),
    Reproducer(
        "lost-sharding", "fsdpv2-vit-no-functionalization", fsdpv2_vit_without_functionalization,
        "pytorch/xla#8607",
        env={"XLA_DISABLE_FUNCTIONALIZATION": "1"},
        signatures=(
            Signature("replicated-params", ShardingLost, r"replicated instead of sharded"),
            Signature("missing-sharding", RuntimeError, r"has_sharding|must have a sharding"),
        ),
        crashes=(
            CrashSignature("missing-sharding", _ABORT, r"has_sharding|must have a sharding"),
        ),
    ),
    Reproducer(
        "aliased-save", "detach-add-aliasing-off", detach_add_read, "pytorch/xla#8482",
        env=_ALIASING_OFF, signatures=(_STALE, _DELETED), crashes=(_DELETED_ABORT,),
    ),
    Reproducer(
        "aliased-save", "detach-add-aliasing-on", detach_add_read, "pytorch/xla#8482",
        env=_ALIASING_ON, signatures=(_STALE, _DELETED), crashes=(_DELETED_ABORT,),
    ),
    Reproducer(
        "aliased-save", "save-after-inplace-aliasing-on", save_after_inplace, "pytorch/xla#8422",
        env=_ALIASING_ON, signatures=(_STALE, _DELETED), crashes=(_DELETED_ABORT,),
    ),
    Reproducer(
        "aliased-save", "save-after-inplace-aliasing-off", save_after_inplace, "pytorch/xla#8422",
        env=_ALIASING_OFF, signatures=(_STALE, _DELETED), crashes=(_DELETED_ABORT,),
    ),
    Reproducer(
        "partial-sync-donation", "unlazy-after-inplace-aliasing-on", unlazy_after_inplace,
        "pytorch/xla#8422 with xm.unlazy in place of xm.save",
        env=_ALIASING_ON, signatures=(_STALE, _DELETED), crashes=(_DELETED_ABORT,),
    ),
    Reproducer(
        "partial-sync-donation", "unlazy-derived-read-aliasing-on", unlazy_derived_read,
        "the shrunk counterexample of the sync-aliasing invariant",
        env=_ALIASING_ON, signatures=(_STALE, _DELETED), crashes=(_DELETED_ABORT,),
    ),
    Reproducer(
        "partial-sync-donation", "unlazy-after-inplace-aliasing-off", unlazy_after_inplace,
        "pytorch/xla#8422 with xm.unlazy, param aliasing off (nothing is donated)",
        env=_ALIASING_OFF, signatures=(_STALE, _DELETED), crashes=(_DELETED_ABORT,),
    ),
    Reproducer(
        "sharded-read-compiles", "gradient-read-in-loop", gradient_read_in_loop,
        "the shrunk counterexample of the step-boundary invariant (the symptom of pytorch/xla#7943)",
        signatures=(_COMPILES_EVERY_READ,),
    ),
    Reproducer(
        "sharded-read-compiles", "repeated-read", repeated_read,
        "PjRtComputationClient::ReplicateShardedData, which compiles its program on every call "
        "(pytorch/xla#9751)",
        signatures=(_COMPILES_EVERY_READ,),
    ),
    Reproducer(
        "expanded-grad-accumulation", "repeated-sum-backward", sum_backward_twice,
        "the shrunk counterexample of the semantics oracle", env=_FUNCTIONALIZATION_ON,
        signatures=(_SUMMED_INTO_EXPAND,),
    ),
    Reproducer(
        "expanded-grad-accumulation", "accumulation-loop", accumulate_micro_batches,
        "gradient accumulation over micro-batches whose loss is a sum", env=_FUNCTIONALIZATION_ON,
        signatures=(_SUMMED_INTO_EXPAND,),
    ),
    Reproducer(
        "expanded-grad-accumulation", "zero-grad-kept", zero_grad_in_place,
        "optimizer.zero_grad(set_to_none=False) after a sum's backward", env=_FUNCTIONALIZATION_ON,
        signatures=(_SUMMED_INTO_EXPAND,),
    ),
)



#: PyTorch/XLA's triggers as the ``xharness.upstream`` group registers them (``torch_xla``): the
#: catalog's and the known findings' own (``upstream_findings``)
TRIGGERS: tuple[Reproducer, ...] = REPRODUCERS + tuple(r for r in FINDING_REPRODUCERS if r.runtime == RUNTIME)


def _every() -> tuple[Reproducer, ...]:
    """Every registered runtime's triggers (``harness.scenarios.triggers``): PyTorch/XLA's,
    JAX's (``upstream_jax``: same machinery, other runtime) and the plugins'."""
    from harness.scenarios import triggers

    return triggers.every()


def _catalog() -> tuple[Reproducer, ...]:
    """The triggers of catalog scenarios: every one but the known findings' own."""
    findings = set(finding_names())
    return tuple(r for r in _every() if r.scenario not in findings)


def scenarios(runtime: str = RUNTIME) -> list[str]:
    """Catalog ids with a reproducer for ``runtime``, in catalog order."""
    return list(dict.fromkeys(r.scenario for r in _catalog() if r.runtime == runtime))


def check_name(name: str) -> None:
    """What ``repro --runtime``, ``bisect`` and ``report upstream`` accept: a catalog scenario, or
    a known finding with reproducers here. Raises ``registry.UnknownScenario`` naming both lists."""
    from harness.scenarios import registry

    if name in finding_names():
        return
    try:
        registry.get(name)
    except registry.UnknownScenario as exc:
        raise registry.UnknownScenario(name, [], f"{exc}; known findings: {', '.join(finding_names())}") from None




def reproducers(scenario: str, runtime: str = RUNTIME) -> list[Reproducer]:
    return [r for r in _every() if r.scenario == scenario and r.runtime == runtime]


def find(scenario: str, variant: str) -> Reproducer:
    for r in _every():
        if (r.scenario, r.variant) == (scenario, variant):
            return r
    known = ", ".join(f"{r.scenario}:{r.variant}" for r in _every())
    raise KeyError(f"no upstream reproducer {scenario}:{variant} (known: {known})")


# ------------------------------------------------------------------------------ the parent side
def child_environment(rep: Reproducer, base: dict[str, str] | None = None) -> dict[str, str]:
    """The variant's environment: PyTorch/XLA on CPU with ``CPU_DEVICES`` devices unless the
    caller chose a device (``PJRT_DEVICE``), plus the variant's own flags."""
    env = dict(os.environ if base is None else base)
    if rep.runtime != RUNTIME:  # JAX: only the variant's own flags
        env.update(rep.env)
        env["PYTHONUNBUFFERED"] = "1"
        return env
    if not env.get("PJRT_DEVICE"):
        env["PJRT_DEVICE"] = "CPU"
    if env["PJRT_DEVICE"] == "CPU":
        env.setdefault("CPU_NUM_DEVICES", str(CPU_DEVICES))
    env.update(rep.env)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def command_line(rep: Reproducer, python: str) -> str:
    flags = " ".join(f"{k}={v}" for k, v in sorted(rep.env.items()))
    device = f"PJRT_DEVICE=CPU CPU_NUM_DEVICES={CPU_DEVICES} " if rep.runtime == RUNTIME else ""
    return (f"{flags} " if flags else "") + f"{device}{python} -m {__name__} {rep.scenario} {rep.variant}"


def run_repeated(rep: Reproducer, python: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> VariantOutcome:
    """The variant run ``rep.runs()`` times, each in a fresh process (a crash is the signature of
    one run, never of the next), its outcomes counted. Runs that agree are that outcome; runs that
    disagree are ``flaky`` with the counts, and the first run that differed from the first is
    kept as the details, so both sides of the coin are on record."""
    runs = [run_variant(rep, python, timeout) for _ in range(rep.runs())]
    first = runs[0]
    if len(runs) == 1:
        return first
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.outcome] = counts.get(run.outcome, 0) + 1
    first.counts = counts
    first.seconds = round(sum(r.seconds for r in runs), 3)
    if len(counts) > 1:
        other = next(r for r in runs if r.outcome != first.outcome)
        first.details = (f"{first.details}\n\n--- a run that {other.outcome}: {other.error}\n{other.details}").strip()
        first.outcome = FLAKY
        first.error = ", ".join(f"{o} in {n} of {len(runs)} runs" for o, n in counts.items())
    return first


def run_variant(rep: Reproducer, python: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> VariantOutcome:
    """Run one variant in a fresh process of ``python`` (default: this interpreter) and judge
    what came back: its result line, or its death (signal, exit code, hang)."""
    python = python or sys.executable
    args = [rep.scenario, rep.variant, "--timeout", str(timeout)]
    started = time.monotonic()
    base = VariantOutcome(rep.scenario, rep.variant, FAILED, command=command_line(rep, python))
    returncode, stdout, stderr = _start(rep, python, args, timeout)
    base.seconds = round(time.monotonic() - started, 3)
    if returncode is None:
        base.error = f"hung: no result within {timeout:g} s (killed; thread stacks dumped before)"
        base.details = _tail(stderr, 200)
        return base
    line = next((ln for ln in stdout.splitlines() if ln.startswith(RESULT_MARKER)), None)
    if line is not None:
        data = json.loads(line[len(RESULT_MARKER):])
        data.update(seconds=base.seconds, command=base.command)
        return VariantOutcome(**data)
    if returncode < 0 and stack_dumps.died_in_timed_dump(stderr):
        # no result when its stacks were dumped, and the dump itself killed it: the signal is the
        # dump's, not the trigger's, so it is neither the bug's crash nor a reproduction
        died = f"the process died on {signal.Signals(-returncode).name}"
        base.error = "hung: " + stack_dumps.hung_in_dump(stack_dumps.stack_dump_delay(timeout), died)
        base.details = _tail(stderr, 200)
        base.release = _release_from(stderr)
        return base
    if returncode < 0:
        signum = -returncode
        name = signal.Signals(signum).name
        crash = next((c for c in rep.crashes if c.matches(signum, stderr)), None)
        check = _check_line(stderr)
        base.signal = signum
        base.outcome = REPRODUCED if crash else FAILED
        base.signature = crash.name if crash else ""
        base.error = f"the process died on {name}" + (f": {check}" if check else "")
        base.details = _tail(stderr)
        base.release = _release_from(stderr)
        return base
    base.exit_code = returncode
    base.error = f"exit {returncode} without a result" + (
        f": {_check_line(stderr)}" if _check_line(stderr) else ""
    )
    base.details = _tail(stderr)
    return base


def _start(rep: Reproducer, python: str, args: list[str], timeout: float) -> tuple[int | None, str, str]:
    """Run the variant's child side in a fresh process: its exit code (None: hung, killed at
    ``timeout``), stdout and stderr. A PyTorch/XLA trigger of this interpreter is forked from
    ``warm_fork``'s server, which has imported torch already; anything else (a JAX trigger, whose
    flags JAX reads at import, or another interpreter) is a new interpreter."""
    env = child_environment(rep)
    if rep.runtime == RUNTIME and python == sys.executable:
        done = warm_fork.run(f"{__name__}:child_main", args, env, timeout)
        if done is not None:
            return done.returncode, done.stdout, done.stderr
    # its own process group: a variant that hangs or dies takes what it started with it
    proc = subprocess.Popen([python, "-m", __name__, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        stdout, stderr = proc.communicate()
        return None, stdout, stderr
    finally:
        _kill_group(proc.pid)
    return proc.returncode, stdout, stderr


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(text: str, lines: int = STDERR_TAIL) -> str:
    kept = text.strip().splitlines()
    dropped = len(kept) - lines
    body = "\n".join(kept[-lines:])
    return f"[... {dropped} earlier lines ...]\n{body}" if dropped > 0 else body


def _check_line(stderr: str) -> str:
    """The CHECK message of an abort, the most telling line: ``Check failed: ...``, or the fatal
    log line (``F0000 ...``) with the ``Status:`` line that follows it."""
    lines = stderr.splitlines()
    for index, line in enumerate(lines):
        found = re.search(r"Check failed:.*", line)
        if found:
            return found.group(0).strip()[:400]
        if re.match(r"F\d{4} ", line):
            status = lines[index + 1].strip() if index + 1 < len(lines) else ""
            text = line.split("] ", 1)[-1].strip()
            return (f"{text} {status}" if status.startswith("Status:") else text)[:400]
    found = re.search(r"terminate called .*|RET_CHECK.*", stderr)
    return found.group(0).strip()[:400] if found else ""


def _one_line(exc: BaseException) -> str:
    """``Type: first line``, plus the last line when a C++ error put its stack in between (the
    last line is the one that names the problem: "buffer with shape ... is deleted")."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    if len(lines) > 1 and not lines[-1].startswith("***"):
        text += f" ... {lines[-1]}"
    return f"{type(exc).__name__}: {text}"[:600]


_RELEASE_LINE = "xharness-upstream: "  # then the runtime and its release


def _release_from(stderr: str) -> str:
    match = re.search(re.escape(_RELEASE_LINE) + r"\S+ (\S+)", stderr)
    return match.group(1) if match else ""


# ------------------------------------------------------------------------------ the child side
def _versions(runtime: str) -> dict[str, str]:
    """The versions a report names: Python, the distributions of the harness' real runtimes, and
    a plugin's ``runtime`` as its adapter says (its version is no distribution's name)."""
    import importlib.metadata
    import platform

    out = {"python": platform.python_version()}
    for dist in ("torch", "torch_xla", "jax", "jaxlib"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    if runtime not in out:
        found = _adapter_version(runtime)
        if found:
            out[runtime] = found
    return out


def _adapter_version(runtime: str) -> str:
    """``Adapter.version()`` of a plugin's runtime, what its expected rows are matched on; ""
    where the runtime cannot be loaded here (the trigger is then skipped as not installed)."""
    from harness import adapters

    try:
        return str(adapters.get(runtime).version())
    except Exception:  # noqa: BLE001 - a runtime that cannot say its version is not installed here
        return ""


def _backend(rep: Reproducer) -> str:
    """The platform the variant ran on: JAX's default backend once JAX is up, else PyTorch/XLA's
    ``PJRT_DEVICE``; the expected table is kept per backend."""
    jax = sys.modules.get("jax")
    if jax is not None:
        try:
            return str(jax.default_backend())
        except Exception:  # noqa: BLE001 - a backend that failed to start: say nothing
            return ""
    device = os.environ.get("PJRT_DEVICE", "").lower()
    found = platform_backend(device) if device else None
    return str(found) if found is not None else ""


def _judge(rep: Reproducer, exc: BaseException) -> tuple[str, str]:
    sig = next((s for s in rep.signatures if s.matches_exception(exc)), None)
    return (REPRODUCED, sig.name) if sig else (FAILED, "")


def child_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}")
    parser.add_argument("scenario")
    parser.add_argument("variant")
    parser.add_argument("--timeout", type=float, default=None)
    args = parser.parse_args(argv)
    faulthandler.enable(all_threads=True)  # a crash leaves its Python stack on stderr
    if args.timeout and args.timeout > 0:
        faulthandler.dump_traceback_later(stack_dumps.stack_dump_delay(args.timeout), exit=False)
    rep = find(args.scenario, args.variant)
    versions = _versions(rep.runtime)
    release = versions.get(rep.runtime, "")
    # on stderr first, so that a process that dies still says which release it ran
    print(f"{_RELEASE_LINE}{rep.runtime} {release or '(not installed)'}", file=sys.stderr, flush=True)
    result = VariantOutcome(rep.scenario, rep.variant, PASSED, release=release, versions=versions)
    if not release:
        result.outcome, result.machine_skip = SKIPPED, True
        result.error = f"{rep.runtime} is not installed in {sys.executable}"
    else:
        os.environ.update(rep.env)
        try:
            rep.body()
        except Unsupported as exc:
            result.outcome, result.error = SKIPPED, str(exc)
            result.machine_skip = isinstance(exc, MachineLacks)
        except Exception as exc:  # judged against the scenario's upstream signatures
            result.outcome, result.signature = _judge(rep, exc)
            result.error = _one_line(exc)
            result.details = traceback.format_exc()
    result.backend = _backend(rep)
    faulthandler.cancel_dump_traceback_later()
    print(RESULT_MARKER, json.dumps(result.to_json()), flush=True)
    # leave without running PyTorch/XLA's teardown: the verdict is in, and some releases abort
    # while destroying a runtime that saw an error
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    # run as the imported module, not as ``__main__``: a variant raises the module's own
    # ``MachineLacks``, which a second copy of this module (``__main__``) would not recognize
    from harness.scenarios.upstream_torch_xla import child_main as _imported_child_main

    _imported_child_main()
