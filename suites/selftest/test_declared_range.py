"""The JAX range pyproject.toml declares is the range CI tests: its lowest bound runs in the
workflow's releases job, its ceiling sits one minor above the newest JAX release the
expected-outcome table records, and a weekly job runs the suites on the newest JAX past it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version
from ruamel.yaml import YAML

# the project's declared ranges, scripts and pip's answers: the same on every JAX
pytestmark = pytest.mark.jax_independent

ROOT = Path(__file__).parents[2]
PYPROJECT = ROOT / "pyproject.toml"
WORKFLOW = ROOT / ".github/workflows/ci.yml"
EXPECTED = ROOT / "harness/scenarios/expected.toml"
UPSTREAM_JOB = "jax-upstream"
# operators whose version is a release the row was measured on ("<" and ">" only bound a range)
MEASURED_OPERATORS = ("==", "===", ">=", "<=", "~=")


def shown(specifier: SpecifierSet) -> str:
    """A range as written in pyproject.toml: the lower bound first."""
    return ",".join(sorted(map(str, specifier), key=lambda s: not s.startswith(">")))


def project() -> dict:
    return tomllib.loads(PYPROJECT.read_text())["project"]


def dependency(name: str, requirements: list[str], where: str) -> Requirement:
    found = [r for r in map(Requirement, requirements) if canonicalize_name(r.name) == name]
    assert len(found) == 1, f"pyproject.toml: {where} must list {name} once, with its range"
    return found[0]


def bounds(name: str, specifier: SpecifierSet) -> tuple[Version, Version]:
    """The lowest release (>=) and the ceiling (<) of a range, each required exactly once."""
    lower = [Version(s.version) for s in specifier if s.operator == ">="]
    upper = [Version(s.version) for s in specifier if s.operator == "<"]
    assert len(lower) == 1 and len(upper) == 1, (
        f"pyproject.toml: {name}{shown(specifier)} needs one lower bound and one ceiling, as in "
        f"'{name}>=0.10,<0.11': the lower bound runs in CI, the ceiling keeps untested JAX out"
    )
    assert lower[0] < upper[0], f"pyproject.toml: {name}{shown(specifier)} is empty: raise the ceiling"
    return lower[0], upper[0]


def jax_range() -> SpecifierSet:
    return dependency("jax", project()["dependencies"], "[project] dependencies").specifier


def workflow() -> dict:
    return YAML(typ="safe").load(WORKFLOW.read_text())


def test_jax_and_jaxlib_declare_one_bounded_range() -> None:
    dependencies = project()["dependencies"]
    jax = dependency("jax", dependencies, "[project] dependencies").specifier
    jaxlib = dependency("jaxlib", dependencies, "[project] dependencies").specifier
    bounds("jax", jax)
    bounds("jaxlib", jaxlib)
    assert jax == jaxlib, (
        f"pyproject.toml: jax{shown(jax)} and jaxlib{shown(jaxlib)} must declare the same range (JAX releases "
        "them together): change both"
    )


@pytest.mark.parametrize(("extra", "jax_extra"), [("gpu", "cuda12"), ("tpu", "tpu")])
def test_accelerator_extras_carry_the_same_range(extra: str, jax_extra: str) -> None:
    requirement = dependency("jax", project()["optional-dependencies"][extra], f"the {extra} extra")
    assert jax_extra in requirement.extras, f"pyproject.toml: the {extra} extra must install jax[{jax_extra}]"
    assert requirement.specifier == jax_range(), (
        f"pyproject.toml: the {extra} extra's jax[{jax_extra}]{shown(requirement.specifier)} must "
        f"declare the range of the dependencies, jax{shown(jax_range())}: change it with them"
    )


def test_the_releases_job_runs_the_lowest_bound() -> None:
    lower, _ = bounds("jax", jax_range())
    include = workflow()["jobs"]["releases"]["strategy"]["matrix"].get("include") or []
    jax_releases = [str(e["release"]) for e in include if e.get("runtime") == "jax"]
    release = f"{lower.major}.{lower.minor}.{lower.micro}"
    assert any(Version(r) == lower for r in jax_releases), (
        f"the releases job of .github/workflows/ci.yml runs JAX {', '.join(jax_releases) or 'nowhere'}, "
        f"not the lowest bound pyproject.toml declares ({release}): add '- runtime: jax' with "
        f"'release: \"{release}\"' to its matrix include, or move the bound to a release it runs"
    )


def measured_jax_releases() -> list[Version]:
    """The releases the table's jax rows were measured on: each version a row's range names with
    an operator that includes it (``==0.10.2``, ``>=0.10``; ``==0.10.*`` names the series)."""
    rows = tomllib.loads(EXPECTED.read_text()).get("expect", [])
    releases = []
    for row in rows:
        if row.get("runtime") != "jax":
            continue
        for spec in SpecifierSet(row.get("releases", "")):
            if spec.operator in MEASURED_OPERATORS:
                releases.append(Version(spec.version.removesuffix(".*")))
    return releases


def test_the_ceiling_is_one_minor_above_the_newest_recorded_release() -> None:
    _, ceiling = bounds("jax", jax_range())
    releases = measured_jax_releases()
    assert releases, (
        "harness/scenarios/expected.toml has no runtime = \"jax\" row naming a release: record "
        "what `xharness releases jax V` measured before declaring a JAX range"
    )
    newest = max(releases)
    wanted = Version(f"{newest.major}.{newest.minor + 1}")
    assert ceiling <= wanted, (
        f"pyproject.toml lets JAX up to <{ceiling}, but the newest JAX with recorded outcomes is "
        f"{newest} (harness/scenarios/expected.toml): run `xharness releases jax V` on the new "
        f"release, add its jax rows to expected.toml once it is green, then raise the ceiling; "
        f"or lower it back to <{wanted}"
    )
    assert ceiling == wanted, (
        f"harness/scenarios/expected.toml records JAX {newest} but pyproject.toml stops at "
        f"<{ceiling}: raise jax, jaxlib and the gpu/tpu extras to <{wanted}"
    )


def _script(path: str) -> str:
    """A ci/ script's text with every ``source ci/...`` line replaced by that script's text."""
    text = (ROOT / path).read_text()
    return re.sub(r"^source (ci/[\w.-]+\.sh)\s*$", lambda m: _script(m.group(1)), text, flags=re.M)


def upstream_text(job: dict) -> str:
    """The job's run steps, with the text of the ci/ scripts they call."""
    runs = [str(step.get("run", "")) for step in job.get("steps", [])]
    scripts = [
        _script(script)
        for run in runs
        for script in re.findall(r"\bbash (ci/[\w.-]+\.sh)\b", run)
        if (ROOT / script).is_file()
    ]
    return "\n".join(runs + scripts)


def test_a_weekly_job_runs_the_suites_on_the_newest_jax() -> None:
    spec = workflow()
    triggers = spec.get("on", spec.get(True))  # `on` is a boolean to a YAML 1.1 reader
    crons = [entry.get("cron") for entry in (triggers or {}).get("schedule") or []]
    assert crons and all(crons), (
        ".github/workflows/ci.yml must run on a schedule: add `schedule: [{cron: \"0 6 * * 1\"}]` "
        "under `on:`"
    )
    assert "workflow_dispatch" in triggers, "ci.yml: keep `workflow_dispatch` under `on:`"
    job = spec["jobs"].get(UPSTREAM_JOB)
    assert job, f"ci.yml: add the {UPSTREAM_JOB} job (bash ci/upstream.sh)"
    guard = str(job.get("if", ""))
    assert "'schedule'" in guard and "'workflow_dispatch'" in guard and "||" in guard, (
        f"ci.yml: the {UPSTREAM_JOB} job must run only on the schedule and on workflow_dispatch: "
        "`if: github.event_name == 'schedule' || github.event_name == 'workflow_dispatch'`"
    )
    lines = upstream_text(job).splitlines()

    def first(pattern: str) -> int:
        return next((i for i, line in enumerate(lines) if re.search(pattern, line)), -1)

    install = first(r"pip install .*-e '?\.\[test\]")
    upgrade = first(r"pip install (?=.*(?:-U|--upgrade)\b)(?=.*--pre\b).*\bjax jaxlib\s*$")
    suites = first(r"-m pytest suites\b")
    assert install >= 0, f"the {UPSTREAM_JOB} job must install the project: pip install -e '.[test]'"
    assert upgrade > install, (
        f"the {UPSTREAM_JOB} job must upgrade JAX past the declared ceiling after installing the "
        "project: `pip install -U --pre jax jaxlib`, with no version on either"
    )
    assert suites > upgrade, f"the {UPSTREAM_JOB} job must run `python -m pytest suites` after the upgrade"


def job_pythons(job: dict) -> list[str]:
    """The Python versions a workflow job runs on: its container's ``python:3.N-...`` image (each
    value of a matrix axis it names) or its setup-python step's ``python-version``."""
    image = str((job.get("container") or {}).get("image", "") if isinstance(job.get("container"), dict)
                else job.get("container") or "")
    axis = re.fullmatch(r"python:\$\{\{\s*matrix\.(\w+)\s*\}\}-.*", image)
    if axis:
        return [str(v) for v in job["strategy"]["matrix"][axis.group(1)]]
    fixed = re.fullmatch(r"python:(\d+\.\d+)-.*", image)
    if fixed:
        return [fixed.group(1)]
    found = []
    for step in job.get("steps", []):
        if "setup-python" in str(step.get("uses", "")) and "python-version" in step.get("with", {}):
            given = str(step["with"]["python-version"])
            named = re.fullmatch(r"\$\{\{\s*matrix\.(\w+)\s*\}\}", given)  # each value of the axis
            found += [str(v) for v in job["strategy"]["matrix"][named.group(1)]] if named else [given]
    return found


def newest_jax_on_the_index() -> Version:
    from harness.releases.bisect_run import ReleaseListError, index_releases

    try:
        return index_releases("jax")[-1]
    except (ReleaseListError, IndexError) as exc:
        pytest.skip(f"the package index could not be listed here: {exc}")


def test_the_upstream_job_runs_an_interpreter_the_newest_jax_supports() -> None:
    """On Python 3.11 pip can never reach JAX 0.11 or later: the job would test 0.10.2 forever."""
    from harness.releases.interpreters import ask

    (python,) = job_pythons(workflow()["jobs"][UPSTREAM_JOB]) or [None]
    assert python, f"ci.yml: the {UPSTREAM_JOB} job must name its Python (container python:3.N-... or setup-python)"
    newest = newest_jax_on_the_index()
    fit = ask([f"jax=={newest}", f"jaxlib=={newest}"], python)
    assert fit.ok, (
        f"the {UPSTREAM_JOB} job runs Python {python}, which JAX {newest} does not support "
        f"({fit.why_not()}): move its container (or setup-python) to a Python inside {fit.floor()}"
    )


def test_the_test_job_runs_the_floor_and_the_newest_declared_jax() -> None:
    """Every change runs the suites on both JAX lines: the floor of requires-python (whose pip
    resolves the JAX of that Python) and a Python whose pip resolves the newest declared JAX."""
    from harness.releases.interpreters import ask

    pythons = job_pythons(workflow()["jobs"]["lint-and-test"])
    floor = SpecifierSet(project()["requires-python"])
    lowest = min((s.version for s in floor if s.operator == ">="), key=Version)
    assert lowest in pythons, f"ci.yml: lint-and-test must run Python {lowest} (requires-python {floor})"
    newest = max(measured_jax_releases())
    assert jax_range().contains(newest)
    fitting = [p for p in pythons if ask([f"jax=={newest}", f"jaxlib=={newest}"], p).ok]
    assert fitting, (
        f"ci.yml: lint-and-test runs Python {', '.join(pythons)}, and JAX {newest} (the newest "
        "release expected.toml records) supports none of them: add a Python it supports to its matrix"
    )
