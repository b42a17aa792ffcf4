"""Whole training programs as values: small models, losses, optimizer steps and step boundaries.

The invariants elsewhere check one property at a time over small programs; the worst bugs of a
lazy runtime live in whole training programs: a wrong gradient, a plan reused for a graph it does
not fit, a parameter that silently stops being a leaf, a value that depends on where the step
boundary fell. This module generates such programs (in the manner of NNSmith and Csmith: every
drawn program is valid), and ``differential`` checks them against a float64 numpy oracle and
against themselves with the step boundaries moved.

A ``Program`` is an immutable value (frozen dataclasses all the way down), so it prints, hashes
and shrinks well: hypothesis shrinks a failing program to fewer steps, fewer layers and plainer
choices (the first of every option is the plainest). It is made of

* a model: linear layers (a weight, optionally a bias, each weight optionally laid out over a
  mesh by a drawn partition spec), activations, layer norms, a reshape-transpose-reshape shuffle,
  a Python-scalar scale and an in-place one;
* a loss (mean squared error, squares, cross entropy), scaled by a Python scalar per step;
* an optimizer (SGD, SGD with momentum and weight decay, Adam), whose learning rate is a Python
  scalar set every step (a schedule: a scalar must never be baked into a cached plan);
* inputs made fresh or written in place into buffers made once (chosen per step), and a target
  that is a tensor of its own, the input itself, or a copy of it (``y.copy_(x)``: two tensors,
  one value, after a step possibly one buffer, or two where the input was a fresh tensor);
* per step, in-place updates (of the input, before or after the boundary once the inputs are
  ready; of a parameter, before the forward pass; of the target, after it), gradients kept or
  cleared, and boundaries anywhere: a ``mark_step``, a sync of chosen tensors or a read, once the
  inputs are ready, inside the forward pass, between the forward pass (and its reads) and
  ``backward``, between ``backward`` and the optimizer step, after it, or none at all, so several
  optimizer steps can share one graph. A boundary before ``backward`` makes ``backward`` take the
  gradient of a forward pass an earlier graph computed, through values a read already brought to
  the host: every buffer that forward pass read must outlive the boundary, an input's buffer that
  an in-place update replaced included.

A program becomes code (``code``) in the dialect of the runtime under test
(``harness.adapters.base.TrainingDialect``): the code that runs is the code a failure prints,
``import harness.runtime as xr`` and all, for a person to paste. The code records what it reads
in ``seen`` under labels ``differential``'s oracle computes too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import strategies as st

from harness.adapters.base import TrainingDialect
from harness.properties import strategies as pst

#: the extras a linear layer may be followed by, plainest first
EXTRAS: tuple[str, ...] = ("none", "relu", "tanh", "sigmoid", "layernorm", "shuffle", "scale", "scale_")
LOSSES: tuple[str, ...] = ("mse", "squares", "xent")
OPTIMIZERS: tuple[str, ...] = ("sgd", "momentum", "adam")
#: the target: a tensor of its own, the input tensor itself, a copy of the input (``y.copy_(x)``)
TARGETS: tuple[str, ...] = ("own", "same", "copy")
#: what a step updates in place: the input (before the boundary once the inputs are ready, or after
#: it: then the update reads a buffer that boundary made) or a parameter before the forward pass, or
#: the target after it, before the loss reads it (torch refuses a backward through a value that was
#: saved for it and updated since: a product saves its input, so the input is never written after it)
TOUCHES: tuple[str, ...] = ("none", "input", "param", "target", "loaded_input")
#: a boundary: nothing, a step boundary, a waiting sync of the values at hand, a read of them
BOUNDARIES: tuple[str, ...] = ("none", "mark_step", "sync", "read")
#: the boundary between the loss and ``backward`` (a read there is ``Step.read_loss``)
HOLDS: tuple[str, ...] = ("none", "mark_step", "sync")
#: the boundary after an optimizer step, plainest first: the ordinary loop ends each step
ENDS: tuple[str, ...] = ("mark_step", "none", "sync", "read")
#: Python scalars a schedule draws from: never 0 or 1, which some runtimes keep as constants
LRS: tuple[float, ...] = (0.1, 0.05, 0.2, 0.02)
SCALES: tuple[float, ...] = (1.0, 0.5, 2.0, 0.25)
FACTORS: tuple[float, ...] = (0.5, 1.5, -0.75, 0.9)
ADAM_EPS = 1e-3  # large enough that a gradient at float noise level moves nothing visibly
LAYERNORM_EPS = 1e-5


@dataclass(frozen=True)
class Layer:
    """One layer: ``linear`` (``width`` outputs, ``bias``, the weight's partition ``spec`` over
    the program's mesh or None), or an extra (``EXTRAS``) with its Python ``scalar``."""

    kind: str
    width: int = 0
    bias: bool = True
    spec: tuple[Any, ...] | None = None
    scalar: float = 1.0


@dataclass(frozen=True)
class Step:
    """One optimizer step and the boundaries around it."""

    lr: float = LRS[0]  # the learning rate set for this step (a Python scalar schedule)
    scale: float = 1.0  # the loss scale (a Python scalar; 1.0 writes none)
    touch: str = "none"  # an in-place update around the forward pass (``TOUCHES``)
    factor: float = FACTORS[0]  # the Python scalar of that update
    fresh: bool = False  # fresh input tensors this step, where the program reuses its buffers
    load: str = "none"  # a boundary once the step's inputs are ready (``BOUNDARIES``)
    cut: int = 0  # 0: none; k: a boundary after layer k - 1 of the forward pass
    cut_kind: str = "mark_step"  # that boundary (``BOUNDARIES`` without "none")
    read_loss: bool = False  # read the loss before ``backward``
    hold: str = "none"  # a boundary after the forward pass and its reads, before ``backward`` (``HOLDS``)
    after_backward: str = "none"  # between ``backward`` and the optimizer step
    accumulate: bool = False  # keep the gradients: the next ``backward`` adds to them
    end: str = "mark_step"  # after the optimizer step (``ENDS``)


@dataclass(frozen=True)
class Program:
    """A training program (see the module docstring)."""

    batch: int
    features: int
    layers: tuple[Layer, ...]
    loss: str
    optimizer: str
    weight_decay: float
    target: str
    reuse_inputs: bool  # one input buffer, written in place every step, instead of fresh tensors
    steps: tuple[Step, ...]
    mesh: tuple[tuple[int, ...], tuple[int, ...], tuple[str, ...]] | None = None
    input_spec: tuple[Any, ...] | None = None
    functionalization: bool = True  # runtime options, where the runtime lets a program set them
    param_aliasing: bool = True
    seed: int = 0

    # ------------------------------------------------------------------ derived facts

    @property
    def out_width(self) -> int:
        return [layer.width for layer in self.layers if layer.kind == "linear"][-1]

    def widths(self) -> list[int]:
        """The width of the activation after each layer."""
        out, width = [], self.features
        for layer in self.layers:
            if layer.kind == "linear":
                width = layer.width
            out.append(width)
        return out

    def parameters(self) -> list[tuple[str, tuple[int, ...], str]]:
        """(name, shape, how it starts) of every parameter, in the optimizer's order; ``how`` is
        ``init``, ``ones`` or ``zeros``."""
        out: list[tuple[str, tuple[int, ...], str]] = []
        width = self.features
        for i, layer in enumerate(self.layers):
            if layer.kind == "linear":
                out.append((f"w{i}", (layer.width, width), "init"))
                if layer.bias:
                    out.append((f"b{i}", (layer.width,), "init"))
                width = layer.width
            elif layer.kind == "layernorm":
                out += [(f"g{i}", (width,), "ones"), (f"c{i}", (width,), "zeros")]
        return out

    def features_used(self) -> set[str]:
        """What the program exercises, by name (the generator test asks that each is reached)."""
        found = {f"optimizer:{self.optimizer}", f"loss:{self.loss}", f"target:{self.target}"}
        found |= {f"layer:{layer.kind}" for layer in self.layers}
        if self.target != "own":
            found.add("shared-inputs")
        if self.reuse_inputs:
            found.add("reused-input-buffer")
        if self.mesh is not None and (self.input_spec or any(layer.spec for layer in self.layers)):
            found.add("sharding")
        if len({s.lr for s in self.steps}) > 1:
            found.add("lr-schedule")
        if len({s.scale for s in self.steps}) > 1:
            found.add("loss-scale-schedule")
        for s in self.steps:
            if s.touch != "none" or any(layer.kind == "scale_" for layer in self.layers):
                found.add("in-place")
            if s.touch != "none":
                found.add(f"touch:{s.touch}")
            if s.cut:
                found.add(f"cut:{s.cut_kind}")
            if s.load != "none":
                found.add(f"load:{s.load}")
            if self.reuse_inputs and s.fresh:
                found.add("fresh-and-reused-inputs")
            if s.read_loss:
                found.add("read-loss")
            if s.hold != "none":
                found.add(f"hold:{s.hold}")
            if s.after_backward != "none":
                found.add(f"after-backward:{s.after_backward}")
            if s.accumulate:
                found.add("accumulate")
        for a, _ in zip(self.steps, self.steps[1:], strict=False):
            if a.end == "none":
                found.add("steps-without-boundary")
        return found

    def size(self) -> int:
        """How much a counterexample needs beyond the plainest one-step, one-layer program."""
        plain = Step()
        extra = sum(
            sum(1 for f in ("scale", "touch", "fresh", "load", "cut", "read_loss", "hold", "after_backward", "accumulate",
                          "end")
                if getattr(s, f) != getattr(plain, f))
            for s in self.steps
        )
        return (
            len(self.steps) - 1
            + len(self.layers) - 1
            + extra
            + OPTIMIZERS.index(self.optimizer)
            + TARGETS.index(self.target)
            + int(self.reuse_inputs)
            + int(self.mesh is not None)
        )

    def with_boundaries(self, boundaries: tuple[tuple[int, str, str, str], ...]) -> Program:
        """The same program with each step's boundaries replaced by ``boundaries`` (cut,
        cut_kind, after_backward, end per step, cycled): what the program computes must not
        change. Reads stay reads: a read is an observation, not only a boundary. The boundary
        before ``backward`` (``Step.hold``) stays where it was drawn."""
        if not boundaries:
            return self
        steps = []
        for k, s in enumerate(self.steps):
            cut, cut_kind, after, end = boundaries[k % len(boundaries)]
            steps.append(replace(
                s,
                cut=cut % (len(self.layers) + 1) if s.cut_kind != "read" or not s.cut else s.cut,
                cut_kind=cut_kind if s.cut_kind != "read" or not s.cut else "read",
                after_backward=after if s.after_backward != "read" else "read",
                end=end if s.end != "read" else "read",
            ))
        return replace(self, steps=tuple(steps))


# ---------------------------------------------------------------------------- labels


def loss_label(k: int) -> str:
    return f"loss {k}"


def input_label(name: str, k: int) -> str:
    return f"{name} {k}"


def activation_label(layer: int, k: int) -> str:
    return f"h{layer} {k}"


def grad_label(name: str, k: int) -> str:
    return f"{name}.grad {k}"


def param_label(name: str, k: int | None = None) -> str:
    return name if k is None else f"{name} {k}"


# ---------------------------------------------------------------------------- data


def data(key: list[int], *shape: int) -> Any:
    """The program's numbers: standard normal float32 values from ``key``. Every array has its
    own key, so the printed program and the oracle draw the same values in any order."""
    import numpy as np

    return np.random.default_rng(key).standard_normal(shape).astype(np.float32)


DATA_SOURCE = """\
def data(key, *shape):
    return np.random.default_rng(key).standard_normal(shape).astype(np.float32)
"""


def fan_in(program: Program, name: str) -> int:
    """The input width of the linear layer parameter ``name`` belongs to (``w3``, ``b3``)."""
    return [program.features, *program.widths()][int(name[1:])]


def init_key(program: Program, index: int) -> list[int]:
    return [program.seed, index]


def input_key(program: Program, k: int) -> list[int]:
    return [program.seed, 100 + k]


def target_key(program: Program, k: int) -> list[int]:
    return [program.seed, 200 + k]


# ---------------------------------------------------------------------------- code


@dataclass(frozen=True)
class Code:
    """A program as code: ``head`` (imports, parameters, optimizer), ``body`` (the steps: run it
    again and the loop goes on from its own outputs) and ``tail`` (the final reads)."""

    head: str
    body: str
    tail: str

    def text(self, repeats: int = 1, count: str = "") -> str:
        """The whole program; with ``repeats`` the steps run in a loop that prints the compile
        count (``count``, the dialect's expression) after each pass."""
        if repeats == 1:
            return f"{self.head}\n{self.body}\n{self.tail}"
        loop = "\n".join("    " + line if line else line for line in self.body.splitlines())
        return f"{self.head}\nfor rep in range({repeats}):\n{loop}\n    print('compiles so far:', {count})\n\n{self.tail}"


def code(program: Program, dialect: TrainingDialect) -> Code:
    """``program`` written in ``dialect``."""
    return _Writer(program, dialect).write()


class _Writer:
    def __init__(self, program: Program, dialect: TrainingDialect) -> None:
        self.p, self.d = program, dialect
        self.params = program.parameters()
        self.names = [name for name, _, _ in self.params]

    def read(self, t: str) -> str:
        return self.d.read.format(t=t)

    def sync(self, tensors: list[str]) -> str:
        return self.d.sync.format(tensors="[" + ", ".join(tensors) + "]")

    def boundary(self, kind: str, tensors: list[tuple[str, str]]) -> list[str]:
        """``tensors``: (expression, label) of the values at hand."""
        if kind == "mark_step":
            return [self.d.mark_step]
        if kind == "sync":
            return [self.sync([t for t, _ in tensors])]
        if kind == "read":
            return [f"seen[{label!r}] = {self.read(t)}" for t, label in tensors]
        return []

    def write(self) -> Code:
        p, d = self.p, self.d
        head = [d.prelude]
        if d.options:
            head.append(d.options.format(functionalization=p.functionalization, param_aliasing=p.param_aliasing))
        head += ["", DATA_SOURCE, "seen = {}"]
        if p.mesh is not None:
            ids, shape, names = p.mesh
            head.append("mesh = " + d.mesh.format(ids=list(ids), shape=tuple(shape), names=tuple(names)))
        specs = {f"w{i}": layer.spec for i, layer in enumerate(p.layers) if layer.kind == "linear"}
        for index, (name, shape, how) in enumerate(self.params):
            if how == "init":  # scaled by the layer's fan-in, as torch.nn.Linear initializes
                dims = ", ".join(map(str, shape))
                array = f"data({init_key(p, index)}, {dims}) / {math.sqrt(fan_in(p, name))!r}"
            else:
                array = f"np.{how}({shape[0]}, np.float32)"
            head.append(f"{name} = " + d.parameter.format(array=array))
            if specs.get(name) and p.mesh is not None:
                head.append(d.mark_sharding.format(t=name, mesh="mesh", spec=specs[name]))
        params = "[" + ", ".join(self.names) + "]"
        if p.optimizer == "adam":
            head.append("opt = " + d.adam.format(params=params, lr=p.steps[0].lr, eps=ADAM_EPS))
        else:
            momentum = 0.9 if p.optimizer == "momentum" else 0.0
            head.append("opt = " + d.sgd.format(params=params, lr=p.steps[0].lr, momentum=momentum,
                                                weight_decay=p.weight_decay))
        batch, features, out = p.batch, p.features, p.out_width
        if p.reuse_inputs:
            head.append("x = " + d.tensor.format(array=f"np.zeros(({batch}, {features}), np.float32)"))
            head += self.mark_input()
            if p.target != "same":
                width = out if p.target == "own" else features
                head.append("y = " + d.tensor.format(array=f"np.zeros(({batch}, {width}), np.float32)"))
        body: list[str] = []
        for k, s in enumerate(p.steps, start=1):
            body += [f"# step {k}"] + self.step(k, s)
        tail = [f"seen[{param_label(name)!r}] = {self.read(name)}" for name in self.names]
        return Code("\n".join(head), "\n".join(body), "\n".join(tail))

    def mark_input(self) -> list[str]:
        p = self.p
        if p.mesh is None or not p.input_spec:
            return []
        return [self.d.mark_sharding.format(t="x", mesh="mesh", spec=p.input_spec)]

    def step(self, k: int, s: Step) -> list[str]:
        p, d = self.p, self.d
        lines: list[str] = []
        batch, features, out = p.batch, p.features, p.out_width
        x_array = f"data({input_key(p, k)}, {batch}, {features})"
        reuse = p.reuse_inputs and not s.fresh
        if reuse:
            lines.append("x.copy_(" + d.tensor.format(array=x_array) + ")")
        else:
            lines.append("x = " + d.tensor.format(array=x_array))
            lines += self.mark_input()
        if p.target == "same":
            lines.append("y = x")
        elif p.target == "copy":
            if not reuse:
                lines.append("y = " + d.tensor.format(array=f"np.zeros(({batch}, {features}), np.float32)"))
            lines.append("y.copy_(x)")
        else:
            y_array = f"data({target_key(p, k)}, {batch}, {out})"
            lines.append("y.copy_(" + d.tensor.format(array=y_array) + ")" if reuse
                         else "y = " + d.tensor.format(array=y_array))
        if s.touch == "input":
            lines.append(f"x.mul_({s.factor!r})")
        elif s.touch == "param":
            lines.append(f"{self.names[0]}.detach().mul_({s.factor!r})")
        lines += self.boundary(s.load, [("x", input_label("x", k)), ("y", input_label("y", k))])
        if s.touch == "loaded_input":
            lines.append(f"x.mul_({s.factor!r})")
        lines.append("h = x")
        widths = p.widths()
        for i, layer in enumerate(p.layers):
            lines += self.layer(i, layer, widths[i])
            if s.cut == i + 1:
                lines += self.boundary(s.cut_kind, [("h", activation_label(i, k))])
        if s.touch == "target":
            lines.append(f"y.mul_({s.factor!r})")
        lines += self.loss(s)
        if s.read_loss:
            lines.append(f"seen[{loss_label(k)!r}] = {self.read('loss')}")
        lines += self.boundary(s.hold, [("loss", loss_label(k))])
        lines.append("loss.backward()")
        lines += self.boundary(s.after_backward, [(f"{n}.grad", grad_label(n, k)) for n in self.names])
        lines.append(d.set_lr.format(opt="opt", lr=s.lr))
        lines.append("opt.step()")
        if not s.accumulate:
            lines.append("opt.zero_grad()")
        lines += self.boundary(s.end, [(n, param_label(n, k)) for n in self.names])
        return lines

    def layer(self, i: int, layer: Layer, width: int) -> list[str]:
        if layer.kind == "linear":
            return [f"h = h @ w{i}.T + b{i}" if layer.bias else f"h = h @ w{i}.T"]
        if layer.kind in ("relu", "tanh", "sigmoid"):
            return [f"h = h.{layer.kind}()"]
        if layer.kind == "layernorm":
            return [
                "h = h - h.mean(-1, keepdim=True)",
                f"h = h * ((h * h).mean(-1, keepdim=True) + {LAYERNORM_EPS!r}).rsqrt() * g{i} + c{i}",
            ]
        if layer.kind == "shuffle":
            b = self.p.batch
            return [f"h = h.reshape({b}, 2, {width // 2}).transpose(1, 2).reshape({b}, {width})"]
        if layer.kind == "scale":
            return [f"h = h * {layer.scalar!r}"]
        if layer.kind == "scale_":
            return [f"h.mul_({layer.scalar!r})"]
        return []

    def loss(self, s: Step) -> list[str]:
        lines = {
            "mse": ["d = h - y", "loss = (d * d).mean()"],
            "squares": ["loss = (h * h).mean()"],
            "xent": ["loss = -(h.log_softmax(-1) * y.softmax(-1)).sum(-1).mean()"],
        }[self.p.loss]
        if s.scale != 1.0:
            lines = [*lines, f"loss = loss * {s.scale!r}"]
        return lines


# ---------------------------------------------------------------------------- strategies


@st.composite
def _layers(draw: st.DrawFn, features: int, max_blocks: int, last_width: int | None, mesh: Any) -> tuple[Layer, ...]:
    blocks = draw(pst.ints(1, max_blocks))
    layers: list[Layer] = []
    width = features
    for b in range(blocks):
        out = draw(pst.ints(1, 4))
        if b == blocks - 1 and last_width is not None:
            out = last_width
        spec = None
        if mesh is not None and draw(st.booleans()):
            drawn = tuple(draw(pst.partition_specs(mesh, 2, forms=("tuple",))))
            if any(drawn) and _divides(mesh, drawn, (out, width)):
                spec = drawn
        layers.append(Layer("linear", out, draw(st.booleans()), spec))
        width = out
        extra = draw(pst.choice(EXTRAS))
        if extra == "shuffle" and width % 2:
            extra = "relu"
        if extra != "none":
            layers.append(Layer(extra, scalar=draw(pst.choice(FACTORS)) if extra.startswith("scale") else 1.0))
    return tuple(layers)


def _divides(mesh: Any, spec: tuple[Any, ...], shape: tuple[int, ...]) -> bool:
    return all(dim % parts == 0 for dim, parts in zip(shape, pst.split_counts(mesh, spec), strict=True))


@st.composite
def _step(draw: st.DrawFn, n_layers: int, syncs: bool, target: str) -> Step:
    boundaries = BOUNDARIES if syncs else tuple(b for b in BOUNDARIES if b != "sync")
    holds = HOLDS if syncs else tuple(b for b in HOLDS if b != "sync")
    ends = ENDS if syncs else tuple(b for b in ENDS if b != "sync")
    step = Step(
        lr=draw(pst.choice(LRS)),
        scale=draw(pst.choice(SCALES)),
        touch=draw(pst.choice(TOUCHES)),
        factor=draw(pst.choice(FACTORS)),
        fresh=draw(st.booleans()),
        load=draw(pst.choice(boundaries)),
        cut=draw(pst.ints(0, n_layers)),
        cut_kind=draw(pst.choice(boundaries[1:])),
        read_loss=draw(st.booleans()),
        hold=draw(pst.choice(holds)),
        after_backward=draw(pst.choice(boundaries)),
        accumulate=draw(st.booleans()),
        end=draw(pst.choice(ends)),
    )
    if step.touch == "target" and target == "same":
        step = replace(step, touch="none")  # the target is the input, which the forward pass saved for backward
    return step


def _steps(n_layers: int, max_steps: int, syncs: bool, target: str) -> st.SearchStrategy[tuple[Step, ...]]:
    """A list, not a drawn count followed by that many steps: hypothesis deletes a list's
    elements as it shrinks, where a lowered count would leave the dropped step's choices to be
    read as the program's later ones (the runtime options), and a needless step would stay."""
    return st.lists(_step(n_layers, syncs, target), min_size=1, max_size=max_steps).map(tuple)


@st.composite
def _programs(draw: st.DrawFn, max_blocks: int, max_steps: int, sharding: bool, options: bool, syncs: bool) -> Program:
    features = draw(pst.ints(1, 4))
    batch = draw(pst.ints(1, 4))
    target = draw(pst.choice(TARGETS))
    mesh_obj = None
    if sharding and pst.device_count() > 1 and draw(st.booleans()):
        mesh_obj = draw(pst.meshes(max_axes=2))
    layers = draw(_layers(features, max_blocks, None if target == "own" else features, mesh_obj))
    input_spec = None
    mesh = None
    if mesh_obj is not None:
        mesh = pst.layout_of(mesh_obj)
        drawn = tuple(draw(pst.partition_specs(mesh_obj, 2, forms=("tuple",))))
        if any(drawn) and _divides(mesh_obj, drawn, (batch, features)):
            input_spec = drawn
        if input_spec is None and not any(layer.spec for layer in layers):
            mesh = None  # nothing is laid out on it
    optimizer = draw(pst.choice(OPTIMIZERS))
    return Program(
        batch=batch,
        features=features,
        layers=layers,
        loss=draw(pst.choice(LOSSES)),
        optimizer=optimizer,
        weight_decay=0.0 if optimizer == "adam" else draw(pst.choice((0.0, 0.01))),
        target=target,
        reuse_inputs=draw(st.booleans()),
        steps=draw(_steps(len(layers), max_steps, syncs, target)),
        mesh=mesh,
        input_spec=input_spec,
        functionalization=draw(st.booleans()) if options else True,
        param_aliasing=draw(st.booleans()) if options else True,
        seed=draw(pst.ints(0, 3)),
    )


def programs(
    max_blocks: int = 3,
    max_steps: int = 3,
    *,
    sharding: bool = True,
    options: bool | None = None,
    syncs: bool = True,
) -> st.SearchStrategy[Program]:
    """Training programs of up to ``max_blocks`` linear blocks and ``max_steps`` optimizer steps;
    ``sharding`` lays inputs and weights out over a drawn mesh where the process has several
    devices; ``options`` draws the runtime options (functionalization, parameter aliasing) where
    the runtime under test lets a program set them (None: where its dialect says so); ``syncs``
    draws syncs of chosen tensors among the boundaries (without them, a search on a runtime
    known to break partial syncs looks past that one bug)."""
    if max_blocks < 1 or max_steps < 1:
        raise ValueError(f"programs(max_blocks={max_blocks}, max_steps={max_steps}): at least one of each")
    if options is None:
        from harness.adapters import current

        rt = current()
        options = "training-programs" in rt.capabilities and bool(rt.training_dialect().options)
    return _programs(max_blocks, max_steps, sharding, options, syncs)


#: a boundary placement for one step: (cut, cut kind, after backward, end)
def boundary_placements(max_steps: int = 3) -> st.SearchStrategy[tuple[tuple[int, str, str, str], ...]]:
    """Other places for a program's boundaries (``Program.with_boundaries``)."""
    one = st.tuples(pst.ints(0, 8), pst.choice(("mark_step", "sync")), pst.choice(("none", "mark_step", "sync")),
                    pst.choice(("none", "mark_step", "sync")))
    return st.lists(one, min_size=1, max_size=max_steps).map(tuple)
