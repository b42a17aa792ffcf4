"""Checkpoints: round trips, and every kind of damaged file is refused with the path named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest

import harness.runtime as xr

NDEV = len(jax.devices())


def _assert_same(loaded: Any, original: Any, where: str = "root") -> None:
    if isinstance(original, xr.Tensor):
        assert isinstance(loaded, xr.Tensor), where
        assert loaded.dtype == original.dtype and loaded.shape == original.shape, where
        np.testing.assert_array_equal(loaded.numpy(), original.numpy(), err_msg=where)
    elif isinstance(original, np.ndarray):
        assert isinstance(loaded, np.ndarray) and loaded.dtype == original.dtype, where
        np.testing.assert_array_equal(loaded, original, err_msg=where)
    elif isinstance(original, dict):
        assert isinstance(loaded, dict) and list(loaded) == list(original), where
        for k in original:
            _assert_same(loaded[k], original[k], f"{where}[{k!r}]")
    elif isinstance(original, list | tuple):
        assert type(loaded) is type(original) and len(loaded) == len(original), where
        for i, (a, b) in enumerate(zip(loaded, original, strict=True)):
            _assert_same(a, b, f"{where}[{i}]")
    else:
        assert type(loaded) is type(original) and loaded == original, where


def test_round_trip_nested(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    obj = {
        "weights": xr.tensor(rng.standard_normal((3, 4)).astype(np.float32)),
        "steps": xr.tensor(np.arange(5, dtype=np.int32)),
        "scalar": xr.tensor(np.float32(2.5)),
        "pending": xr.tensor(np.ones(4, np.float32)) * 3,
        "host": rng.integers(0, 9, (2, 2)).astype(np.int64),
        "host-0d": np.array(3.5),
        "host-fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        "nested": [1, 2.5, "text", None, True, (xr.tensor(np.zeros((0, 2), np.float32)), {"k": [None]})],
        "empty": {},
        7: "int key",
    }
    path = tmp_path / "sub" / "ckpt.xh"
    xr.save(obj, path)
    assert path.exists() and not [p for p in path.parent.iterdir() if p.name != "ckpt.xh"], "no temp file left"
    _assert_same(xr.load(path), obj)
    assert xr.load(str(path))["nested"][4] is True


@pytest.mark.skipif(NDEV < 8, reason="needs 8 devices")
def test_round_trip_sharded_tensors(tmp_path: Path) -> None:
    mesh = xr.Mesh(np.arange(8), (4, 2), ("data", "model"))
    t = xr.tensor(np.arange(32, dtype=np.float32).reshape(8, 4))
    xr.mark_sharding(t, mesh, ("data", "model"))
    u = t * 2
    xr.mark_sharding(u, mesh, (None, "model"))
    xr.save({"t": t, "u": u}, tmp_path / "s.xh")
    loaded = xr.load(tmp_path / "s.xh")
    np.testing.assert_array_equal(loaded["t"].numpy(), np.arange(32).reshape(8, 4))
    np.testing.assert_array_equal(loaded["u"].numpy(), 2 * np.arange(32).reshape(8, 4))
    assert xr.sharding_spec(t) == ("data", "model"), "saving leaves the layout alone"


def test_save_reads_aliases_after_in_place_writes(tmp_path: Path) -> None:
    t1 = xr.tensor(np.arange(4, dtype=np.float32))
    t2 = t1.detach()
    t2.add_(t2)
    view = t1[1:]
    view.mul_(10.0)
    xr.save({"t1": t1, "t2": t2, "view": view}, tmp_path / "a.xh")
    loaded = xr.load(tmp_path / "a.xh")
    expected = np.array([0, 20, 40, 60], np.float32)
    np.testing.assert_array_equal(loaded["t1"].numpy(), expected)
    np.testing.assert_array_equal(loaded["t2"].numpy(), expected)
    np.testing.assert_array_equal(loaded["view"].numpy(), expected[1:])


def test_unsupported_values_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="set"):
        xr.save({"a": {1, 2}}, tmp_path / "x.xh")
    with pytest.raises(TypeError, match="keys"):
        xr.save({(1, 2): 3}, tmp_path / "x.xh")
    assert not (tmp_path / "x.xh").exists()


@pytest.fixture
def good(tmp_path: Path) -> Path:
    path = tmp_path / "good.xh"
    xr.save({"w": xr.tensor(np.arange(64, dtype=np.float32)), "step": 3}, path)
    return path


def _damage(kind: str, good: Path) -> Path:
    raw = good.read_bytes()
    bad = good.with_name(f"bad-{kind}.xh")
    if kind == "flipped-byte-payload":
        data = bytearray(raw)
        data[len(raw) - 100] ^= 0x01
        bad.write_bytes(bytes(data))
    elif kind == "flipped-byte-header":
        data = bytearray(raw)
        data[20] ^= 0x20
        bad.write_bytes(bytes(data))
    elif kind == "truncated":
        bad.write_bytes(raw[: len(raw) // 2])
    elif kind == "truncated-to-magic":
        bad.write_bytes(raw[:10])
    elif kind == "empty":
        bad.write_bytes(b"")
    elif kind == "random-bytes":
        bad.write_bytes(np.random.default_rng(0).bytes(500))
    elif kind == "json":
        bad.write_text(json.dumps({"format": 1, "tree": {}}))
    elif kind == "appended":
        bad.write_bytes(raw + b"\0")
    elif kind == "directory":
        bad.mkdir()
    elif kind == "missing":
        pass
    return bad


@pytest.mark.parametrize(
    "kind",
    [
        "flipped-byte-payload",
        "flipped-byte-header",
        "truncated",
        "truncated-to-magic",
        "empty",
        "random-bytes",
        "json",
        "appended",
        "directory",
        "missing",
    ],
)
def test_damaged_files_are_refused(kind: str, good: Path) -> None:
    bad = _damage(kind, good)
    with pytest.raises(xr.CheckpointError) as info:
        xr.load(bad)
    assert str(bad) in str(info.value)
    assert isinstance(info.value, xr.RuntimeFault)
    assert xr.load(good)["step"] == 3


# ---------------------------------------------------------------- dtypes, container subclasses, formats


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float16", "bool", "uint8", "complex64"])
def test_dtypes_round_trip_by_name(tmp_path: Path, name: str) -> None:
    dtype = jax.numpy.dtype(name)
    host = np.arange(6).reshape(2, 3).astype(dtype)
    obj = {"tensor": xr.tensor(host, dtype=dtype), "ndarray": host, "0d": host[:1, :1].reshape(())}
    xr.save(obj, tmp_path / "x.xh")
    loaded = xr.load(tmp_path / "x.xh")
    _assert_same(loaded, obj)
    assert loaded["tensor"].dtype == dtype and loaded["ndarray"].dtype == dtype


@pytest.mark.own_process
def test_bfloat16_loads_in_a_process_without_jax(tmp_path: Path) -> None:
    """The name resolves through ml_dtypes when numpy alone does not know it."""
    import subprocess
    import sys

    import ml_dtypes

    path = tmp_path / "bf16.xh"
    xr.save({"a": np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16)}, path)
    header = json.loads(path.read_bytes()[16 : 16 + int.from_bytes(path.read_bytes()[8:16], "little")])
    assert header["format"] == 2 and header["arrays"][0]["dtype"] == "bfloat16"
    from harness.runtime import checkpoint

    assert checkpoint._resolve_dtype("bfloat16", 2) == np.dtype(ml_dtypes.bfloat16)
    code = (
        "import sys; from harness.runtime.checkpoint import _resolve_dtype; import numpy as np; "
        "print(_resolve_dtype('bfloat16', 2).name, 'jax' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.stdout.split()[:1] == ["bfloat16"], out.stderr


def test_big_endian_arrays_round_trip(tmp_path: Path) -> None:
    host = np.arange(4, dtype=">i4")
    xr.save({"a": host}, tmp_path / "x.xh")
    loaded = xr.load(tmp_path / "x.xh")["a"]
    np.testing.assert_array_equal(loaded, host)
    assert loaded.dtype == np.dtype("<i4")


def test_list_and_tuple_subclasses_are_stored_plain(tmp_path: Path) -> None:
    from collections import namedtuple

    class Steps(list):
        pass

    point = namedtuple("point", "x y")
    obj = {"nt": point(xr.tensor(np.ones(2, np.float32)), 3), "custom": Steps([1, (2, 3)])}
    xr.save(obj, tmp_path / "x.xh")
    loaded = xr.load(tmp_path / "x.xh")
    assert type(loaded["nt"]) is tuple and loaded["nt"][1] == 3
    np.testing.assert_array_equal(loaded["nt"][0].numpy(), np.ones(2, np.float32))
    assert type(loaded["custom"]) is list and loaded["custom"] == [1, (2, 3)]


@pytest.mark.parametrize(
    "array",
    [np.array([1, None], dtype=object), np.zeros(2, dtype=[("a", "<i4"), ("b", "<f4")])],
    ids=["object", "structured"],
)
def test_object_and_structured_arrays_are_refused_at_save(tmp_path: Path, array: np.ndarray) -> None:
    with pytest.raises(TypeError, match=r"at root\['model'\]\[1\]\['bad'\]"):
        xr.save({"model": [1, {"bad": array}]}, tmp_path / "x.xh")
    assert not list(tmp_path.iterdir()), "nothing written"


def _write_raw(path: Path, header: dict, payload: bytes) -> None:
    import hashlib
    import struct

    from harness.runtime.checkpoint import MAGIC

    raw = json.dumps(header).encode()
    body = MAGIC + struct.pack("<Q", len(raw)) + raw + payload
    path.write_bytes(body + hashlib.sha256(body).digest())


def test_format_1_files_are_still_read(tmp_path: Path) -> None:
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    header = {
        "format": 1,
        "tree": {"t": "dict", "items": [["w", {"t": "tensor", "i": 0}], ["n", {"t": "ndarray", "i": 1}]]},
        "arrays": [
            {"dtype": "<f4", "shape": [2, 3], "offset": 0, "nbytes": 24},
            {"dtype": "<i8", "shape": [2], "offset": 24, "nbytes": 16},
        ],
    }
    path = tmp_path / "v1.xh"
    _write_raw(path, header, values.tobytes() + np.array([4, 5], "<i8").tobytes())
    loaded = xr.load(path)
    np.testing.assert_array_equal(loaded["w"].numpy(), values)
    np.testing.assert_array_equal(loaded["n"], [4, 5])


@pytest.mark.parametrize("fmt", [3, 0, None, "2"])
def test_unknown_format_is_refused(tmp_path: Path, fmt: object) -> None:
    path = tmp_path / "future.xh"
    _write_raw(path, {"format": fmt, "tree": {"t": "value", "v": 1}, "arrays": []}, b"")
    with pytest.raises(xr.CheckpointError, match=r"format .* is not supported .*reads formats 1, 2") as info:
        xr.load(path)
    assert str(path) in str(info.value)
