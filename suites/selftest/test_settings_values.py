"""What each kind of setting accepts and the exact sentence a bad value reads as; the value a replay
line writes back; the runtime options a process' environment sets; and the rows ``xharness
config`` and the documentation's table show."""

from __future__ import annotations

import pytest

from harness import settings
from harness.settings import ENVIRONMENT, OPTIONS_BY_NAME, SettingError

pytestmark = pytest.mark.cell_independent


@pytest.fixture(autouse=True)
def plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No declared variable set: these tests may run inside a cell, which sets several."""
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)


def _refused(name: str, value: str) -> str:
    with pytest.raises(SettingError) as caught:
        ENVIRONMENT[name].parse(value, "the environment")
    return str(caught.value)


@pytest.mark.parametrize(("value", "parsed"), [
    ("1", True), (" Yes ", True), ("TRUE", True), ("on", True),
    ("0", False), ("No", False), (" OFF", False), ("false", False),
])
def test_a_flag_reads_yes_and_no_words_in_any_case(value: str, parsed: bool) -> None:
    assert ENVIRONMENT["HARNESS_PARAM_ALIASING"].parse(value) is parsed


def test_a_flag_that_is_neither_names_the_words_it_accepts() -> None:
    assert _refused("HARNESS_PARAM_ALIASING", "maybe") == (
        "HARNESS_PARAM_ALIASING='maybe' (from the environment): not a yes/no value; "
        "accepted: 1, true, yes, on or 0, false, no, off")


def test_a_choice_reads_any_case_and_a_wrong_one_lists_the_names() -> None:
    assert ENVIRONMENT["HARNESS_CRASH_MODE"].parse(" Signal ") == "signal"
    assert ENVIRONMENT["HARNESS_NETWORK"].parse("NAMESPACES") == "namespaces"
    assert _refused("HARNESS_CRASH_MODE", "abort") == (
        "HARNESS_CRASH_MODE='abort' (from the environment): not one of the names; "
        "accepted: raise or signal (raise, signal)")


def test_a_list_of_names_keeps_each_once_in_order_and_names_every_unknown_one() -> None:
    faults = ENVIRONMENT["HARNESS_FAULTS"]
    assert faults.parse("lost-sharding, aliased-save,lost-sharding,, ") == ("lost-sharding", "aliased-save")
    assert faults.parse(" ") == ()
    message = _refused("HARNESS_FAULTS", "aliased-save,typo,other")
    assert message.startswith("HARNESS_FAULTS='aliased-save,typo,other' (from the environment): "
                              "unknown name(s) 'typo', 'other'; accepted: fault switches")


@pytest.mark.parametrize(("name", "value", "parsed"), [
    ("HARNESS_EXECUTION_DELAY", "0", 0.0),  # a delay may be none
    ("HARNESS_EXECUTION_DELAY", "0.25", 0.25),
    ("HARNESS_WAIT_TIMEOUT", "0.5", 0.5),
    ("HARNESS_WAIT_TIMEOUT", "1e3", 1000.0),
])
def test_a_number_from_its_minimum_or_above_it(name: str, value: str, parsed: float) -> None:
    assert ENVIRONMENT[name].parse(value) == parsed


@pytest.mark.parametrize(("name", "value", "says"), [
    ("HARNESS_WAIT_TIMEOUT", "0", "out of range"),  # a timeout must be above 0
    ("HARNESS_WAIT_TIMEOUT", "inf", "out of range"),
    ("HARNESS_EXECUTION_DELAY", "-0.1", "out of range"),
    ("HARNESS_EXECUTION_DELAY", "nan", "out of range"),
    ("HARNESS_EXECUTION_DELAY", "soon", "not a number"),
])
def test_a_number_out_of_range_says_so(name: str, value: str, says: str) -> None:
    accepted = ENVIRONMENT[name].accepts.describe
    assert _refused(name, value) == f"{name}={value!r} (from the environment): {says}; accepted: {accepted}"


def test_a_replay_line_writes_each_value_normalized() -> None:
    environ = {"HARNESS_FAULTS": "aliased-save, lost-sharding", "HARNESS_PARAM_ALIASING": "off",
               "HARNESS_DISABLE_FUNCTIONALIZATION": "Yes", "HARNESS_WAIT_TIMEOUT": "30.0",
               "HARNESS_EXECUTION_DELAY": "0.5", "HARNESS_CRASH_MODE": "SIGNAL"}
    assert settings.text("HARNESS_FAULTS", environ) == "aliased-save,lost-sharding"
    assert settings.text("HARNESS_PARAM_ALIASING", environ) == "0"
    assert settings.text("HARNESS_DISABLE_FUNCTIONALIZATION", environ) == "1"
    assert settings.text("HARNESS_WAIT_TIMEOUT", environ) == "30"
    assert settings.text("HARNESS_EXECUTION_DELAY", environ) == "0.5"
    assert settings.text("HARNESS_CRASH_MODE", environ) == "signal"
    assert settings.text("HARNESS_NUM_SLICES", environ) == "1"
    assert settings.text("HARNESS_DEVICES", environ) == ""  # no default: nothing to write
    assert settings.text("HARNESS_PARAM_ALIASING", {}) == "1"


def test_the_runtime_options_read_a_process_environment() -> None:
    functionalization = OPTIONS_BY_NAME["functionalization"]
    assert functionalization.default is True
    assert functionalization.read({}) is True
    assert functionalization.read({"HARNESS_DISABLE_FUNCTIONALIZATION": "1"}) is False
    assert OPTIONS_BY_NAME["param_aliasing"].read({"HARNESS_PARAM_ALIASING": "no"}) is False
    assert OPTIONS_BY_NAME["param_aliasing"].default is True
    precision = OPTIONS_BY_NAME["matmul_precision"]
    assert precision.default == "highest"
    assert precision.read({"HARNESS_MATMUL_PRECISION": "TensorFloat32"}) == "high"
    assert precision.read({"HARNESS_MATMUL_PRECISION": "bfloat16"}) == "default"
    assert OPTIONS_BY_NAME["num_slices"].read({"HARNESS_NUM_SLICES": "4"}) == 4
    assert OPTIONS_BY_NAME["wait_timeout"].read({}) == 600.0


def test_every_registered_runtime_may_be_named() -> None:
    assert {"reference", "jax", "torch_xla"} <= set(settings.runtime_names())
    assert ENVIRONMENT["HARNESS_RUNTIME"].parse("JAX") == "jax"


def test_config_rows_name_value_source_and_meaning() -> None:
    found = {"reports": ("out", "/p/pyproject.toml:5")}
    rows = settings.effective({"HARNESS_WAIT_TIMEOUT": " 30", "HARNESS_PROCESS_ID": "3"}, found.get,
                              "ci/matrix.toml (2 cells)")
    by = {(r.where, r.name): r for r in rows}
    assert by[("environment", "HARNESS_WAIT_TIMEOUT")].to_dict() == {
        "name": "HARNESS_WAIT_TIMEOUT", "value": " 30", "source": "environment", "where": "environment",
        "meaning": "how long a runtime wait (a sync, wait_device_ops) may block before it raises",
        "internal": False}
    assert by[("environment", "HARNESS_PROCESS_ID")].to_dict() == {
        "name": "HARNESS_PROCESS_ID", "value": "3", "source": "environment", "where": "environment",
        "meaning": "this rank of a multi-process cell", "internal": True}
    assert by[("environment", "HARNESS_CRASH_MODE")].to_dict() == {
        "name": "HARNESS_CRASH_MODE", "value": "raise", "source": "default", "where": "environment",
        "meaning": "signal turns a placeholder read into a real SIGSEGV, as upstream crashed",
        "internal": False}
    assert by[("[tool.xharness]", "reports")].to_dict() == {
        "name": "reports", "value": "out", "source": "/p/pyproject.toml:5", "where": "[tool.xharness]",
        "meaning": "where run and teeth write", "internal": False}
    assert by[("[tool.xharness]", "executor")].to_dict() == {
        "name": "executor", "value": "local", "source": "default", "where": "[tool.xharness]",
        "meaning": "where run's cells run: this machine's processes, or jobs of a SLURM cluster (--on)",
        "internal": False}
    assert by[("matrix cell", "timeout")].to_dict() == {
        "name": "timeout", "value": "per cell", "source": "ci/matrix.toml (2 cells)", "where": "matrix cell",
        "meaning": "per-test time limit", "internal": False}


def test_config_without_a_project_or_matrix_shows_defaults() -> None:
    rows = settings.effective({}, None)
    by = {(r.where, r.name): r for r in rows}
    assert (by[("[tool.xharness]", "reports")].value, by[("[tool.xharness]", "reports")].source) == (
        "reports", "default")
    assert (by[("matrix cell", "backend")].value, by[("matrix cell", "backend")].source) == (
        "per cell", "the matrix")
    assert by[("environment", "HARNESS_WAIT_TIMEOUT")].value == "600"


def test_config_reads_the_process_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_NUM_SLICES", "2")
    row = next(r for r in settings.effective() if r.name == "HARNESS_NUM_SLICES")
    assert (row.value, row.source) == ("2", "environment")
    assert next(r for r in settings.effective({}) if r.name == "HARNESS_NUM_SLICES").source == "default"


def test_the_documentation_table_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    table = settings.markdown_table()
    lines = table.split("\n")
    assert lines[:2] == ["| setting | where | accepts | default | meaning |", "|---|---|---|---|---|"]
    assert table.endswith("|\n") and not table.endswith("\n\n")
    assert "| `HARNESS_CRASH_MODE` | environment | raise or signal | `raise` | signal turns a placeholder read " \
           "into a real SIGSEGV, as upstream crashed |" in lines
    assert "| `HARNESS_PROCESS_ID` | environment, set by the harness | a whole number, 0 or more | `0` | " \
           "this rank of a multi-process cell |" in lines
    assert "| `HARNESS_CELL` | environment | a cell name |  | the matrix cell this process is (tests marked " \
           "cell(name) read it) |" in lines
    assert "| `reports` | [tool.xharness] | a path | `reports` | where run and teeth write |" in lines
    piped = settings.Setting("HARNESS_X", settings.Text("a|b"), "x|y", "one | two")
    monkeypatch.setattr(settings, "SETTINGS", (piped,))
    monkeypatch.setattr(settings, "KEYS", ())
    assert settings.markdown_table().split("\n")[2] == "| `HARNESS_X` | environment | a\\|b | `x\\|y` | one \\| two |"


@pytest.mark.parametrize(("name", "value", "parsed"), [
    ("HARNESS_NUM_SLICES", "1", 1), ("HARNESS_NUM_SLICES", " 16 ", 16), ("HARNESS_PROCESS_ID", "0", 0),
    ("XHARNESS_CLUSTER_PORT", "1024", 1024),
])
def test_a_whole_number_from_its_minimum(name: str, value: str, parsed: int) -> None:
    assert ENVIRONMENT[name].parse(value) == parsed


@pytest.mark.parametrize(("name", "value", "says"), [
    ("HARNESS_NUM_SLICES", "0", "out of range"), ("HARNESS_PROCESS_ID", "-1", "out of range"),
    ("XHARNESS_CLUSTER_PORT", "80", "out of range"), ("HARNESS_NUM_SLICES", "2.5", "not a whole number"),
])
def test_a_whole_number_below_its_minimum_says_so(name: str, value: str, says: str) -> None:
    accepted = ENVIRONMENT[name].accepts.describe
    assert _refused(name, value) == f"{name}={value!r} (from the environment): {says}; accepted: {accepted}"


def test_reading_a_setting_gives_the_same_value_each_time() -> None:
    environ = {"HARNESS_NUM_SLICES": "3", "HARNESS_CRASH_MODE": "Signal"}
    for _ in range(2):
        assert settings.read("HARNESS_NUM_SLICES", environ) == 3
        assert settings.read("HARNESS_CRASH_MODE", environ) == "signal"
        assert settings.read("HARNESS_FAULTS", environ) == ()  # an empty list, not an unset value
        assert settings.read("HARNESS_DEVICES", environ) is None
        assert settings.read("HARNESS_NUM_SLICES", {"HARNESS_NUM_SLICES": "  "}) == 1  # blank: the default


def test_the_environment_given_is_the_one_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = {"HARNESS_WAIT_TIMEOUT": "soon", "HARNESS_CRASH_MODE": "signal", "XHARNESS_NOTHING": "1"}
    with pytest.raises(SettingError) as caught:
        settings.check_environment(bad, "cell cpu-1's env")
    assert str(caught.value) == ("HARNESS_WAIT_TIMEOUT='soon' (from cell cpu-1's env): not a number; "
                                 "accepted: a number of seconds above 0")
    # only the names asked for
    assert settings.check_environment(bad, names=["HARNESS_CRASH_MODE"]) == [
        f"XHARNESS_NOTHING is set but is no setting of the harness (see xharness config for the "
        f"{len(ENVIRONMENT)} declared ones)"]
    monkeypatch.setenv("HARNESS_WAIT_TIMEOUT", "soon")
    assert settings.check_environment({"HARNESS_WAIT_TIMEOUT": "30", "HARNES_RUNTIM": "jax"}) == [
        "HARNES_RUNTIM is set but is no setting of the harness; did you mean HARNESS_RUNTIME?"]


def test_only_a_close_name_or_the_harness_prefix_is_warned_about() -> None:
    assert settings.near_miss("JAX_CPU_DEVICES") == (
        "JAX_CPU_DEVICES is set but is no setting of the harness; did you mean JAX_NUM_CPU_DEVICES?")
    assert settings.near_miss("JAX_NUM_CPUS") is None  # JAX's own, only loosely alike
    assert settings.near_miss("HARNESS_TIMEOUT") == (
        "HARNESS_TIMEOUT is set but is no setting of the harness; did you mean HARNESS_WAIT_TIMEOUT?")


def test_a_setting_is_read_from_its_text_else_its_default_and_read_again_alike(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What each kind of setting reads from a set, an empty and an unset variable; the second
    read of the same text is the first's value (it is kept, not parsed again)."""
    monkeypatch.setattr(settings, "_PARSED", {})
    for _ in range(2):
        assert settings.read("XHARNESS_MUTATION_JOBS", {"XHARNESS_MUTATION_JOBS": "7"}) == 7
        assert settings.read("XHARNESS_MUTATION_JOBS", {"XHARNESS_MUTATION_JOBS": "  "}) == 2  # its default
        assert settings.read("XHARNESS_MUTATION_JOBS", {}) == 2
        assert settings.read("XHARNESS_MUTATION_HITS", {}) is None  # no default, not a choice: nothing
        assert settings.read("XHARNESS_PYTHON_FROM", {}) == ""  # a choice whose default is its empty name
        assert settings.read("XHARNESS_PYTHON_FROM", {"XHARNESS_PYTHON_FROM": "Debian"}) == "debian"


@pytest.mark.parametrize(("count", "listed"), [(20, True), (21, False)])
def test_a_wrong_name_lists_the_names_where_they_are_few(count: int, listed: bool) -> None:
    names = tuple(f"n{i}" for i in range(count))
    setting = settings.Setting("XHARNESS_EXAMPLE", settings.Names("names of things", values=names), "", "an example")
    with pytest.raises(SettingError) as refused:
        setting.parse("nope")
    said = str(refused.value)
    assert said.endswith("accepted: names of things" + (f" ({', '.join(names)})" if listed else "")), said
