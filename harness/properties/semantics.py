"""Straight-line tensor programs in a dialect both a lazy runtime and eager PyTorch speak.

The semantics oracle (``oracle``) runs each program in the runtime under test and in eager
PyTorch, and every read must agree. The programs are made of what the runtime's semantics are
made of and its other checks model by hand: parameters and the optimizer that updates them in
place, views of views (``detach`` among them, so a view can alias a parameter), in-place updates
through any alias, with a Python scalar or another tensor (a differentiable one makes the
destination differentiable: in-place accumulation), binary operations whose operands were
executed or are pending, in either position, ``backward``, host copies (and writes into the
array handed out), and step boundaries or syncs anywhere.

A ``Program`` is a value (frozen dataclasses): it prints, hashes and shrinks. Tensor references
are indices into the tensors made so far, taken modulo their count when the program is written,
so every program hypothesis shrinks to is still a program. The generator keeps a shadow of each
tensor (its shape, whether it needs grad, whether it was executed) to draw mostly meaningful
statements, and still draws statements eager PyTorch refuses (an in-place write on a parameter,
``backward`` of a value nothing differentiable reaches): then the runtime must refuse them too.

``code(program, dialect)`` writes a program in a dialect (``harness.adapters.base.TrainingDialect``:
the runtime's own, or eager PyTorch's from ``differences``); ``features`` names what a program
exercises, for the reach measurement (``ci/semantics_stats.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import strategies as st

from harness.adapters.base import TrainingDialect
from harness.properties.model import BASE_SHAPES, permutation, view_index, view_kinds, view_shape
from harness.properties.strategies import chain_shape

#: what the reference runtime does not model yet, so the generator leaves it out (each is
#: shown, as the oracle found it, by a strict expected failure in suites/properties/test_oracle.py):
#: torch gives a whole autograd view family (a tensor and its views; ``detach`` starts a new one)
#: a history when a value that needs grad is written in place through one member, while the
#: runtime keeps ``requires_grad`` per alias: the other members stay constants there
NOT_MODELLED = (
    "a value that needs grad written in place through a view or a detached alias, or into a tensor that has one",
    # torch's copy_ (and zero_, fill_) keeps an edge to the history it overwrites, with a zero
    # gradient: a backward still walks it and checks the values saved there; the runtime's
    # overwrite drops that history
    "copy_ over a value that needs grad",
)
SCALARS: tuple[float, ...] = (2.0, -1.0, 0.5, 3.0)
OPTIMIZERS: tuple[str, ...] = ("sgd", "momentum", "adam")
LRS: tuple[float, ...] = (0.5, 0.25, 0.125)  # powers of two: small-integer values stay exact
ADAM_EPS = 1e-3
WEIGHT_DECAYS: tuple[float, ...] = (0.0, 0.25)
#: a layout per base shape, over a mesh of two axes, x of 2 devices and y of the rest (8 devices:
#: (2, 4)); shardings change no value, and eager PyTorch leaves them out (``differences``)
SPECS: dict[tuple[int, ...], tuple[tuple[str | None, ...], ...]] = {
    (4, 6): (("x", None), (None, "x"), ("y", None)),
    (2, 3, 4): (("x", None, None), (None, None, "y"), ("x", None, "y")),
}
INPLACE_SCALAR_OPS: tuple[str, ...] = ("add_", "sub_", "mul_")
INPLACE_TENSOR_OPS: tuple[str, ...] = ("add_", "sub_", "copy_")
BINARY_OPS: tuple[str, ...] = ("sub", "mul", "add")

VALUES_SOURCE = """\
def vals(seed, shape):
    n = int(np.prod(shape))
    return ((np.arange(n) * (2 * seed + 1) + seed) % 7 - 3).astype(np.float32).reshape(shape)
"""


# ------------------------------------------------------------------------------ statements


@dataclass(frozen=True)
class Make:
    seed: int
    shape: int  # index into BASE_SHAPES


@dataclass(frozen=True)
class View:
    src: int
    kind: int  # index into the view kinds that apply to the source's shape


@dataclass(frozen=True)
class Scale:
    dst: int
    op: str  # INPLACE_SCALAR_OPS
    scalar: float


@dataclass(frozen=True)
class Write:
    dst: int
    src: int  # its sum when the shapes differ
    op: str  # INPLACE_TENSOR_OPS


@dataclass(frozen=True)
class Binary:
    a: int
    b: int  # its sum when the shapes differ
    op: str  # BINARY_OPS


@dataclass(frozen=True)
class Affine:
    src: int
    op: str  # BINARY_OPS, with a Python scalar
    scalar: float
    reverse: bool  # the scalar is the first operand (``2.0 - t``)


@dataclass(frozen=True)
class Where:
    src: int  # where it is above 0, ``other`` (a tensor, its sum when the shapes differ, or 0.0), else itself
    other: int  # -1: the scalar 0.0


@dataclass(frozen=True)
class Shard:
    target: int
    spec: int  # index into the specs that fit its shape (``SPECS``)


@dataclass(frozen=True)
class Backward:
    src: int


@dataclass(frozen=True)
class OptStep:
    zero: bool  # zero_grad after the step


@dataclass(frozen=True)
class Read:
    target: int


@dataclass(frozen=True)
class ReadGrad:
    target: int  # a parameter


@dataclass(frozen=True)
class Host:
    target: int  # keep a host copy (``h<k>``)


@dataclass(frozen=True)
class HostRead:
    copy: int


@dataclass(frozen=True)
class HostWrite:
    copy: int  # add 1 to the host copy in place


@dataclass(frozen=True)
class MarkStep:
    pass


@dataclass(frozen=True)
class Sync:
    targets: tuple[int, ...]


Statement = (Make | View | Scale | Write | Binary | Affine | Where | Shard | Backward | OptStep | Read | ReadGrad
             | Host | HostRead | HostWrite | MarkStep | Sync)


@dataclass(frozen=True)
class Program:
    params: tuple[tuple[int, int], ...]  # (seed, shape) of each parameter, made first
    optimizer: str
    lr: float
    statements: tuple[Statement, ...]
    weight_decay: float = 0.0  # SGD's (with or without momentum)

    def __len__(self) -> int:
        return len(self.statements)


# ------------------------------------------------------------------------------ the shadow


@dataclass
class _Shadow:
    """What the writer (and the generator) knows of one tensor."""

    name: str
    shape: tuple[int, ...]
    param: bool = False  # the parameter itself (a leaf that requires grad)
    grad: bool = False  # requires grad (a parameter, a non-detached view of one, a value computed from one)
    executed: bool = False  # its value is device data: a boundary or a read executed it
    base: int = -1  # the tensor it is a view of (-1: its own)
    kinds: tuple[str, ...] = ()  # the view kinds from its base


def _view_expr(t: str, kind: str, shape: tuple[int, ...]) -> str:
    """The view ``kind`` of ``t`` in torch's API (both dialects: tensor methods are torch's).
    Reshapes are ``view``: on XLA every view aliases (``differences``: no-strides)."""
    if kind == "detach":
        return f"{t}.detach()"
    if kind in ("reshape", "flatten"):
        return f"{t}.view{view_shape(kind, shape)}"
    if kind == "transpose":
        return f"{t}.t()"
    if kind.startswith("permute:"):
        return f"{t}.permute{permutation(kind)}"
    index = view_index(kind, shape)
    parts = [f"{s.start if s.start is not None else ''}:{s.stop if s.stop is not None else ''}"
             + (f":{s.step}" if s.step is not None else "") for s in index]
    return f"{t}[{', '.join(parts)}]"


class _Writer:
    """Writes a program in a dialect, statement by statement, keeping the shadow."""

    def __init__(self, program: Program, dialect: TrainingDialect, devices: int = 1) -> None:
        self.p, self.d = program, dialect
        self.devices = devices
        self.marked: set[str] = set()
        self.tensors: list[_Shadow] = []
        self.copies = 0
        self.lines: list[str] = []

    def ref(self, index: int) -> _Shadow:
        return self.tensors[index % len(self.tensors)]

    def read(self, t: str) -> str:
        return self.d.read.format(t=t)

    def add(self, shadow: _Shadow, expr: str) -> None:
        self.lines.append(f"{shadow.name} = {expr}")
        self.tensors.append(shadow)

    def operand(self, a: _Shadow, b: _Shadow) -> str:
        return b.name if b.shape == a.shape else f"{b.name}.sum()"

    def write(self) -> str:
        p, d = self.p, self.d
        head = [d.prelude, VALUES_SOURCE, "seen = {}"]
        for i, (seed, shape) in enumerate(p.params):
            dims = BASE_SHAPES[shape % len(BASE_SHAPES)]
            self.add(_Shadow(f"t{i}", dims, param=True, grad=True, executed=True),
                     d.parameter.format(array=f"vals({seed}, {dims})"))
        params = "[" + ", ".join(t.name for t in self.tensors) + "]"
        if p.optimizer == "adam":
            self.lines.append("opt = " + d.adam.format(params=params, lr=p.lr, eps=ADAM_EPS))
        else:
            momentum = 0.5 if p.optimizer == "momentum" else 0.0
            self.lines.append("opt = " + d.sgd.format(params=params, lr=p.lr, momentum=momentum,
                                                      weight_decay=p.weight_decay))
        if self.devices >= 4 and any(isinstance(x, Shard) for x in p.statements):
            ids, shape = list(range(self.devices)), (2, self.devices // 2)
            self.lines.append("mesh = " + d.mesh.format(ids=ids, shape=shape, names=("x", "y")))
        for i, s in enumerate(p.statements):
            self.lines.append(f"stage = {i}")
            self.statement(i, s)
        return "\n".join(head + self.lines) + "\n"

    def statement(self, i: int, s: Statement) -> None:
        """One statement as code, and its effect on the shadow of the tensors."""
        if isinstance(s, Make | View | Scale | Write | Binary | Affine | Where):
            self.value_statement(s)
        else:
            self.effect_statement(i, s)

    def value_statement(self, s: Statement) -> None:  # noqa: C901 - one branch per statement kind
        """A statement that makes a tensor or changes one's value."""
        d, out = self.d, self.lines
        if isinstance(s, Make):
            dims = BASE_SHAPES[s.shape % len(BASE_SHAPES)]
            self.add(_Shadow(f"t{len(self.tensors)}", dims, executed=True), d.tensor.format(array=f"vals({s.seed}, {dims})"))
        elif isinstance(s, View):
            src = self.ref(s.src)
            kinds = view_kinds(src.shape)
            kind = kinds[s.kind % len(kinds)]
            base = src.base if src.base >= 0 else self.tensors.index(src)
            self.add(_Shadow(f"t{len(self.tensors)}", chain_shape(src.shape, (kind,)), grad=src.grad and kind != "detach",
                             executed=src.executed, base=base, kinds=(*src.kinds, kind)),
                     _view_expr(src.name, kind, src.shape))
        elif isinstance(s, Scale):
            dst = self.ref(s.dst)
            out.append(f"{dst.name}.{s.op}({s.scalar!r})")
            dst.executed = False
        elif isinstance(s, Write):
            dst, src = self.ref(s.dst), self.ref(s.src)
            out.append(f"{dst.name}.{s.op}({self.operand(dst, src)})")
            dst.grad = dst.grad or src.grad
            dst.executed = False
        elif isinstance(s, Binary):
            a, b = self.ref(s.a), self.ref(s.b)
            sym = {"add": "+", "sub": "-", "mul": "*"}[s.op]
            self.add(_Shadow(f"t{len(self.tensors)}", a.shape, grad=a.grad or b.grad),
                     f"{a.name} {sym} {self.operand(a, b)}")
        elif isinstance(s, Affine):
            a = self.ref(s.src)
            sym = {"add": "+", "sub": "-", "mul": "*"}[s.op]
            expr = f"{s.scalar!r} {sym} {a.name}" if s.reverse else f"{a.name} {sym} {s.scalar!r}"
            self.add(_Shadow(f"t{len(self.tensors)}", a.shape, grad=a.grad), expr)
        elif isinstance(s, Where):
            a = self.ref(s.src)
            other = "0.0" if s.other < 0 else self.operand(a, self.ref(s.other))
            grad = a.grad or (s.other >= 0 and self.ref(s.other).grad)
            self.add(_Shadow(f"t{len(self.tensors)}", a.shape, grad=grad),
                     d.where.format(cond=f"{a.name} > 0", a=other, b=a.name))
        else:  # pragma: no cover - the caller sends only these kinds
            raise TypeError(s)

    def effect_statement(self, i: int, s: Statement) -> None:  # noqa: C901 - one branch per statement kind
        """A statement about layouts, gradients, steps, reads and host copies."""
        d, out = self.d, self.lines
        if isinstance(s, Shard):
            t = self.ref(s.target)
            specs = SPECS.get(t.shape, ())
            if self.devices < 4 or t.base >= 0 or not specs or t.name in self.marked:
                # one device, a view, or laid out already (PyTorch/XLA wants clear_sharding first):
                # nothing to lay out
                out.append("pass")
                return
            self.marked.add(t.name)
            out.append(d.mark_sharding.format(t=t.name, mesh="mesh", spec=specs[s.spec % len(specs)]))
        elif isinstance(s, Backward):
            out.append(f"{self.ref(s.src).name}.sum().backward()")
        elif isinstance(s, OptStep):
            out.append("opt.step()")
            if s.zero:
                out.append("opt.zero_grad()")
            for t in self.tensors:  # the parameters, and every alias of them, hold pending updates
                if t.param or (t.base >= 0 and self.tensors[t.base].param):
                    t.executed = False
        elif isinstance(s, Read):
            t = self.ref(s.target)
            out.append(f"seen['{i}: {t.name}'] = np.array({self.read(t.name)})")
            t.executed = True
        elif isinstance(s, ReadGrad):
            t = self.ref(s.target)
            out.append(f"seen['{i}: {t.name}.grad'] = None if {t.name}.grad is None else np.array({self.read(t.name + '.grad')})")
        elif isinstance(s, Host):
            t = self.ref(s.target)
            out.append(f"h{self.copies} = {self.read(t.name)}")
            self.copies += 1
            t.executed = True
        elif isinstance(s, HostRead | HostWrite):
            if not self.copies:
                out.append("pass")
                return
            k = s.copy % self.copies
            out.append(f"seen['{i}: h{k}'] = np.array(h{k})" if isinstance(s, HostRead) else f"h{k} += 1.0")
        elif isinstance(s, MarkStep):
            out.append(d.mark_step)
            for t in self.tensors:
                t.executed = True
        elif isinstance(s, Sync):
            chosen = list(dict.fromkeys(self.ref(r).name for r in s.targets))
            out.append(d.sync.format(tensors="[" + ", ".join(chosen) + "]"))
        else:  # pragma: no cover - every statement kind is a branch above
            raise TypeError(s)


def code(program: Program, dialect: TrainingDialect, devices: int = 1) -> str:
    """``program`` written in ``dialect``: plain code that runs alone and records its reads in
    ``seen`` (and the statement it is at in ``stage``); with 4 devices or more its ``Shard``
    statements lay tensors out over a mesh of them."""
    return _Writer(program, dialect, devices).write()


# ------------------------------------------------------------------------------ features


def features(program: Program) -> list[str]:
    """What each statement exercises, in order: its kind and the facts that make it a different
    case for a lazy runtime (an operand executed or pending, first or second; a view of a
    detached alias; an in-place update of a differentiable value; a parameter used after an
    optimizer step with no boundary between). ``ci/semantics_stats.py`` counts them, their pairs
    and their triples over many drawn programs."""
    out: list[str] = []
    w2 = _Writer(program, _SILENT)
    for i, (_seed, shape) in enumerate(program.params):
        w2.tensors.append(_Shadow(f"t{i}", BASE_SHAPES[shape % len(BASE_SHAPES)], param=True, grad=True, executed=True))
    stepped: set[int] = set()  # parameters updated by an optimizer step since the last boundary
    for i, s in enumerate(program.statements):
        out.append(_feature(w2, s, stepped))
        w2.statement(i, s)
        if isinstance(s, OptStep):
            stepped = {j for j, t in enumerate(w2.tensors) if t.param}
        elif isinstance(s, MarkStep):
            stepped = set()
    return out


def _uses_stepped(w: _Writer, indices: tuple[int, ...], stepped: set[int]) -> bool:
    for r in indices:
        t = w.ref(r)
        j = w.tensors.index(t)
        if j in stepped or (t.base in stepped and "detach" not in t.kinds[:1]):
            return True
    return False


def _feature(w: _Writer, s: Statement, stepped: set[int]) -> str:  # noqa: C901 - one case per kind
    def state(t: _Shadow) -> str:
        return ("executed" if t.executed else "pending") + ("/param" if t.param else "")

    if isinstance(s, Make):
        return "make"
    if isinstance(s, View):
        src = w.ref(s.src)
        kinds = view_kinds(src.shape)
        kind = kinds[s.kind % len(kinds)].split(":")[0]
        detached = "detach" in src.kinds or kind == "detach"
        return f"view:{kind}" + (":of-detached" if detached and kind != "detach" else "") + (":of-param" if src.param or src.grad else "")
    if isinstance(s, Scale | Write):
        dst = w.ref(s.dst)
        extra = ""
        if isinstance(s, Write) and w.ref(s.src).grad:
            extra = ":differentiable"
        alias = ":through-view" if dst.base >= 0 else ""
        return f"inplace:{s.op}{extra}{alias}" + (":param" if dst.param else "")
    if isinstance(s, Binary):
        a, b = w.ref(s.a), w.ref(s.b)
        after = ":stepped-param" if _uses_stepped(w, (s.a, s.b), stepped) else ""
        return f"binary:{s.op}:{state(a)}-{state(b)}{after}"
    if isinstance(s, Affine):
        a = w.ref(s.src)
        return f"affine:{s.op}:" + (f"scalar-{state(a)}" if s.reverse else f"{state(a)}-scalar")
    if isinstance(s, Where):
        return f"where:{state(w.ref(s.src))}" + (":scalar" if s.other < 0 else "")
    if isinstance(s, Shard):
        return "shard"
    if isinstance(s, Backward):
        return "backward" + ("" if w.ref(s.src).grad else ":no-grad")
    if isinstance(s, OptStep):
        return "opt-step"
    if isinstance(s, Read):
        t = w.ref(s.target)
        return "read" + (":stepped-param" if _uses_stepped(w, (s.target,), stepped) else "") + (":grad-value" if t.grad and not t.param else "")
    if isinstance(s, ReadGrad):
        return "read-grad"
    if isinstance(s, Host):
        return "host"
    if isinstance(s, HostRead):
        return "host-read"
    if isinstance(s, HostWrite):
        return "host-write"
    if isinstance(s, MarkStep):
        return "boundary"
    return "sync"


#: what each class of bug the oracle hunts is made of, as runs of consecutive statement features
#: (a regular expression per statement): the generator must draw every one (test_oracle.py), and
#: ``ci/semantics_stats.py`` counts how often it does
COMPOSITIONS: dict[str, tuple[str, ...]] = {
    "a parameter updated by the optimizer, used again before the boundary": (
        r"opt-step", r"binary:\w+:.*:stepped-param|read:stepped-param"),
    "a view of a detached alias, written through": (r"view:\w+:of-detached", r"inplace:\w+.*:through-view"),
    "an executed value as the first operand of a non-commutative op": (r"binary:sub:executed-pending",),
    "an executed value as the second operand of a non-commutative op": (r"binary:sub:pending-executed",),
    "in-place accumulation of a differentiable value, then read": (r"inplace:\w+:differentiable", r"read"),
    "accumulation read, then backward": (r"inplace:\w+:differentiable", r"read", r"backward$"),
    "a host copy, the tensor updated, the copy read": (r"host$", r"inplace:", r"host-read"),
    "a host copy written into, the tensor read": (r"host-write", r"read"),
    "a boundary between a product and its backward": (r"binary:mul:", r"boundary|sync|read", r"backward$"),
}


def holds(features: list[str], pattern: tuple[str, ...]) -> bool:
    """Whether ``features`` (of one program) hold ``pattern`` as consecutive statements."""
    import re

    n = len(pattern)
    return any(all(re.match(p, f) for p, f in zip(pattern, features[i:i + n], strict=True))
               for i in range(len(features) - n + 1))


_SILENT = TrainingDialect(prelude="", options="", tensor="{array}", parameter="{array}", mesh="None",
                          mark_sharding="pass", sgd="sgd", adam="adam", set_lr="", mark_step="pass",
                          sync="pass", read="{t}", compile_count="0")


# ------------------------------------------------------------------------------ the generator

class _Draw:
    """The generator's shadow of the tensors made so far (shape, needs grad, is a parameter or a
    non-detached view of one) and the statements drawn against it."""

    def __init__(self, draw: st.DrawFn, params: tuple[tuple[int, int], ...]) -> None:
        self.draw = draw
        self.n_params = len(params)
        self.shapes = [BASE_SHAPES[shape % len(BASE_SHAPES)] for _, shape in params]
        self.grads = [True] * self.n_params
        self.leafy = [True] * self.n_params
        self.aliases = [False] * self.n_params  # made by a view (``detach`` included)
        self.viewed = [False] * self.n_params  # a view of it was made
        self.copies = 0
        self.out: list[Statement] = []

    def int(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def ref(self) -> int:
        """One of the six newest tensors, the newest most often drawn first."""
        return len(self.shapes) - 1 - self.int(0, min(len(self.shapes), 6) - 1)

    def param(self) -> int:
        return self.int(0, self.n_params - 1)

    def either(self) -> int:
        return self.ref() if self.draw(st.booleans()) else self.param()

    def free(self) -> int:
        """A destination for an in-place update: mostly one eager PyTorch allows (no parameter,
        no view of one), one time in twelve any (then the runtime must refuse it as torch does)."""
        if not self.int(0, 11):
            return self.ref()
        free = [i for i in range(len(self.shapes)) if not self.leafy[i]][-6:]
        if not free:
            return self.make()
        return free[self.int(0, len(free) - 1)]

    def differentiable(self) -> int:
        """A value that needs grad, one time in ten any (eager PyTorch refuses backward of one
        that does not)."""
        chosen = [i for i in range(len(self.shapes)) if self.grads[i]][-6:]
        if chosen and self.int(0, 9):
            return chosen[self.int(0, len(chosen) - 1)]
        return self.ref()

    def add(self, statement: Statement, shape: tuple[int, ...], grad: bool, leafy: bool) -> int:
        self.out.append(statement)
        self.shapes.append(shape)
        self.grads.append(grad)
        self.leafy.append(leafy)
        self.aliases.append(isinstance(statement, View))
        self.viewed.append(False)
        return len(self.shapes) - 1

    # one method per statement kind; each returns the tensor it made or touched
    def make(self) -> int:
        shape = self.int(0, len(BASE_SHAPES) - 1)
        return self.add(Make(self.int(0, 5), shape), BASE_SHAPES[shape], False, False)

    def view(self, src: int | None = None, detach: bool = False) -> int:
        src = self.either() if src is None else src
        kinds = view_kinds(self.shapes[src])
        index = 0 if detach else self.int(0, 8)
        kind = kinds[index % len(kinds)]
        self.viewed[src] = True
        return self.add(View(src, index), chain_shape(self.shapes[src], (kind,)), self.grads[src] and kind != "detach",
                        self.leafy[src] and kind != "detach")

    def scale(self, dst: int | None = None) -> int:
        dst = self.free() if dst is None else dst
        self.out.append(Scale(dst, self.draw(st.sampled_from(INPLACE_SCALAR_OPS)), self.draw(st.sampled_from(SCALARS))))
        return dst

    def write(self, dst: int | None = None, src: int | None = None) -> int:
        dst = self.free() if dst is None else dst
        src = self.either() if src is None else src
        if (self.aliases[dst] or self.viewed[dst]) and self.grads[src] and not self.leafy[dst]:
            # NOT_MODELLED: a value that needs grad written into an aliased tensor; a constant instead
            plain = [i for i in range(len(self.shapes)) if not self.grads[i]]
            src = plain[-1] if plain else self.make()
        op = self.draw(st.sampled_from(INPLACE_TENSOR_OPS))
        if op == "copy_" and self.grads[dst]:  # NOT_MODELLED: copy_ over a history; add_ instead
            op = "add_"
        self.out.append(Write(dst, src, op))
        self.grads[dst] = self.grads[dst] or self.grads[src]
        return dst

    def binary(self, a: int | None = None, b: int | None = None) -> int:
        a = self.either() if a is None else a
        b = self.either() if b is None else b
        return self.add(Binary(a, b, self.draw(st.sampled_from(BINARY_OPS))), self.shapes[a],
                        self.grads[a] or self.grads[b], False)

    def affine(self, src: int | None = None) -> int:
        src = self.either() if src is None else src
        op, scalar = self.draw(st.sampled_from(BINARY_OPS)), self.draw(st.sampled_from(SCALARS))
        return self.add(Affine(src, op, scalar, self.draw(st.booleans())), self.shapes[src], self.grads[src], False)

    def where(self, src: int | None = None) -> int:
        src = self.either() if src is None else src
        other = -1 if self.draw(st.booleans()) else self.either()
        return self.add(Where(src, other), self.shapes[src], self.grads[src] or (other >= 0 and self.grads[other]), False)

    def shard(self, target: int | None = None) -> int:
        target = self.either() if target is None else target
        self.out.append(Shard(target, self.int(0, 2)))
        return target

    def backward(self, src: int | None = None) -> int:
        src = self.differentiable() if src is None else src
        self.out.append(Backward(src))
        return src

    def opt_step(self) -> int:
        self.out.append(OptStep(self.draw(st.booleans())))
        return self.param()

    def read(self, target: int | None = None) -> int:
        target = self.either() if target is None else target
        self.out.append(Read(target))
        return target

    def read_grad(self) -> int:
        target = self.param()
        self.out.append(ReadGrad(target))
        return target

    def host(self, target: int | None = None) -> int:
        target = self.ref() if target is None else target
        self.out.append(Host(target))
        self.copies += 1
        return target

    def host_read(self) -> int:
        self.out.append(HostRead(self.int(0, max(self.copies - 1, 0))))
        return self.ref()

    def host_write(self) -> int:
        self.out.append(HostWrite(self.int(0, max(self.copies - 1, 0))))
        return self.ref()

    def mark_step(self) -> int:
        self.out.append(MarkStep())
        return self.ref()

    def sync(self) -> int:
        self.out.append(Sync(tuple(self.draw(st.lists(st.integers(0, len(self.shapes) - 1), min_size=1, max_size=2)))))
        return self.ref()

    def boundary(self, target: int) -> None:
        """Execute ``target``: a step boundary, a sync of it, or a read."""
        how = self.int(0, 2)
        if how == 0:
            self.mark_step()
        elif how == 1:
            self.out.append(Sync((target,)))
        else:
            self.read(target)

    # ------------------------------------------------------------------ motifs
    # statements that only mean something together, drawn as a block (as ``machine.MOTIFS``):
    # op by op, each comes up in a few programs in a thousand

    def detached_view_write(self) -> None:
        """A detached alias of a parameter or a value (updated first, sometimes), a view of that
        alias, an update through the view, then the original read or used; or the view used in
        a product whose backward must leave the parameter alone."""
        src = self.either()
        if not self.leafy[src] and self.draw(st.booleans()):
            self.scale(src)
        alias = self.view(self.view(src, detach=True))
        if self.draw(st.booleans()):
            self.scale(alias) if self.draw(st.booleans()) else self.write(alias)
            self.binary(src, self.ref()) if self.draw(st.booleans()) else self.read(src)
        else:
            product = self.binary(alias, self.param()) if self.draw(st.booleans()) else self.binary(self.param(), alias)
            self.backward(product)
            self.read_grad()

    def stepped_parameter(self) -> None:
        """backward, an optimizer step, and the parameter used again before any boundary: in
        an operation, read, or copied into another tensor."""
        if self.n_params > 1 and self.draw(st.booleans()):  # a loss over every parameter: all step
            self.backward(self.binary(0, 1))
        else:
            self.backward()
        self.opt_step()
        if self.draw(st.booleans()):
            self.read_grad()
        p = self.param()
        how = self.int(0, 2)
        if how == 0:
            self.binary(p, self.ref()) if self.draw(st.booleans()) else self.binary(self.ref(), p)
        elif how == 1:
            self.read(p)
        else:  # a snapshot of the updated parameter (an EMA's, a logger's), then the step
            snapshot = self.make()
            self.out.append(Write(snapshot, p, "copy_"))
            self.mark_step()
            self.read(snapshot)

    def executed_operand(self) -> None:
        """A value computed, executed (boundary, sync or read), then an operand again, first or
        second, beside a value still pending or a Python scalar, or a ``where`` over it."""
        done = self.binary()
        self.boundary(done)
        how = self.int(0, 2)
        if how == 0:
            pending = self.binary()
            self.binary(done, pending) if self.draw(st.booleans()) else self.binary(pending, done)
        elif how == 1:
            self.affine(done)
        else:
            self.where(done)
        self.read(len(self.shapes) - 1)

    def boundary_before_backward(self) -> None:
        """A product of a parameter, executed (boundary, sync or read), then its backward: the
        gradient goes through a value an earlier graph computed."""
        p = self.param()
        product = self.binary(p, self.ref()) if self.draw(st.booleans()) else self.binary(self.ref(), p)
        self.boundary(product)
        self.backward(product)

    def accumulate(self) -> None:
        """A buffer accumulating differentiable values in place, read after each, then backward."""
        acc = self.make()
        for _ in range(self.int(1, 3)):
            self.write(acc, self.binary(self.param(), self.ref()))
            self.read(acc)
        if self.draw(st.booleans()):
            self.backward(acc)
        else:  # the read accumulator as the second operand of a loss that needs grad itself
            self.backward(self.binary(self.binary(self.param(), self.ref()), acc))
        self.read_grad()

    def host_copy(self) -> None:
        """A host copy, an update of the tensor (and of the copy), both read."""
        t = self.free()
        self.host(t)
        self.scale(t)
        self.host_read()
        if self.draw(st.booleans()):
            self.host_write()
            self.read(t)

    def laid_out(self) -> None:
        """Values laid out over the mesh and replicated ones in one computation, executed."""
        a, b = self.make(), self.make()
        split = self.affine(self.make())
        self.shard(split)
        self.mark_step()
        self.read(self.binary(self.binary(a, b), split))


#: statement kinds and their weights: updates in place, binary operations, views and reads come up
#: most (what the classes of bugs this hunts are made of)
WEIGHTS: dict[str, int] = {
    "make": 1, "view": 3, "scale": 2, "write": 3, "binary": 3, "affine": 1, "where": 1, "shard": 1, "backward": 2,
    "opt_step": 2, "read": 3, "read_grad": 1, "host": 1, "host_read": 1, "host_write": 1, "mark_step": 2, "sync": 1,
}
KINDS: tuple[str, ...] = tuple(WEIGHTS)
MOTIFS: tuple[str, ...] = (
    "detached_view_write", "stepped_parameter", "executed_operand", "boundary_before_backward", "accumulate",
    "host_copy", "laid_out",
)


@st.composite
def _statements(draw: st.DrawFn, params: tuple[tuple[int, int], ...], max_statements: int,
                motifs: bool) -> tuple[Statement, ...]:
    """Statements drawn one at a time against the shadow, a motif half of the time (when
    ``motifs``); cut at ``max_statements``."""
    g = _Draw(draw, params)
    kinds = [k for k in KINDS for _ in range(WEIGHTS[k])]
    blocks = draw(st.integers(1, max_statements))
    for _ in range(blocks):
        if len(g.out) >= max_statements:
            break
        if motifs and g.draw(st.booleans()):
            getattr(g, draw(st.sampled_from(MOTIFS)))()
        else:
            getattr(g, draw(st.sampled_from(kinds)))()
    return tuple(g.out[:max_statements])


def programs(max_statements: int = 12, max_params: int = 2, motifs: bool = True) -> st.SearchStrategy[Program]:
    """Programs of one or more parameters, an optimizer over them, and up to ``max_statements``
    statements (the oracle reads every tensor and gradient after them, ``with_final_reads``);
    ``motifs=False`` draws statement by statement only (what ``ci/semantics_stats.py`` compares
    the motifs against)."""
    params = st.lists(st.tuples(st.integers(0, 5), st.integers(0, len(BASE_SHAPES) - 1)), min_size=1,
                      max_size=max_params).map(tuple)
    return params.flatmap(lambda ps: st.builds(
        Program, st.just(ps), st.sampled_from(OPTIMIZERS), st.sampled_from(LRS), _statements(ps, max_statements, motifs),
        st.sampled_from(WEIGHT_DECAYS),
    ))


def final_reads(program: Program) -> tuple[Statement, ...]:
    """A read of every tensor and every parameter's gradient: the program's last word."""
    w = _Writer(program, _SILENT)
    w.write()
    reads: list[Statement] = [Read(i) for i in range(len(w.tensors))]
    reads += [ReadGrad(i) for i, t in enumerate(w.tensors) if t.param]
    reads += [HostRead(k) for k in range(w.copies)]
    return tuple(reads)


def with_final_reads(program: Program) -> Program:
    return replace(program, statements=program.statements + final_reads(program))



