"""``xharness report upstream``: the issue a maintainer would file upstream, as Markdown.

A catalog scenario's trigger on a real runtime is already a program in that runtime's own API
(``harness.scenarios.upstream_torch_xla``, ``upstream_jax``). This module makes it a standalone
script: the trigger's function, every function, class and constant of its module that it reaches,
and the environment it sets before the runtime is imported, with nothing of the harness left (an
exception class the harness defines becomes a plain ``AssertionError`` subclass). The script exits
0 where the release behaves, and fails (an exception, or the process' death) where it carries the
bug. The report around it says what was expected and what happened, on which versions and device,
which releases the expected-outcomes table has measured, and the upstream references the scenario
cites.
"""

from __future__ import annotations

import builtins
import inspect
import textwrap
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backends import Backend
from harness.exits import EXIT_OK
from harness.report import properties as prop
from harness.scenarios.reproducer import Reproducer

#: the environment a trigger runs with beyond its own (what ``child_environment`` sets)
TORCH_XLA_ENV = {"PJRT_DEVICE": "CPU"}
#: the versions a report on each runtime names (a release environment holds the harness' own
#: JAX too, which a PyTorch/XLA maintainer does not need to read about)
REPORTED_VERSIONS = {"torch_xla": ("python", "torch", "torch_xla"), "jax": ("python", "jax", "jaxlib")}


@dataclass(frozen=True)
class Script:
    """A standalone reproducer: its source, and the command that runs it."""

    source: str
    command: str

    @property
    def leans_on_the_harness(self) -> list[str]:
        """Imports of the harness the trigger's own functions make: such a script is not
        standalone yet, and the report says so instead of pretending."""
        return [ln.strip() for ln in self.source.splitlines()
                if ln.strip().startswith(("from harness", "import harness"))]


def standalone_script(rep: Reproducer, devices: int = 4) -> Script:
    """The trigger of ``rep`` as a script that imports only its runtime (module docstring)."""
    module = inspect.getmodule(rep.body)
    assert module is not None
    parts = _reached(rep.body, module)
    env = dict(rep.env)
    if rep.runtime == "torch_xla":
        env = {**TORCH_XLA_ENV, "CPU_NUM_DEVICES": str(devices), **env}
    if env:
        parts.modules.add("os")
    lines = [
        "#!/usr/bin/env python3",
        f'"""{rep.scenario} ({rep.variant}): {rep.source}.',
        "",
        "Exits 0 when the release behaves; raises (or dies) where it carries the bug.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        *sorted({f"import {m}" for m in parts.modules}),
        "",
    ]
    if env:
        lines += ["# the runtime reads these when it is imported, so they are set first"]
        lines += [f"os.environ.setdefault({k!r}, {v!r})" for k, v in env.items()]
        lines.append("")
    for name, value in parts.constants.items():
        lines.append(f"{name} = {value!r}")
    if parts.constants:
        lines.append("")
    for source in parts.sources:
        lines += ["", source.rstrip(), ""]
    lines += [
        "",
        'if __name__ == "__main__":',
        f"    {rep.body.__name__}()",
        '    print("the program ran to the end: no bug here")',
        "",
    ]
    flags = " ".join(f"{k}={v}" for k, v in env.items())
    return Script("\n".join(lines), f"{flags} python repro.py".strip())


@dataclass
class _Parts:
    modules: set[str]
    constants: dict[str, Any]
    sources: list[str]


def _reached(body: Callable[..., Any], module: types.ModuleType) -> _Parts:
    """Every global of ``module`` that ``body`` reaches, in the order the script must define
    them (a class before the functions that raise it)."""
    parts = _Parts(set(), {}, [])
    seen: set[str] = set()
    stand_ins: list[str] = []

    def names_of(code: types.CodeType) -> set[str]:
        found = set(code.co_names)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                found |= names_of(const)
        return found

    def visit(obj: Any) -> None:
        code = getattr(obj, "__code__", None)
        names = names_of(code) if code is not None else set()
        if inspect.isclass(obj):
            for member in vars(obj).values():
                if inspect.isfunction(member):
                    names |= names_of(member.__code__)
        for name in sorted(names):
            if name in seen or not hasattr(module, name) or hasattr(builtins, name):
                continue
            seen.add(name)
            value = getattr(module, name)
            if isinstance(value, types.ModuleType):
                parts.modules.add(value.__name__)
            elif inspect.isclass(value) and value.__module__ != module.__name__:
                if value.__module__.startswith("harness"):  # the harness' own: a plain stand-in
                    stand_ins.append(f"class {name}(AssertionError):\n    \"\"\"{_doc(value)}\"\"\"\n")
                else:
                    parts.modules.add(value.__module__)
            elif inspect.isfunction(value) or inspect.isclass(value):
                if inspect.isclass(value):
                    for base in value.__bases__:
                        if base.__name__ not in seen and hasattr(module, base.__name__):
                            visit_base(base)
                visit(value)
                parts.sources.append(textwrap.dedent(inspect.getsource(value)))
            elif isinstance(value, str | int | float | bool | tuple | type(None)):
                parts.constants[name] = value

    def visit_base(base: type) -> None:
        name = base.__name__
        seen.add(name)
        if base.__module__.startswith("harness") and base.__module__ != module.__name__:
            stand_ins.append(f"class {name}(AssertionError):\n    \"\"\"{_doc(base)}\"\"\"\n")

    visit(body)
    parts.sources = [*stand_ins, *parts.sources, textwrap.dedent(inspect.getsource(body))]
    return parts


def _doc(cls: type) -> str:
    return (inspect.getdoc(cls) or cls.__name__).splitlines()[0].replace('"""', "'")


def render(
    *,
    title: str,
    story: str,
    scenario: str,
    runtime: str,
    release: str,
    scripts: list[tuple[Reproducer, Script]],
    outcome: dict[str, Any],
    rows: list[str],
    references: list[str],
    bisect: str = "",
    searched: tuple[str, ...] = (),
) -> str:
    """The Markdown issue (module docstring). ``outcome`` is a run's ``ScenarioRun.to_json()``."""
    variants = {v["variant"]: v for v in outcome.get("variants", [])}
    versions = next((v.get("versions") for v in variants.values() if v.get("versions")), {}) or {}
    backend = next((v.get("backend") for v in variants.values() if v.get("backend")), "") or Backend.CPU
    out = [f"# [{runtime} {release}] {title}", "", story.strip() or title, ""]
    for rep, script in scripts:
        seen = variants.get(rep.variant, {})
        if script.leans_on_the_harness:
            out += [f"> Not standalone yet: the trigger imports {', '.join(script.leans_on_the_harness)}.", ""]
        out += [
            f"## Reproducer: {rep.variant}",
            "",
            f"Follows {rep.source}. Save as `repro.py` and run `{script.command}`:",
            "",
            "```python",
            script.source.rstrip(),
            "```",
            "",
            "**Expected:** the program runs to the end and prints `the program ran to the end: no bug here`.",
            "",
            f"**Actual** on {runtime} {release}: {seen.get('outcome', 'not run')}"
            + (f" ({seen['signature']})" if seen.get("signature") else "")
            + (f": `{seen['error']}`" if seen.get("error") else ""),
            "",
        ]
    shown = REPORTED_VERSIONS.get(runtime, tuple(sorted(versions)))
    out += ["## Versions and device", ""]
    out += [f"- {name}: {versions[name]}" for name in shown if name in versions] or ["- (not reported)"]
    out += [f"- device: {backend}", ""]
    if bisect:
        out += ["## Which release", "", bisect, ""]
    if rows:
        out += ["## Releases measured", "", *[f"- {row}" for row in rows], ""]
    if references:
        out += ["## Related", "", *[f"- {ref}" for ref in references], ""]
    if searched:
        out += ["## Searched upstream", "", *[f"- {text}" for text in searched], ""]
    out += [f"_Written by `xharness report upstream {scenario} --runtime {runtime}`._", ""]
    return "\n".join(out)


def report_command(args: Any) -> int:
    """``xharness report upstream SCENARIO --runtime R [--release V] [--out FILE]``: runs the
    trigger on the release (its own environment, as ``repro`` does), then writes the report."""
    import sys

    from harness.errors import UsageError
    from harness.releases import catalog, envs, interpreters, release_spec
    from harness.scenarios import registry, triggers
    from harness.scenarios import upstream_torch_xla as upstream
    from harness.scenarios.expected import ExpectedTableError
    from harness.scenarios.expected import load as load_table

    try:
        upstream.check_name(args.scenario)
    except registry.UnknownScenario as exc:
        raise UsageError(str(exc)) from None
    plugin = args.runtime not in catalog.UPSTREAM_RUNTIMES
    if plugin and args.runtime not in triggers.runtimes():
        broken = triggers.broken(args.runtime)
        known = ", ".join(dict.fromkeys((*catalog.UPSTREAM_RUNTIMES, *triggers.runtimes())))
        raise UsageError(str(broken) if broken else (
            f"--runtime: {args.runtime!r} has no upstream triggers here (one of {known}); a plugin "
            "registers its runtime's under the xharness.upstream entry-point group"))
    subject = subject_of(args.scenario, args.runtime)
    reproducers = upstream.reproducers(subject.name, args.runtime)
    if not reproducers:
        raise UsageError(f"{subject.name!r} has no {args.runtime} reproducer to report")
    if plugin and args.release:
        raise UsageError(f"--release installs a release of {', '.join(catalog.UPSTREAM_RUNTIMES)}; "
                         f"runtime {args.runtime} is the one this interpreter imports (drop --release)")
    spec = release_spec.parse_argument(args.runtime, args.release) if args.release else None
    if spec is not None:
        interpreters.apply_argument(getattr(args, "python", None))
    try:
        table = plugin_table() if plugin else load_table()
    except ExpectedTableError as exc:
        raise UsageError(str(exc)) from None
    try:
        # a plugin's runtime is the one installed beside the harness: its trigger runs here
        python = sys.executable if plugin else catalog.python_for(args.runtime, spec, progress=catalog.say)
    except envs.ReleaseInstallError as exc:
        print(f"xharness: error: {exc}", file=sys.stderr)
        return catalog.EXIT_INSTALL
    except catalog.RuntimeUnavailable as exc:
        print(f"xharness: error: {exc}", file=sys.stderr)
        return catalog.EXIT_UNAVAILABLE
    run = catalog.run_scenario(subject.name, python, table, runtime=args.runtime)
    release = run.release or (spec.text if spec is not None else "installed")
    rows = [f"{row.releases or 'every release'}: {row.outcome}" + (f" ({row.why})" if row.why else "")
            for row in table.rows if row.runtime == args.runtime and row.scenario == subject.name]
    references = [*subject.references, *dict.fromkeys(r.source for r in reproducers)]
    text = render(
        title=subject.title, story=subject.story, scenario=subject.name,
        runtime=args.runtime, release=release,
        scripts=[(r, standalone_script(r)) for r in reproducers],
        outcome=run.to_json(), rows=rows, references=references,
        bisect=bisect_answer(Path("reports") / "junit", args.runtime, subject.name),
        searched=subject.searched,
    )
    out = Path(args.out) if args.out else Path("reports") / "upstream" / f"{subject.name}-{args.runtime}-{release}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"xharness: wrote {out} ({run.outcome} on {args.runtime} {release}: {run.verdict.verdict})")
    return EXIT_OK


def plugin_table() -> Any:
    """The expected-outcomes table that judges a plugin's runtime: the project's (``[tool.xharness]
    expected``, as ``repro`` judges its scenarios), or an empty one, whose every outcome is
    ``unexpected`` until a row says what to expect."""
    from harness import project
    from harness.scenarios.expected import ExpectedTable, ExpectedTableError
    from harness.scenarios.expected import load as load_table

    try:
        own = project.load()
    except project.ProjectError as exc:
        raise ExpectedTableError(str(exc)) from None
    if own.expected is None:
        return ExpectedTable(Path("(no expected table: [tool.xharness] expected)"), ())
    from harness.scenarios.known_findings import table_names

    return load_table(own.expected, scenarios=table_names())


@dataclass(frozen=True)
class Subject:
    """What a report is about: a catalog scenario, or a known finding no scenario re-creates."""

    name: str
    title: str
    story: str
    references: tuple[str, ...]
    #: what the known findings of this name say was searched upstream, and found
    searched: tuple[str, ...]


def subject_of(name: str, runtime: str) -> Subject:
    """The report's subject: the scenario's title and story, or the finding's summary and who
    found it, with every known finding's upstream search (``KnownFinding.upstream``)."""
    from harness.scenarios import registry
    from harness.scenarios import upstream_torch_xla as upstream
    from harness.scenarios.known_findings import all_findings

    findings = [f for f in all_findings() if f.name == name and f.runtime == runtime]
    searched = tuple(dict.fromkeys(f.upstream for f in findings))
    if name not in upstream.finding_names():
        scenario = registry.get(name)
        return Subject(name, scenario.title, scenario.story or scenario.trigger,
                       tuple(scenario.upstream_links()), searched)
    first = findings[0] if findings else None
    summary = first.summary if first else name
    finders = ", ".join(dict.fromkeys(f"the {f.invariant} invariant" for f in findings if not f.found_in))
    story = (f"{name}: {summary}.\n\nFound by {finders} of xharness, which checks a runtime "
             f"against rules every runtime must keep; the reproducers below are its shrunk "
             f"program, written in {runtime}'s own API.") if first else name
    if first and first.found_in:
        story = (f"{name}: {summary}.\n\nFound by xharness, which checks a runtime against rules every "
                 f"runtime must keep, in its {first.found_in} (judged by its `{first.invariant}` check); "
                 f"the reproducer below re-creates it in {runtime}'s own API on one machine.")
    links = tuple(f.upstream_link for f in findings if f.upstream_link)
    return Subject(name, summary, story, tuple(dict.fromkeys(links)), searched)


def bisect_answer(junit_dir: Path, runtime: str, scenario: str) -> str:
    """What ``xharness bisect`` last answered for the scenario (its JUnit file in ``junit_dir``,
    where the bisect writes by default), with the releases it tried; "" when none ran here."""
    import xml.etree.ElementTree as ET

    from harness.releases.bisect_run import cell_name

    path = junit_dir / f"{cell_name(runtime, scenario)}.xml"
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return ""
    for case in root.iter("testcase"):
        props = {p.get("name"): p.get("value") or "" for p in case.iter("property")}
        if props.get(prop.BISECT_ANSWER):
            tried = props.get(prop.BISECT_TRIED, "").replace(";", ", ").replace("=", ": ")
            searched = props.get(prop.BISECT_RANGE, "").replace(";", ", ")
            return (f"`xharness bisect {scenario} --runtime {runtime}`: {props[prop.BISECT_ANSWER]} "
                    f"(releases searched: {searched}; tried: {tried})")
    return ""
