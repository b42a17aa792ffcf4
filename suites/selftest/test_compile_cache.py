"""JAX's persistent compilation cache as ``xharness run`` and ``xharness repro`` use it: where it
is, how it is configured or turned off, atomic entries, trimming, and that a corrupt or unusable
cache costs time, never a result."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "matrix"))

from matrix_helpers import run_matrix, write_matrix, write_suite  # noqa: E402

from harness import compile_cache  # noqa: E402
from harness.errors import UsageError  # noqa: E402


@pytest.mark.jax_independent
def test_default_directory_is_under_the_user_cache_dir(tmp_path: Path) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path))
        choice = compile_cache.choose(None, {})
    assert choice.path == tmp_path / "xharness" / "jax"
    assert choice.path.is_dir()


@pytest.mark.jax_independent
def test_option_beats_environment_and_off_turns_it_off(tmp_path: Path) -> None:
    environ = {compile_cache.ENV: str(tmp_path / "from-env")}
    assert compile_cache.choose(str(tmp_path / "opt"), environ).path == (tmp_path / "opt").resolve()
    assert compile_cache.choose(None, environ).path == (tmp_path / "from-env").resolve()
    for off in ("off", "0", "none", "OFF"):
        assert compile_cache.choose(off, environ).path is None
    assert compile_cache.choose(None, {compile_cache.ENV: "off"}).path is None


@pytest.mark.jax_independent
def test_environment_sets_or_removes_the_jax_variables(tmp_path: Path) -> None:
    base = {"JAX_COMPILATION_CACHE_DIR": "/elsewhere", "KEEP": "1"}
    on = compile_cache.CacheChoice(tmp_path, "").environment(base)
    assert on["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path)
    assert on["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"
    assert on[compile_cache.ENV] == str(tmp_path) and on["KEEP"] == "1"
    off = compile_cache.CacheChoice(None, "").environment(base)
    assert "JAX_COMPILATION_CACHE_DIR" not in off and off[compile_cache.ENV] == "off"


@pytest.mark.jax_independent
def test_children_write_bytecode_under_the_cache_not_into_the_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "some_module.py").write_text("VALUE = 1\n")
    base = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(tree)}
    base.pop("PYTHONPYCACHEPREFIX", None)
    env = compile_cache.CacheChoice(tmp_path / "jax", "").environment(base)
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "cache" / "xharness" / "pycache")
    subprocess.run([sys.executable, "-c", "import some_module"], env=env, check=True, cwd=tmp_path)
    assert list(Path(env["PYTHONPYCACHEPREFIX"]).rglob("some_module*.pyc"))
    assert not (tree / "__pycache__").exists()
    # the user's own prefix is kept; with the cache off, the environment is left as it was
    own = compile_cache.CacheChoice(tmp_path / "jax", "").environment({**base, "PYTHONPYCACHEPREFIX": "/mine"})
    assert own["PYTHONPYCACHEPREFIX"] == "/mine" and own["PYTHONDONTWRITEBYTECODE"] == "1"
    off = compile_cache.CacheChoice(None, "").environment(base)
    assert off["PYTHONDONTWRITEBYTECODE"] == "1" and "PYTHONPYCACHEPREFIX" not in off


@pytest.mark.jax_independent
def test_an_explicit_unusable_directory_is_a_usage_error(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("not a directory")
    with pytest.raises(UsageError, match="cannot be used: it exists and is not a directory"):
        compile_cache.choose(str(a_file))
    with pytest.raises(UsageError, match=compile_cache.ENV):
        compile_cache.choose(None, {compile_cache.ENV: str(a_file / "below")})


@pytest.mark.jax_independent
def test_an_unusable_default_directory_turns_the_cache_off_with_a_note(tmp_path: Path) -> None:
    blocker = tmp_path / "cache-home"
    blocker.write_text("a file where the cache home should be")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(blocker))
        choice = compile_cache.choose(None, {})
    assert choice.path is None
    assert "compile cache off" in choice.note and compile_cache.ENV in choice.note


def test_entries_are_written_whole_and_leave_no_temporary_files(tmp_path: Path) -> None:
    assert compile_cache.install()
    from jax._src import compilation_cache as cc

    cache, _ = cc.get_file_cache(str(tmp_path))
    cache.put("k1", b"x" * 1000)
    cache.put("k1", b"y" * 10)  # an existing entry is kept, as JAX's own cache does
    assert (tmp_path / "k1-cache").read_bytes() == b"x" * 1000
    assert cache.get("k1") == b"x" * 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k1-cache"]


@pytest.mark.jax_independent
def test_trim_removes_the_oldest_entries_and_stale_temporaries(tmp_path: Path) -> None:
    for i in range(4):
        entry = tmp_path / f"k{i}-cache"
        entry.write_bytes(b"z" * 400_000)
        os.utime(entry, (1000 + i, 1000 + i))
    stale = tmp_path / ".xharness-tmp-abc"
    stale.write_bytes(b"partial")
    os.utime(stale, (1000, 1000))
    removed = compile_cache.trim(tmp_path, max_mb=1.0)  # 1.6 MB of entries: two must go
    assert removed == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k2-cache", "k3-cache"]


SUITE = {
    "tests/test_compiles.py": '''
        import jax
        import jax.numpy as jnp

        def test_compiles():
            f = jax.jit(lambda x: jnp.sin(x) * 2 + 1)
            assert float(f(jnp.float32(0.0))) == 1.0
    ''',
}


def test_cells_use_the_cache_and_a_corrupt_cache_loses_no_result(tmp_path: Path) -> None:
    write_suite(tmp_path, SUITE)
    write_matrix(tmp_path, """
        [defaults]
        paths = ["tests"]
        [cells.a]
        devices = 1
        [cells.b]
        devices = 2
    """)
    cache = tmp_path / "cache"
    first = run_matrix(tmp_path, "--compile-cache", str(cache), "-j", "2")
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"compile cache {cache.resolve()}" in first.stderr
    entries = list(cache.glob("*-cache"))
    assert entries, "no executable was written to the cache"
    for entry in entries:  # every entry corrupt: JAX warns and compiles, the tests still pass
        entry.write_bytes(b"garbage")
    second = run_matrix(tmp_path, "--compile-cache", str(cache))
    assert second.returncode == 0, second.stdout + second.stderr
    assert [r.classification for r in second.records("a").values()] == ["passed"]
    assert [r.classification for r in second.records("b").values()] == ["passed"]


RANKS_SUITE = {
    "tests/test_ranks.py": '''
        import os
        from pathlib import Path

        import jax
        import numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        def test_every_rank_compiles_a_program_over_both_processes():
            hits = []
            jax.monitoring.register_event_listener(
                lambda event, **_: hits.append(event) if event.endswith("/cache_hits") else None)
            sharding = NamedSharding(Mesh(np.array(jax.devices()), ("d",)), PartitionSpec("d"))
            n = len(jax.devices())
            x = jax.make_array_from_callback((n,), sharding, lambda i: np.arange(n, dtype=np.float32)[i])
            assert float(jax.jit(lambda a: (a * 3).sum())(x)) == 3 * n * (n - 1) / 2
            rank = os.environ["HARNESS_PROCESS_ID"]
            Path(os.environ["HITS_DIR"], f"rank{rank}").write_text(str(len(hits)))
    ''',
}


def test_every_rank_of_a_multi_process_cell_reads_its_programs_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """JAX writes entries from process 0 only, and each rank's key differs: the harness has every
    rank write, so that in the next run no rank compiles again."""
    write_suite(tmp_path, RANKS_SUITE)
    write_matrix(tmp_path, """
        [cells.two]
        processes = 2
        devices = 2
        paths = ["tests"]
    """)
    cache = tmp_path / "cache"
    hits = tmp_path / "hits"
    hits.mkdir()
    monkeypatch.setenv("HITS_DIR", str(hits))
    runs = []
    for _ in range(2):
        result = run_matrix(tmp_path, "--compile-cache", str(cache))
        assert result.returncode == 0, result.stdout + result.stderr
        runs.append({rank: int((hits / f"rank{rank}").read_text()) for rank in (0, 1)})
    assert runs[0] == {0: 0, 1: 0}  # an empty cache: both compile
    assert runs[1][0] >= 1 and runs[1][1] >= 1, runs  # the second run: both read their program


@pytest.mark.jax_independent
def test_run_with_an_unusable_cache_directory_says_so_and_exits_2(tmp_path: Path) -> None:
    write_suite(tmp_path, SUITE)
    write_matrix(tmp_path, '[cells.a]\npaths = ["tests"]\n')
    a_file = tmp_path / "file"
    a_file.write_text("")
    result = run_matrix(tmp_path, "--compile-cache", str(a_file))
    assert result.returncode == 2
    assert "compile cache directory" in result.stderr and "cannot be used" in result.stderr


def test_repro_children_use_the_cache(tmp_path: Path) -> None:
    import subprocess

    cache = tmp_path / "cache"
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())",
         "repro", "unhashable-spec", "--compile-cache", str(cache)],
        capture_output=True, text=True, timeout=300,
        # a cell's runtime options (HARNESS_*) would rightly appear in the replay line: left out
        env={k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "HARNESS_"))},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list(cache.glob("*-cache"))
    assert "replay: xharness repro unhashable-spec --seed 0" in proc.stdout
