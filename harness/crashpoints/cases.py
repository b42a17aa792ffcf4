"""The files the project writes, each as a crash-point case: the real writer, and the real loader.

One case per writer: checkpoints (``harness.runtime.checkpoint``), a cell's JUnit file
(``write_cell_xml``), the merged report (``merge_files``), the run history (``record_run``, with
the pruning of old entries), a release environment's stamp (its commit point), and a whole
``xharness run`` of a matrix whose cells are all unavailable, which writes a cell's JUnit file,
the merged report, the history entry, the dashboard, the step summary and the timing JSON
(``matrix.json``) in the order a real run does. Every case writes a previous and a new version
that read back differently, from fixed inputs, so a file can be told apart as one or the other.

The loaders are the project's own: a damaged checkpoint raises ``CheckpointError``, a damaged
JUnit file ``ReportInputError``, a damaged history entry ``HistoryEntryError``, a damaged stamp
makes ``find_env`` call the environment incomplete; the dashboard and the summary have no loader
(a browser and GitHub read them), so they are compared as text, less their timestamps.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.crashpoints.explore import Case, Refused
from harness.releases.envs import project_root

_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[+-]\d\d:\d\d|Z)?")


def _comparable(value: Any) -> Any:
    """A loaded checkpoint as plain, comparable values (arrays by dtype, shape and bytes)."""
    import numpy as np

    if isinstance(value, np.ndarray | np.generic):
        array = np.asarray(value)
        return ("array", array.dtype.name, array.shape, array.tobytes())
    if isinstance(value, dict):
        return ("dict", tuple((k, _comparable(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_comparable(v) for v in value))
    return ("value", value)


def _records(version: str, cell: str) -> list[Any]:
    """Test records for a JUnit file: the new version has a rerun failure and one test more."""
    from harness.report.records import ERROR, FAILED, PASSED, SKIPPED, Attempt, TestRecord

    base = f"suites/regression/test_{cell.replace('-', '_')}.py"
    records = [
        TestRecord(f"{base}::test_sum", cell, base, 10, [Attempt(PASSED, 0.25)]),
        TestRecord(f"{base}::test_shard[4]", cell, base, 20, [Attempt(SKIPPED, 0.0, "needs 4 devices")]),
    ]
    if version == "new":
        records[0].attempts.insert(0, Attempt(FAILED, 0.5, "AssertionError: 3 != 4", "trace\n" * 40))
        records.append(TestRecord(f"{base}::test_crash", cell, base, 30, [
            Attempt(ERROR, 1.5, "", "native stack\n" * 200, stderr="Fatal Python error", kind="signal", signal=11)
        ]))
    return records


def _read_junit(path: Path) -> tuple[Any, ...]:
    from harness.report.junit import ReportInputError, read_records

    try:
        return tuple(read_records(path))
    except ReportInputError as exc:
        raise Refused(str(exc)) from exc


def _history(directory: Path, keep_time: bool) -> dict[str, Any]:
    from harness.report.history import HistoryEntryError, entry_files, read_entry

    state: dict[str, Any] = {}
    for path in entry_files(directory):
        try:
            point = read_entry(path)
        except HistoryEntryError as exc:
            raise Refused(str(exc)) from exc
        key = f"{directory.name}/{point.run_id}"
        state[key] = (point.timestamp if keep_time else "", point.counts, point.duration)
    return state


class _Base:
    name = ""
    spec = ""
    readers: tuple[str, ...] = ()
    on_jax = False

    def warm(self) -> None:
        """Import what the writer needs, once, in the server (not in every child)."""

    def inputs(self, directory: Path, version: str) -> None:
        """Files the writer reads; written before counting starts."""

    def may_vanish(self, key: str) -> bool:
        return False

    def loaded(self, directory: Path) -> list[Path]:
        return sorted(p for g in self.readers for p in directory.glob(g) if p.is_file())


class CheckpointCase(_Base):
    """``harness.runtime.checkpoint.save`` over a checkpoint of another shape."""

    name, spec, readers = "checkpoint", "harness.crashpoints.cases:CHECKPOINT", ("*.xh",)
    on_jax = True  # the runtime's own save and load

    def warm(self) -> None:
        import harness.runtime.checkpoint  # noqa: F401 - JAX, once

    def write(self, directory: Path, version: str) -> None:
        import numpy as np

        from harness.runtime.checkpoint import save

        if version == "previous":
            obj: dict[str, Any] = {"step": np.int64(3), "w": np.arange(6, dtype=np.float32), "tag": "previous"}
        else:
            obj = {"step": np.int64(4), "w": np.arange(4096, dtype=np.float32).reshape(64, 64) * 2,
                   "optimizer": [np.ones(300, np.float64), 0.5, None], "tag": "new"}
        save(obj, directory / "model.xh")

    def state(self, directory: Path) -> dict[str, Any]:
        from harness.runtime.checkpoint import load
        from harness.runtime.errors import CheckpointError

        path = directory / "model.xh"
        if not path.exists():
            return {}
        try:
            return {"model.xh": _comparable(load(path))}
        except CheckpointError as exc:
            raise Refused(str(exc)) from exc


class JunitCellCase(_Base):
    """``write_cell_xml``: what the supervisor writes for a cell when it ends."""

    name, spec, readers = "junit cell file", "harness.crashpoints.cases:JUNIT_CELL", ("junit/*.xml",)

    def warm(self) -> None:
        import harness.report.junit  # noqa: F401

    def write(self, directory: Path, version: str) -> None:
        from harness.report.junit import write_cell_xml

        write_cell_xml("cpu-4", _records(version, "cpu-4"), directory / "junit" / "cpu-4.xml")

    def state(self, directory: Path) -> dict[str, Any]:
        path = directory / "junit" / "cpu-4.xml"
        return {"junit/cpu-4.xml": _read_junit(path)} if path.exists() else {}


class MergeCase(_Base):
    """``merge_files`` (``xharness merge``) of a directory of cell files into one report."""

    # ``xharness merge DIR`` reads every ``*.xml`` under DIR: a leftover must not be one
    name, spec, readers = "merged report", "harness.crashpoints.cases:MERGE", ("**/*.xml",)

    def loaded(self, directory: Path) -> list[Path]:
        return [directory / "junit.xml"]

    def warm(self) -> None:
        import harness.report.merge  # noqa: F401

    def inputs(self, directory: Path, version: str) -> None:
        from harness.report.junit import write_cell_xml

        cells = ["cpu-1"] if version == "previous" else ["cpu-1", "cpu-8"]
        for cell in cells:
            write_cell_xml(cell, _records(version, cell), directory / "in" / f"{cell}.xml")

    def write(self, directory: Path, version: str) -> None:
        from harness.report.merge import merge_files

        merge_files([directory / "in"], directory / "junit.xml")

    def state(self, directory: Path) -> dict[str, Any]:
        path = directory / "junit.xml"
        return {"junit.xml": _read_junit(path)} if path.exists() else {}


class HistoryCase(_Base):
    """``record_run``: a new entry, then the oldest dropped past ``max_runs`` (here 1)."""

    name, spec, readers = "history", "harness.crashpoints.cases:HISTORY", ("history/*.json",)

    def warm(self) -> None:
        import harness.report.history  # noqa: F401

    def write(self, directory: Path, version: str) -> None:
        from harness.report.history import record_run

        day = 1 if version == "previous" else 2
        digest = ("a" if version == "previous" else "b") * 64
        record_run(directory / "history", _records(version, "cpu-1"), digest, max_runs=1,
                   now=datetime(2025, 1, day, tzinfo=UTC))

    def state(self, directory: Path) -> dict[str, Any]:
        return _history(directory / "history", keep_time=True)


class StampCase(_Base):
    """A release environment's stamp, the commit point of a build (``ensure_env``)."""

    name, spec, readers = "environment stamp", "harness.crashpoints.cases:STAMP", ()
    release = "0.4.30"

    def loaded(self, directory: Path) -> list[Path]:
        from harness.releases.envs import STAMP

        return [self._path(directory) / STAMP]

    def warm(self) -> None:
        import harness.releases.envs  # noqa: F401

    def _path(self, directory: Path) -> Path:
        from harness.releases.envs import env_name

        return directory / "envs" / env_name("jax", self.release)

    def inputs(self, directory: Path, version: str) -> None:
        """A stand-in interpreter whose ``pip freeze`` answers at once."""
        python = self._path(directory) / "bin" / "python"
        python.parent.mkdir(parents=True, exist_ok=True)
        python.write_text(f"#!/bin/sh\necho jax=={self.release}\necho jaxlib=={self.release}\n")
        python.chmod(0o755)

    def write(self, directory: Path, version: str) -> None:
        from harness.releases.envs import write_stamp

        fingerprint = ("1" if version == "previous" else "2") * 16
        write_stamp(self._path(directory), "jax", self.release, [f"jax=={self.release}"],
                    fingerprint, project_root(), directory / "build.log")

    def state(self, directory: Path) -> dict[str, Any]:
        from harness.releases.envs import STAMP, find_env

        if not (self._path(directory) / STAMP).exists():
            return {}
        env = find_env("jax", self.release, root=directory / "envs")
        if env is None:
            raise Refused(f"{self._path(directory) / STAMP}: unreadable stamp, the environment is rebuilt")
        stamp = dict(env.stamp())
        stamp.pop("created", None)
        return {STAMP: stamp}


class RunCase(_Base):
    """``xharness run`` of cells this machine cannot run: every report file of a run, in order."""

    name, spec = "xharness run", "harness.crashpoints.cases:RUN"
    readers = ("out/junit/*.xml", "out/junit.xml", "out/history/*.json", "out/matrix.json")
    _MATRIX = """root = {root!r}
[defaults]
paths = ["suites/regression"]
[cells.tpu-huge]
backend = "tpu"
devices = 4096
[cells.tpu-huger]
backend = "tpu"
devices = 8192
"""

    def warm(self) -> None:
        from harness.cli import build_parser

        build_parser()  # imports every subcommand's module
        import harness.matrix.probe  # noqa: F401
        import harness.report.api  # noqa: F401
        from harness.adapters import runtime_options

        runtime_options("reference")  # what a cell's options are checked against: its adapter, numpy

    def inputs(self, directory: Path, version: str) -> None:
        (directory / "matrix.toml").write_text(self._MATRIX.format(root=str(project_root())))

    def write(self, directory: Path, version: str) -> None:
        from harness.cli import main

        cells = "tpu-huge" if version == "previous" else "tpu-huge,tpu-huger"
        code = main(["run", "--matrix", str(directory / "matrix.toml"), "--cells", cells, "--out",
                     str(directory / "out"), "--compile-cache", "off", "-j", "1"])
        if code != 0:
            raise RuntimeError(f"xharness run exited with {code}")

    def may_vanish(self, key: str) -> bool:
        return key.startswith("junit/")  # a run deletes the last run's cell files first, by design

    def state(self, directory: Path) -> dict[str, Any]:
        out = directory / "out"
        state: dict[str, Any] = {}
        for path in sorted((out / "junit").glob("*.xml")):
            state[f"junit/{path.name}"] = _read_junit(path)
        if (out / "junit.xml").exists():
            state["junit.xml"] = _read_junit(out / "junit.xml")
        state.update(_history(out / "history", keep_time=False))
        for name in ("index.html", "summary.md"):
            if (out / name).exists():
                state[name] = _TIMESTAMP.sub("<time>", (out / name).read_text(encoding="utf-8"))
        if (out / "matrix.json").exists():
            try:
                timings = json.loads((out / "matrix.json").read_text(encoding="utf-8"))
            except ValueError as exc:
                raise Refused(f"{out / 'matrix.json'}: not JSON ({exc})") from exc
            state["matrix.json"] = [
                {k: v for k, v in cell.items() if k not in ("wall", "test_time", "overhead")}
                for cell in timings["cells"]
            ]
        return state


CHECKPOINT = CheckpointCase()
JUNIT_CELL = JunitCellCase()
MERGE = MergeCase()
HISTORY = HistoryCase()
STAMP = StampCase()
RUN = RunCase()
#: every case, in the order the table lists them
CASES: tuple[Case, ...] = (CHECKPOINT, JUNIT_CELL, MERGE, HISTORY, STAMP, RUN)
