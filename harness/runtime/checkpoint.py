"""``save`` / ``load``: nested containers of tensors in a checksummed file, never pickle.

File layout: magic ``XHCKPT1\\n``, an 8-byte little-endian header length, a JSON header (the format
number, the tree structure, and dtype/shape/offset/size of each array), the raw array bytes
(little-endian), and a SHA-256 of everything before it. Format 2 records each dtype by name
(``float32``, ``bfloat16``), so the ``ml_dtypes`` types JAX uses round-trip; format 1 recorded
``dtype.str`` (``<f4``, and an unreadable ``<V2`` for bfloat16) and is still read.

The tree holds dicts (str or int keys), lists, tuples, tensors, numpy arrays and plain values. A
list or tuple subclass (a namedtuple, a custom list) is stored as a plain list or tuple: the
subclass is not kept, since rebuilding an arbitrary class is what pickle does. Arrays of Python
objects are refused when saving. Writes go to a temporary file in the same directory and are renamed into
place, so a crash never leaves a half-written checkpoint under the final name.

Saving is a host transfer, and a host transfer is where upstream had two bugs: it read functional
aliases without syncing them (issue #8482: a stale value), and it synced through a path that
donated buffers other pending graphs still needed (issue #8422: "buffer ... is deleted" at the next
step). ``save`` syncs aliases and never donates; the ``aliased-save`` switch re-creates both bugs.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np

from harness.files import atomic_writer
from harness.runtime import executor, faults, functional, seams, step, transfers
from harness.runtime.errors import CheckpointError
from harness.runtime.tensor import Tensor, tensor

MAGIC = b"XHCKPT1\n"
FORMAT = 2
READABLE_FORMATS = (1, 2)
_DIGEST = 32


def _collect(obj: Any, out: list[Tensor]) -> None:
    if isinstance(obj, Tensor):
        out.append(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            _collect(v, out)
    elif isinstance(obj, list | tuple):
        for v in obj:
            _collect(v, out)


def _host_values(tensors: list[Tensor]) -> dict[int, np.ndarray]:
    if faults.active(faults.ALIASED_SAVE):
        step.sync(tensors, wait=True, donate=True)  # upstream: a step-marker-like sync
        return {id(t): _read_unsynced(t) for t in tensors}
    step.sync(tensors, wait=True, donate=False)
    return {id(t): t.numpy() for t in tensors}


def _read_unsynced(t: Tensor) -> np.ndarray:
    """The alias' own last value, without syncing it with writes made through other aliases.

    A tensor that saw the storage's latest version before the sync reads the synced data, as a
    functional wrapper that was itself the last writer does; one that missed a write through
    another alias reads its old IR value (issue #8482).
    """
    storage = t.rt_storage
    if t.rt_version in (storage.version, storage.synced_from):
        return np.array(functional.host_view(transfers.to_host(storage.node.data), t.rt_views))
    node = t.rt_node
    data = node.data if node.data is not None else executor.execute([node], [None], wait=True)[0]
    return np.array(transfers.to_host(data))


def _encode(obj: Any, values: dict[int, np.ndarray], arrays: list[np.ndarray], where: str) -> Any:
    if isinstance(obj, Tensor | np.ndarray):
        # not ascontiguousarray: it turns a 0-d array into shape (1,)
        array = np.asarray(values[id(obj)] if isinstance(obj, Tensor) else obj, order="C")
        if array.dtype.hasobject or array.dtype.fields is not None:
            kind = "Python objects" if array.dtype.hasobject else "structured fields"
            raise TypeError(f"cannot checkpoint an array of {kind} (dtype {array.dtype}) at {where}")
        if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and sys.byteorder == "big"):
            array = array.astype(array.dtype.newbyteorder("<"))
        arrays.append(array)
        return {"t": "tensor" if isinstance(obj, Tensor) else "ndarray", "i": len(arrays) - 1}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not isinstance(k, str | int):
                raise TypeError(f"checkpoint keys must be str or int, got {type(k).__name__} at {where}")
            items.append([k, _encode(v, values, arrays, f"{where}[{k!r}]")])
        return {"t": "dict", "items": items}
    if isinstance(obj, list | tuple):  # subclasses (namedtuple, ...) are stored as the plain type
        kind = "tuple" if isinstance(obj, tuple) else "list"
        return {"t": kind, "items": [_encode(v, values, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]}
    if obj is None or isinstance(obj, bool | int | float | str):
        return {"t": "value", "v": obj}
    if isinstance(obj, np.generic):  # a numpy scalar keeps its dtype: stored as a 0-d array
        encoded = _encode(np.asarray(obj), values, arrays, where)
        return {"t": "scalar", "i": encoded["i"]}
    raise TypeError(f"cannot checkpoint a {type(obj).__name__} at {where}")


def save(obj: Any, path: str | os.PathLike[str]) -> None:
    """Write ``obj`` (tensors, arrays, plain values in dicts/lists/tuples) to ``path`` atomically."""
    tensors: list[Tensor] = []
    _collect(obj, tensors)
    values = _host_values(tensors)
    arrays: list[np.ndarray] = []
    tree = _encode(obj, values, arrays, "root")
    meta, offset = [], 0
    for a in arrays:
        meta.append({"dtype": a.dtype.name, "shape": list(a.shape), "offset": offset, "nbytes": a.nbytes})
        offset += a.nbytes
    header = json.dumps({"format": FORMAT, "tree": tree, "arrays": meta}).encode()
    digest = hashlib.sha256()
    with atomic_writer(path) as f:
        for chunk in (MAGIC, struct.pack("<Q", len(header)), header, *(a.tobytes() for a in arrays)):
            seams.reach("write")
            f.write(chunk)
            digest.update(chunk)
        f.write(digest.digest())


def _resolve_dtype(recorded: str, fmt: int) -> np.dtype:
    """The dtype a header names: numpy's own, or an ``ml_dtypes`` type such as ``bfloat16``."""
    if fmt == 1:  # dtype.str, e.g. "<f4"
        return np.dtype(recorded)
    try:
        dtype = np.dtype(recorded)
    except TypeError:
        try:
            import ml_dtypes

            dtype = np.dtype(getattr(ml_dtypes, recorded))
        except (ImportError, AttributeError):
            import jax.numpy as jnp

            dtype = np.dtype(jnp.dtype(recorded))
    return dtype.newbyteorder("<")


def _decode(node: Any, arrays: list[np.ndarray]) -> Any:
    kind = node["t"]
    if kind == "tensor":
        return tensor(arrays[node["i"]], dtype=arrays[node["i"]].dtype)
    if kind == "ndarray":
        return arrays[node["i"]]
    if kind == "scalar":
        return arrays[node["i"]][()]
    if kind == "dict":
        return {k: _decode(v, arrays) for k, v in node["items"]}
    if kind == "list":
        return [_decode(v, arrays) for v in node["items"]]
    if kind == "tuple":
        return tuple(_decode(v, arrays) for v in node["items"])
    if kind == "value":
        return node["v"]
    raise ValueError(f"unknown node kind {kind!r}")


def load(path: str | os.PathLike[str]) -> Any:
    """Read a checkpoint written by ``save``; any damage raises ``CheckpointError`` naming the path."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"{p}: cannot read checkpoint: {exc.strerror or exc}") from exc
    if not raw.startswith(MAGIC):
        raise CheckpointError(f"{p}: not a checkpoint (bad magic bytes)")
    if len(raw) < len(MAGIC) + 8 + _DIGEST:
        raise CheckpointError(f"{p}: truncated checkpoint ({len(raw)} bytes)")
    body, digest = raw[:-_DIGEST], raw[-_DIGEST:]
    if hashlib.sha256(body).digest() != digest:
        raise CheckpointError(f"{p}: checksum mismatch: the file is corrupt or truncated")
    (hlen,) = struct.unpack_from("<Q", body, len(MAGIC))
    start = len(MAGIC) + 8
    try:
        header = json.loads(body[start : start + hlen])
        fmt = header.get("format") if isinstance(header, dict) else None
        if fmt not in READABLE_FORMATS:
            raise CheckpointError(
                f"{p}: checkpoint format {fmt!r} is not supported (this version reads formats "
                f"{', '.join(map(str, READABLE_FORMATS))}); it was written by another version of the runtime"
            )
        payload = memoryview(body)[start + hlen :]
        arrays = []
        for m in header["arrays"]:
            end = m["offset"] + m["nbytes"]
            if end > len(payload):
                raise ValueError("array data past the end of the file")
            arrays.append(np.frombuffer(payload[m["offset"] : end], dtype=_resolve_dtype(m["dtype"], fmt)).reshape(m["shape"]).copy())
        return _decode(header["tree"], arrays)
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise CheckpointError(f"{p}: malformed checkpoint header: {exc}") from exc
