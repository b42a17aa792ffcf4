"""Oracles for whole training programs: numpy in float64, and the program against itself.

``training`` draws training programs; here they are judged, in two ways that need no
hand-written expectation:

* **differential** (``training-differential``): the program runs on the runtime under test (as
  code in its own API, ``training.code``) and, independently, in numpy in float64: every value
  the program reads (losses, activations, gradients, parameters after a step, the final
  parameters) must agree within ``harness.runtime.testing.tolerance``. A wrong gradient, a
  scalar baked into a cached plan, a plan reused for a graph it does not fit, a parameter that
  stopped being a leaf: each changes a number the oracle computes independently.
* **metamorphic** (``step-boundary``): moving or adding step boundaries changes no value (a lazy
  runtime's result must not depend on where the graph was cut); running an identical program
  again compiles nothing; feeding the steps' own outputs back in (the training loop going on)
  compiles each graph at most once more, and a third pass nothing.

A failure carries the program as code in the runtime's own API (``import harness.runtime as xr``
for the reference runtime): pasted into a file it runs alone and shows the difference, which is
the form a report upstream needs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

from harness import adapters
from harness.adapters import base
from harness.properties import training
from harness.properties.base import Invariant
from harness.properties.training import Code, Program

#: what the comparison with the float64 oracle needs beyond the dtype's own tolerance: the error of a few
#: float32 optimizer steps (an update's rounding feeds the next step's gradient)
MINIMUM = {"rtol": 1e-3, "atol": 1e-4}
#: the same program cut at other places on the same runtime: only XLA's fusion may differ
METAMORPHIC_MINIMUM = {"rtol": 1e-4, "atol": 1e-5}
MARKER = "the program, as runtime code:"
REPEATS = 3


# ---------------------------------------------------------------------------- running code


def run_code(text: str) -> dict[str, np.ndarray]:
    """Run a program's code; what it read. A failure carries the code as a note."""
    namespace: dict[str, Any] = {}
    try:
        exec(compile(text, "<training program>", "exec"), namespace)  # noqa: S102 - generated here
        return {k: np.asarray(v) for k, v in namespace["seen"].items()}
    except BaseException as exc:
        exc.add_note(f"{MARKER}\n{text}")
        raise
    finally:
        namespace.clear()  # the code's own function keeps the namespace alive otherwise


def code_in(message: str) -> str:
    """The program code a failure message (or note) carries, after ``MARKER``."""
    if MARKER not in message:
        raise ValueError("no program code in this message")
    return message.split(MARKER, 1)[1].lstrip("\n")


# ---------------------------------------------------------------------------- the numpy oracle


def expected(program: Program) -> dict[str, np.ndarray]:
    """What the program reads, computed in numpy in float64 with the derivatives written out by
    hand, from the program's description, not from its code: nothing is shared with the runtime
    under test (the reference runtime takes its derivatives from ``jax.vjp``; an oracle that did
    too would agree with a JAX bug). A float64 computation is also free of the float32 rounding
    both sides would otherwise share."""
    return _Oracle(program).run()


class _Oracle:
    def __init__(self, program: Program) -> None:
        self.p = program
        self.params: dict[str, np.ndarray] = {}
        for index, (name, shape, how) in enumerate(program.parameters()):
            if how == "init":  # the float32 values the program starts from, exactly
                value = training.data(training.init_key(program, index), *shape) / math.sqrt(training.fan_in(program, name))
            else:
                value = getattr(np, how)(shape, np.float32)
            self.params[name] = np.asarray(value, np.float64)
        self.grads: dict[str, np.ndarray] = {}
        self.buffers: dict[str, np.ndarray] = {}
        self.m = {n: np.zeros_like(v) for n, v in self.params.items()}
        self.v = {n: np.zeros_like(v) for n, v in self.params.items()}
        self.t = 0
        self.seen: dict[str, np.ndarray] = {}

    def forward(self, x: np.ndarray, y: np.ndarray, scale: float) -> tuple[float, list[np.ndarray], dict[str, np.ndarray]]:
        """The loss, the activation after each layer, and every parameter's gradient."""
        p, params = self.p, self.params
        acts: list[np.ndarray] = []
        saved: list[Any] = []
        h = x
        for i, layer in enumerate(p.layers):
            kind = layer.kind
            saved.append(h)
            if kind == "linear":
                h = h @ params[f"w{i}"].T + (params[f"b{i}"] if layer.bias else 0.0)
            elif kind == "relu":
                h = np.maximum(h, 0.0)
            elif kind == "tanh":
                h = np.tanh(h)
            elif kind == "sigmoid":
                h = 1.0 / (1.0 + np.exp(-h))
            elif kind == "layernorm":
                c = h - h.mean(-1, keepdims=True)
                r = 1.0 / np.sqrt((c * c).mean(-1, keepdims=True) + training.LAYERNORM_EPS)
                saved[-1] = (c, r)
                h = c * r * params[f"g{i}"] + params[f"c{i}"]
            elif kind == "shuffle":
                b, w = h.shape
                h = h.reshape(b, 2, w // 2).transpose(0, 2, 1).reshape(b, w)
            elif kind in ("scale", "scale_"):
                h = h * layer.scalar
            acts.append(h)
        n = h.size
        if p.loss == "mse":
            loss, dh = float(((h - y) ** 2).mean()), 2.0 * (h - y) / n
        elif p.loss == "squares":
            loss, dh = float((h * h).mean()), 2.0 * h / n
        else:
            q = _softmax(y)
            log_p = h - h.max(-1, keepdims=True)
            log_p = log_p - np.log(np.exp(log_p).sum(-1, keepdims=True))
            loss = float(-(log_p * q).sum(-1).mean())
            dh = (np.exp(log_p) * q.sum(-1, keepdims=True) - q) / h.shape[0]
        loss, dh = loss * scale, dh * scale
        grads: dict[str, np.ndarray] = {}
        for i in range(len(p.layers) - 1, -1, -1):
            layer, h_in, out = p.layers[i], saved[i], acts[i]
            kind = layer.kind
            if kind == "linear":
                grads[f"w{i}"] = dh.T @ h_in
                if layer.bias:
                    grads[f"b{i}"] = dh.sum(0)
                dh = dh @ params[f"w{i}"]
            elif kind == "relu":
                dh = dh * (h_in > 0)
            elif kind == "tanh":
                dh = dh * (1.0 - out * out)
            elif kind == "sigmoid":
                dh = dh * out * (1.0 - out)
            elif kind == "layernorm":
                c, r = h_in
                normed = c * r
                grads[f"g{i}"] = (dh * normed).sum(0)
                grads[f"c{i}"] = dh.sum(0)
                dn = dh * params[f"g{i}"]
                dc = dn * r - c * r**3 * (dn * c).mean(-1, keepdims=True)
                dh = dc - dc.mean(-1, keepdims=True)
            elif kind == "shuffle":
                b, w = dh.shape
                dh = dh.reshape(b, w // 2, 2).transpose(0, 2, 1).reshape(b, w)
            elif kind in ("scale", "scale_"):
                dh = dh * layer.scalar
        return loss, acts, grads

    def run(self) -> dict[str, np.ndarray]:
        p, seen = self.p, self.seen
        names = list(self.params)
        for k, s in enumerate(p.steps, start=1):
            x = training.data(training.input_key(p, k), p.batch, p.features).astype(np.float64)
            y = x if p.target != "own" else training.data(training.target_key(p, k), p.batch, p.out_width).astype(np.float64)
            if s.touch == "input":
                x = x * s.factor
                if p.target == "same":  # y is x: the write shows through it
                    y = x
            elif s.touch == "param":
                self.params[names[0]] = self.params[names[0]] * s.factor
            if s.load == "read":
                seen[training.input_label("x", k)], seen[training.input_label("y", k)] = x, y
            if s.touch == "loaded_input":
                x = x * s.factor
                if p.target == "same":
                    y = x
            elif s.touch == "target":  # after the forward pass has read x; never drawn where y is x
                y = y * s.factor
            loss, acts, grads = self.forward(x, y, s.scale)
            if s.cut and s.cut_kind == "read":
                seen[training.activation_label(s.cut - 1, k)] = acts[s.cut - 1]
            if s.read_loss:
                seen[training.loss_label(k)] = np.asarray(loss)
            for n in names:
                self.grads[n] = grads[n] if n not in self.grads else self.grads[n] + grads[n]
            if s.after_backward == "read":
                for n in names:
                    seen[training.grad_label(n, k)] = self.grads[n]
            self.update(s.lr)
            if not s.accumulate:
                self.grads = {}
            if s.end == "read":
                for n in names:
                    seen[training.param_label(n, k)] = self.params[n]
        for n in names:
            seen[training.param_label(n)] = self.params[n]
        return seen

    def update(self, lr: float) -> None:
        """The optimizers as torch defines them (SGD's first momentum buffer is the gradient;
        Adam's bias corrections divide the moments)."""
        p = self.p
        if p.optimizer == "adam":
            b1, b2 = 0.9, 0.999
            self.t += 1
            c1, c2 = 1.0 - b1**self.t, 1.0 - b2**self.t
            for n, g in self.grads.items():
                self.m[n] = self.m[n] * b1 + g * (1.0 - b1)
                self.v[n] = self.v[n] * b2 + g * g * (1.0 - b2)
                self.params[n] = self.params[n] - (self.m[n] / c1) * lr / (np.sqrt(self.v[n] / c2) + training.ADAM_EPS)
            return
        for n, g in self.grads.items():
            if p.weight_decay:
                g = g + self.params[n] * p.weight_decay
            if p.optimizer == "momentum":
                g = g if n not in self.buffers else self.buffers[n] * 0.9 + g
                self.buffers[n] = g
            self.params[n] = self.params[n] - g * lr


def _softmax(a: np.ndarray) -> np.ndarray:
    e = np.exp(a - a.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# ---------------------------------------------------------------------------- comparing


def differences(want: dict[str, np.ndarray], got: dict[str, np.ndarray], tol: dict[str, float]) -> list[str]:
    """One line per value that is missing, extra or not close (``atol`` scaled by the value's
    magnitude, so a large loss is not held to a small one's absolute error)."""
    out = []
    for label in sorted(want.keys() | got.keys()):
        if label not in got:
            out.append(f"{label}: not read by the program")
            continue
        if label not in want:
            out.append(f"{label}: read, but no reference value")
            continue
        a, b = np.asarray(got[label], np.float64), np.asarray(want[label], np.float64)
        scale = max(1.0, float(np.max(np.abs(b)))) if b.size else 1.0
        if a.shape != b.shape or not np.allclose(a, b, rtol=tol["rtol"], atol=tol["atol"] * scale, equal_nan=True):
            diff = float(np.max(np.abs(a - b))) if a.shape == b.shape and a.size else float("nan")
            out.append(f"{label}: got {_short(a)}, expected {_short(b)} (largest difference {diff:.3g})")
    return out


def _short(a: np.ndarray) -> str:
    return np.array2string(a, precision=5, threshold=12, max_line_width=10_000).replace("\n", "")


def _runtime() -> tuple[Any, base.TrainingDialect]:
    rt = adapters.current()
    return rt, rt.training_dialect()


# ---------------------------------------------------------------------------- the checks


def check_training(program: Program) -> None:
    """The program's reads on the runtime under test equal the float64 oracle's."""
    from harness.runtime.testing import tolerance

    rt, dialect = _runtime()
    text = training.code(program, dialect).text()
    got = run_code(text)
    want = expected(program)
    wrong = differences(want, got, tolerance(np.float32, minimum=MINIMUM))
    if wrong:
        raise AssertionError(
            f"{rt.name} {rt.version()} and the float64 oracle disagree on {len(wrong)} value(s) of a training "
            "program:\n  " + "\n  ".join(wrong) + f"\n{MARKER}\n{text}"
        )


def _compiles(dialect: base.TrainingDialect, source: Code, repeats: int) -> list[int]:
    """Run ``source``'s steps ``repeats`` times in one namespace (the loop going on from its own
    outputs); the compiles of each pass."""
    namespace: dict[str, Any] = {}
    count = compile(dialect.compile_count, "<compile count>", "eval")
    text = looped(source, dialect, repeats)
    try:
        exec(compile(source.head, "<training program>", "exec"), namespace)  # noqa: S102
        counts = [int(eval(count, namespace))]  # noqa: S307 - the dialect's own expression
        # a pass of the loop ends at a step boundary, as a training loop's iteration does:
        # without one, values no read synced stay pending, and each pass records a longer graph
        body = compile(f"{source.body}\n{dialect.mark_step}", "<training program>", "exec")
        for _ in range(repeats):
            exec(body, namespace)  # noqa: S102
            counts.append(int(eval(count, namespace)))  # noqa: S307
        exec(compile(source.tail, "<training program>", "exec"), namespace)  # noqa: S102
        exec(compile(dialect.mark_step, "<step>", "exec"), namespace)  # noqa: S102 - nothing left pending
    except BaseException as exc:
        exc.add_note(f"{MARKER}\n{text}")
        raise
    finally:
        namespace.clear()
    return [b - a for a, b in zip(counts, counts[1:], strict=False)]


def _graphs_per_pass(program: Program) -> int:
    """At most how many graphs one pass of the steps runs: one per boundary (a read of several
    tensors syncs each alone), and the step boundary that ends the pass."""
    per_read = len(program.parameters())
    count = 1
    for s in program.steps:
        for kind, reads in (
            (s.cut_kind if s.cut else "none", 1), (s.hold, 1), (s.after_backward, per_read), (s.end, per_read),
        ):
            count += reads if kind == "read" else int(kind != "none")
        count += int(s.read_loss)
    return count


def looped(source: Code, dialect: base.TrainingDialect, repeats: int) -> str:
    """The program with its steps in a loop that ends each pass at a step boundary and prints
    the compile count: what ``_compiles`` runs."""
    return Code(source.head, f"{source.body}\n{dialect.mark_step}", source.tail).text(repeats, dialect.compile_count)


def check_step_boundaries(program: Program, moved: tuple[tuple[int, str, str, str], ...]) -> None:
    """An identical program compiles nothing again; the loop going on from its own outputs
    compiles each of its graphs at most once more (its inputs are step outputs now, possibly laid
    out otherwise), then nothing; moving the program's boundaries changes no value.

    The compile counts come first: a program that keeps compiling compiles on every run, so an
    example that fails them is the dearest to run, and a search shrinking one (hundreds of
    examples) then skips the two runs of the value comparison for every candidate that still
    fails. The program as drawn runs before the comparison all the same: its values are read
    from a fresh namespace, after the loop filled the runtime's caches with its graphs."""
    from harness.runtime.testing import tolerance

    rt, dialect = _runtime()
    source = training.code(program, dialect)
    _check_compiles(rt, dialect, program, source)
    first = run_code(source.text())
    other = program.with_boundaries(moved)
    other_text = training.code(other, dialect).text()
    second = run_code(other_text)
    wrong = differences(first, second, tolerance(np.float32, minimum=METAMORPHIC_MINIMUM))
    if wrong:
        raise AssertionError(
            f"on {rt.name} {rt.version()} moving a training program's step boundaries changed "
            f"{len(wrong)} value(s) (got: the program with boundaries moved; expected: as drawn):\n  "
            + "\n  ".join(wrong) + f"\nboundaries moved to {moved}; as drawn:\n{MARKER}\n{source.text()}"
            + f"\n\nwith the boundaries moved:\n{other_text}"
        )


def _check_compiles(rt: Any, dialect: base.TrainingDialect, program: Program, source: Code) -> None:
    """The loop fed its own outputs stops compiling after one more pass; then the same program,
    run again, compiles nothing (a loop that kept compiling fails on its own, without that run)."""
    passes = _compiles(dialect, source, REPEATS)
    graphs = _graphs_per_pass(program)
    if passes[1] > graphs or passes[2] != 0:
        raise AssertionError(
            f"on {rt.name} {rt.version()} a training loop fed its own outputs kept compiling: "
            f"compiles per pass {passes} (a pass runs at most {graphs} graphs: each may compile once "
            f"more for inputs that are now step outputs, then none)\n{MARKER}\n"
            f"{looped(source, dialect, REPEATS)}"
        )
    again = _compiles(dialect, source, 1)
    if again != [0]:
        raise AssertionError(
            f"on {rt.name} {rt.version()} a training program identical to one run before compiled "
            f"{again[0]} program(s) again\n{MARKER}\n{source.text()}"
        )

# ---------------------------------------------------------------------------- the invariants


def _size(example: dict[str, Any]) -> int:
    return int(example["program"].size())


TRAINING_DIFFERENTIAL = Invariant(
    id="training-differential",
    title="a whole training program (model, loss, backward, optimizer steps, scalar schedules, "
    "in-place updates, shared inputs, boundaries anywhere) reads what a float64 numpy oracle computes",
    check=check_training,
    examples=lambda: st.fixed_dictionaries({"program": training.programs()}),
    size=_size,
    max_size=8,
    max_examples=4,  # each program compiles a handful of XLA programs: CI's share is small
    search_examples=150,
    needs=(base.TENSORS, base.STEP, base.TRAINING_PROGRAMS),
    mutants=(
        "24-plan-key-drops-input-numbers",
        "25-backward-unfolds-only-a-read-loss",
        "26-updated-parameter-loses-its-leaf",
    ),
)

STEP_BOUNDARY = Invariant(
    id="step-boundary",
    title="where a training program's step boundaries fall changes no value, an identical program "
    "compiles nothing again, and a loop fed its own outputs stops compiling after one more pass",
    check=check_step_boundaries,
    examples=lambda: st.fixed_dictionaries({"program": training.programs(), "moved": training.boundary_placements()}),
    size=_size,
    max_size=8,
    max_examples=2,
    search_examples=100,
    needs=(base.TENSORS, base.STEP, base.TRAINING_PROGRAMS),
    # a read of a split value that compiles every time keeps a loop that reads one compiling
    catches=("sharded-read-compiles",),
    mutants=("27-python-scalars-folded-into-the-plan",),
)
