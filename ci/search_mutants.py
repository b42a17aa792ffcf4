"""Does an invariant find each of its mutants by search, within the CI profile's budget, and how
small is the counterexample it shrinks to?

``ci/mutants.py`` asks whether the suites fail on a mutant; this asks the sharper question an
invariant's teeth are measured by: for each mutant the invariant declares (``Invariant.mutants``,
or ``--only``), a scratch copy of the tree gets the patch (``ci/mutants.py``'s snapshot and
apply), and ``invariant.search(max_examples=N)`` runs there in a fresh process: derandomized, N
the invariant's own CI-profile example count unless ``--examples`` says otherwise. Prints one row
per mutant: found or not, the shrunk example's size (the invariant's own measure: statements for
the semantics oracle) and the first line of the failure. Exit 0 when every mutant was found.

    .venv/bin/python ci/search_mutants.py --invariant semantics-oracle [--examples N] [--only NN ...] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mutants as runner  # noqa: E402 - ci/mutants.py, beside this script

ROOT = runner.ROOT
SEARCH = (
    "import json, sys; import harness; assert harness.__file__.startswith(sys.argv[1]), harness.__file__; "
    "from harness.properties import registry; inv = registry.get(sys.argv[2]); n = int(sys.argv[3]) or inv.max_examples; "
    "f = inv.search(max_examples=n); "
    "print(json.dumps({'examples': n, 'found': f is not None, 'size': f.size if f else None, "
    "'error': f.error.splitlines()[0] if f else '', 'second': (f.error.splitlines() + ['', ''])[1].strip() if f else ''}))"
)


def search(mutant: runner.Mutant, invariant: str, examples: int, timeout: float) -> dict[str, Any]:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"xh-search-{mutant.name}-") as tmp:
        copy = Path(tmp) / "tree"
        runner.snapshot(ROOT, copy)
        problem = runner.apply_patch(mutant.path, copy)
        if problem is not None:
            return {"mutant": mutant.name, "found": False, "error": f"stale: {problem}"}
        env = {**os.environ, "PYTHONPATH": str(copy), "JAX_NUM_CPU_DEVICES": "8"}
        proc = subprocess.run([sys.executable, "-c", SEARCH, str(copy), invariant, str(examples)], cwd=copy,
                              env=env, capture_output=True, text=True, timeout=timeout, check=False)
        if proc.returncode:
            return {"mutant": mutant.name, "found": False, "error": f"search failed: {proc.stderr[-800:]}"}
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"mutant": mutant.name, **result, "seconds": round(time.monotonic() - started, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--invariant", required=True)
    parser.add_argument("--examples", type=int, default=0, help="examples per search (default: the invariant's CI count)")
    parser.add_argument("--only", nargs="+", metavar="NAME")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from harness.properties import registry

    declared = registry.get(args.invariant).mutants
    chosen = runner.select(runner.discover_mutants(), args.only or list(declared))
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(lambda m: search(m, args.invariant, args.examples, args.timeout), chosen))
    print("| mutant | found | shrunk size | failure | seconds |\n|---|---|---:|---|---:|")
    for r in rows:
        what = (r.get("second") or r.get("error", ""))[:140].replace("|", "\\|")
        print(f"| `{r['mutant']}` | {'yes' if r['found'] else 'NO'} | {r.get('size') or '-'} | {what} | {r.get('seconds', '-')} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0 if all(r["found"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
