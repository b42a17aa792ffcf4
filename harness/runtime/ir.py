"""The lazy IR: nodes recorded op by op, and their lowering to one JAX function.

A ``Node`` is an operation on other nodes, or a leaf holding device data. Nothing runs when a node
is made; ``executor`` walks the pending graph at a step boundary, turns it into a *program* (a
tuple of plain, hashable entries: op, attributes, operand positions) and lowers that program with
``evaluate``. Because the program is hashable and holds no arrays, it is also the compile-cache
key: a steady training loop records the same program every step and compiles once.

Gradients are a node too (``vjp``): its lowering re-evaluates the loss sub-program as a function of
the differentiated leaves and calls ``jax.vjp`` on it, so derivatives come from JAX, not from
hand-written rules, and forward and backward compile into one XLA executable.

Numerics are declared, not left to the backend: ``lower`` traces under the runtime's
``matmul_precision``, so every product of the program (forward, kernels, gradients) asks XLA for
the same precision on every card.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from harness.runtime import config
from harness.runtime.errors import ShardingLostError

IN = "in"  # program entry of a device-data input
SCALAR = "scalar"  # program entry of a Python scalar: element of a packed scalar input


class Aval(tuple):
    """(shape, dtype) of a node's value; a tuple so it is cheap, hashable and comparable."""

    __slots__ = ()

    def __new__(cls, shape: tuple[int, ...], dtype: np.dtype) -> Aval:
        return tuple.__new__(cls, (tuple(shape), np.dtype(dtype)))

    @property
    def shape(self) -> tuple[int, ...]:
        return self[0]

    @property
    def dtype(self) -> np.dtype:
        return self[1]


def aval_text(aval: Any) -> str:
    """A (shape, dtype) pair as messages spell it: ``float32[16,64]``."""
    shape, dtype = aval
    return f"{np.dtype(dtype).name}[{','.join(map(str, shape))}]"


class Node:
    """One recorded operation (or a device-data leaf when ``data`` is set)."""

    __slots__ = (
        "op", "operands", "attrs", "aval", "aid", "data", "leaf", "origin", "folded", "sharding", "kind", "__weakref__",
    )

    def __init__(
        self,
        op: str,
        operands: tuple[Node, ...] = (),
        attrs: tuple = (),
        aval: Any = None,
        data: Any = None,
        sharding: Any = None,
    ) -> None:
        self.op = op
        self.operands = operands
        self.attrs = attrs
        self.data = data
        self.leaf = None  # weak reference to the Storage of the requires-grad leaf this node is the value of
        self.origin: Node | None = None  # for device data computed from requires-grad leaves: the IR that computed it
        # whether an ``origin`` hides at or below this node: autograd unfolds only those subgraphs
        self.sharding = sharding  # only custom_sharding nodes carry one
        if aval is None:
            # the signature is looked up by the operands' aval ids (small ints: an aval's own
            # hash walks its shape and dtype); one or two operands, the common ops, without a loop
            n = len(operands)
            if n == 2:
                a, b = operands
                self.folded = a.folded or b.folded
                key: tuple = (op, attrs, a.aid, b.aid)
            elif n == 1:
                a = operands[0]
                self.folded = a.folded
                key = (op, attrs, a.aid)
            else:
                self.folded = any([o.folded for o in operands])
                key = (op, attrs, *[o.aid for o in operands])
            signature = _signatures.get(key)
            if signature is None:
                signature = _signature(op, attrs, operands)
                if len(_signatures) >= 65536:  # programs of ever new shapes: bounded, as before
                    _signatures.clear()
                _signatures[key] = signature
            self.aval, self.aid, self.kind = signature
        else:
            self.folded = any([o.folded for o in operands])
            self.aval = aval
            self.aid = aval_id(aval)
            self.kind = None  # (op, attrs, operand count) interned: the graph walk fills it in

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aval[0]

    @property
    def dtype(self) -> np.dtype:
        return self.aval[1]

    def __repr__(self) -> str:
        return f"Node({self.op}, shape={self.aval[0] if isinstance(self.aval, Aval) else '...'})"


_new_node = object.__new__


def data_node(data: Any) -> Node:
    """The leaf holding device data ``data``: one per materialized value of every step, so its
    fields are set directly. The aval's id comes with a step's outputs (their plan found it
    once); other data finds it here once."""
    node = _new_node(Node)
    node.op = "data"
    node.operands = node.attrs = ()
    node.aval = aval = data.aval
    aid = data.aid
    if aid is None:
        aid = data.aid = aval_id(aval)
    node.aid = aid
    node.data = data
    node.leaf = node.origin = node.sharding = node.kind = None
    node.folded = False
    return node


# Small ints standing for hashable values (an op with its attributes, an input's aval and
# layout): the graph walk builds a step's structure key from them, a tuple of ints that is cheap
# to hash and to compare, where the program itself would be hashed and compared in full.
_interned: dict[Any, int] = {}
# (op, attrs, operand aval ids...) -> (aval, its id, interned (op, attrs, operand count)): one
# lookup per recorded op
_signatures: dict[tuple, tuple[Any, int, int]] = {}


def intern(value: Any) -> int:
    found = _interned.get(value)
    if found is None:
        found = _interned.setdefault(value, len(_interned))
    return found


def aval_id(aval: Any) -> int:
    """An aval's interned id: what a node's signature is keyed by."""
    return intern(("aval", aval))


def kind_id(op: str, attrs: tuple, operand_count: int) -> int:
    """A node's interned kind, the graph walk's entry for it: its op, attributes and operand count
    (the count tells the walk how many operand positions follow in a structure key)."""
    return intern((op, attrs, operand_count))


def _signature(op: str, attrs: tuple, operands: tuple[Node, ...]) -> tuple[Any, int, int]:
    aval = infer_aval(op, attrs, tuple([o.aval for o in operands]))
    return aval, aval_id(aval), kind_id(op, attrs, len(operands))


def const(value: Any, dtype: np.dtype) -> Node:
    """A scalar constant. Its attribute is the value's bytes, so the compile-cache key tells
    ``0.0`` from ``-0.0`` and a NaN equals itself (Python's ``==`` does neither)."""
    return Node("const", attrs=(np.asarray(value, dtype=dtype).tobytes(), np.dtype(dtype)))


class Scalar(Node):
    """A Python scalar operand. Its value is no part of the program: at a sync the values of all
    the graph's scalars of one dtype travel together as one device-data input (a vector), and the
    node's program entry reads its element (see ``graphs.build_graph``). A value that changes
    every step (a learning-rate schedule, a loss scale, a step counter) therefore changes an
    input, not the program, as PyTorch/XLA's scalars are device data rather than constants."""

    __slots__ = ("value",)

    def __init__(self, value: Any, dtype: np.dtype) -> None:  # every field set here: one per operand
        signature = _scalar_signatures.get(dtype)
        if signature is None:
            signature = _scalar_signature(dtype)
        self.aval, self.aid, self.kind, self.attrs = signature
        self.op = SCALAR
        self.operands = ()
        self.data = self.leaf = self.origin = self.sharding = None
        self.folded = False
        self.value = value


_scalar_signatures: dict[np.dtype, tuple[Aval, int, int, tuple]] = {}


def _scalar_signature(dtype: np.dtype) -> tuple[Aval, int, int, tuple]:
    found = _scalar_signatures.get(dtype)
    if found is None:
        attrs = (np.dtype(dtype),)
        aval = Aval((), dtype)
        found = _scalar_signatures[dtype] = (aval, aval_id(aval), kind_id(SCALAR, attrs, 0), attrs)
    return found


# --------------------------------------------------------------------------- index attributes


def encode_index(index: Any) -> tuple:
    """A hashable form of a basic index (ints, slices, None, Ellipsis); slices are not hashable
    before Python 3.12."""
    if not isinstance(index, tuple):
        index = (index,)
    out: list[Any] = []
    for item in index:
        if isinstance(item, slice):
            out.append(("slice", item.start, item.stop, item.step))
        elif item is None or item is Ellipsis:
            out.append(item)
        elif isinstance(item, int | np.integer):
            out.append(int(item))
        else:
            raise TypeError(f"only basic indexing (ints, slices, None, ...) is supported, got {item!r}")
    return tuple(out)


def decode_index(attrs: tuple) -> tuple:
    return tuple(slice(i[1], i[2], i[3]) if isinstance(i, tuple) else i for i in attrs)


# --------------------------------------------------------------------------- op implementations


def _gelu(_: tuple, x: jax.Array) -> jax.Array:
    return jax.nn.gelu(x, approximate=False)


def _with_sharding(attrs: tuple, x: jax.Array) -> jax.Array:
    return x  # the annotation is applied in ``evaluate``, where the node's sharding is known


OPS: dict[str, Callable[..., Any]] = {
    "const": lambda a: jnp.asarray(np.frombuffer(a[0], dtype=a[1]).reshape(())),
    "identity": lambda a, x: x,
    "stop_gradient": lambda a, x: jax.lax.stop_gradient(x),
    "neg": lambda a, x: -x,
    "exp": lambda a, x: jnp.exp(x),
    "log": lambda a, x: jnp.log(x),
    "sqrt": lambda a, x: jnp.sqrt(x),
    "rsqrt": lambda a, x: jax.lax.rsqrt(x),
    "tanh": lambda a, x: jnp.tanh(x),
    "abs": lambda a, x: jnp.abs(x),
    "sigmoid": lambda a, x: jax.nn.sigmoid(x),
    "relu": lambda a, x: jax.nn.relu(x),
    "gelu": _gelu,
    "softmax": lambda a, x: jax.nn.softmax(x, axis=a[0]),
    "log_softmax": lambda a, x: jax.nn.log_softmax(x, axis=a[0]),
    "add": lambda a, x, y: x + y,
    "sub": lambda a, x, y: x - y,
    "mul": lambda a, x, y: x * y,
    "div": lambda a, x, y: x / y,
    "pow": lambda a, x, y: x**y,
    "maximum": lambda a, x, y: jnp.maximum(x, y),
    "minimum": lambda a, x, y: jnp.minimum(x, y),
    "matmul": lambda a, x, y: jnp.matmul(x, y),
    "eq": lambda a, x, y: x == y,
    "ne": lambda a, x, y: x != y,
    "lt": lambda a, x, y: x < y,
    "le": lambda a, x, y: x <= y,
    "gt": lambda a, x, y: x > y,
    "ge": lambda a, x, y: x >= y,
    "where": lambda a, c, x, y: jnp.where(c, x, y),
    "sum": lambda a, x: jnp.sum(x, axis=a[0], keepdims=a[1]),
    "mean": lambda a, x: jnp.mean(x, axis=a[0], keepdims=a[1]),
    "max": lambda a, x: jnp.max(x, axis=a[0], keepdims=a[1]),
    "min": lambda a, x: jnp.min(x, axis=a[0], keepdims=a[1]),
    "argmax": lambda a, x: jnp.argmax(x, axis=a[0]),
    "reshape": lambda a, x: jnp.reshape(x, a[0]),
    "transpose": lambda a, x: jnp.transpose(x, a[0]),
    "broadcast_to": lambda a, x: jnp.broadcast_to(x, a[0]),
    "astype": lambda a, x: x.astype(a[0]),
    "getitem": lambda a, x: x[decode_index(a)],
    "update_slice": lambda a, base, value: base.at[decode_index(a)].set(value),
    "concat": lambda a, *xs: jnp.concatenate(xs, axis=a[0]),
    "custom_sharding": _with_sharding,
    "kernel": lambda a, *xs: a[0](*xs),
    "tuple_get": lambda a, t: t[a[0]],
}


@functools.lru_cache(maxsize=8192)
def infer_aval(op: str, attrs: tuple, operand_avals: tuple) -> Any:
    """Shape and dtype of an op's result, from JAX's own abstract evaluation (cached per signature)."""
    if op == "vjp":  # gradients w.r.t. each differentiated leaf: their own avals
        return tuple(operand_avals[1:])
    if op == "tuple_get":
        return operand_avals[0][attrs[0]]
    if op in ("identity", "stop_gradient", "custom_sharding"):
        return operand_avals[0]
    impl = OPS[op]
    structs = [jax.ShapeDtypeStruct(a[0], a[1]) for a in operand_avals]
    out = jax.eval_shape(lambda *xs: impl(attrs, *xs), *structs)
    return Aval(out.shape, out.dtype)


# --------------------------------------------------------------------------- lowering

Program = tuple[tuple, ...]


def evaluate(
    program: Program,
    args: Sequence[Any],
    upto: int | None = None,
    overrides: dict[int, Any] | None = None,
    known: Sequence[Any] | None = None,
) -> list[Any]:
    """Evaluate program entries ``0..upto`` inside a JAX trace.

    ``overrides`` replace entries (the differentiated leaves of a ``vjp``); ``known`` holds values
    already traced, reused for every entry that does not depend on an override.
    """
    end = len(program) if upto is None else upto + 1
    depends = _dependents(program, overrides, end) if known is not None and overrides else None
    vals: list[Any] = []
    for pos in range(end):
        if overrides is not None and pos in overrides:
            vals.append(overrides[pos])
            continue
        if depends is not None and known is not None and pos not in depends:
            vals.append(known[pos])
            continue
        entry = program[pos]
        op = entry[0]
        if op == IN:
            vals.append(args[entry[1]])
            continue
        if op == SCALAR:  # (SCALAR, (input index, element), (), None)
            vals.append(args[entry[1][0]][entry[1][1]])
            continue
        _, attrs, operands, sharding = entry
        if op == "vjp":
            vals.append(_lower_vjp(program, args, operands, vals))
        elif op == "custom_sharding":
            if sharding is None:
                raise ShardingLostError(
                    f"Sharding instruction must have a sharding attribute: custom-sharding node at "
                    f"program position {pos} (shape {vals[operands[0]].shape}) has none"
                )
            vals.append(jax.lax.with_sharding_constraint(vals[operands[0]], sharding))
        else:
            vals.append(OPS[op](attrs, *(vals[i] for i in operands)))
    return vals


def _dependents(program: Program, overrides: dict[int, Any], end: int) -> set[int]:
    dep = set(overrides)
    for pos in range(end):
        entry = program[pos]
        if entry[0] != IN and entry[0] != SCALAR and any(i in dep for i in entry[2]):
            dep.add(pos)
    return dep


def _lower_vjp(program: Program, args: Sequence[Any], operands: tuple[int, ...], vals: list[Any]) -> tuple:
    loss_pos, wrt = operands[0], operands[1:]
    wrt_vals = [vals[i] for i in wrt]

    def loss_of(*leaves: Any) -> Any:
        overrides = dict(zip(wrt, leaves, strict=True))
        return evaluate(program, args, upto=loss_pos, overrides=overrides, known=vals)[loss_pos]

    loss, pullback = jax.vjp(loss_of, *wrt_vals)
    return tuple(pullback(jnp.ones_like(loss)))


def lower(program: Program, roots: tuple[int, ...], precision: str | None = None) -> Callable[..., tuple]:
    """The JAX function computing the program's root entries from its inputs.

    Every matrix product it traces asks XLA for ``precision`` (``config.MATMUL_PRECISIONS``; the
    runtime's ``matmul_precision`` option when None, read now, not when the function is traced).
    The trace runs under ``jax.default_matmul_precision``, so the setting reaches every dot the
    program emits, not only ``matmul`` nodes: the einsums of a traced kernel and the transposed
    products ``jax.vjp`` derives for gradients carry it too, and JAX's own process-wide default
    (``JAX_DEFAULT_MATMUL_PRECISION``) cannot change the runtime's numbers. A kernel that names a
    precision of its own keeps it.
    """
    if precision is None:
        precision = config.options.matmul_precision

    def fn(*args: Any) -> tuple:
        with jax.default_matmul_precision(precision):
            vals = evaluate(program, args, upto=max(roots))
        return tuple(vals[r] for r in roots)

    return fn


def substitute(node: Node, done: dict[int, Node]) -> Node:
    """``node``'s graph with every node whose id is in ``done`` replaced by what it maps to (a
    computed value's data node); unchanged parts are shared, ``node`` itself if nothing changed."""
    memo: dict[int, Node] = {}

    def visit(n: Node) -> Node:
        if n.data is not None or not n.operands:
            return done.get(id(n), n)
        hit = done.get(id(n)) or memo.get(id(n))
        if hit is not None:
            return hit
        operands = tuple(visit(o) for o in n.operands)
        new = n
        if any(a is not b for a, b in zip(operands, n.operands, strict=True)):
            new = Node(n.op, operands, n.attrs, sharding=n.sharding)
            new.leaf = n.leaf
        memo[id(n)] = new
        return new

    return visit(node)
