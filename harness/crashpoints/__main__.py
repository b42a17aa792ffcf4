"""``python -m harness.crashpoints [CASE ...]``: every writer killed at every kill point, as a table.

For a person who wants to see the numbers behind suites/regression/test_crash_consistency.py:
kill points tried per writer and variant, how many left the previous version, the new one, a mix
of whole files, no file (a first save), or a lost save (refused, damaged, stray), and the time.
Exit status 1 when any kill point lost a save.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from harness.crashpoints.cases import CASES
from harness.crashpoints.explore import BAD, GOOD, Result, explore_case


def _row(result: Result) -> str:
    counts = result.counts()
    outcomes = " ".join(f"{k}={counts[k]}" for k in (*GOOD, *BAD) if counts[k])
    return (f"{result.case:<18} {result.variant:<14} {len(result.points):>6}  "
            f"{outcomes:<44} {result.seconds:6.2f}s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.crashpoints", description=__doc__)
    parser.add_argument("cases", nargs="*", help="case names (default: all): "
                        + ", ".join(c.name for c in CASES))
    args = parser.parse_args(argv)
    chosen = [c for c in CASES if not args.cases or c.name in args.cases]
    if not chosen:
        parser.error(f"no case named {', '.join(args.cases)}")
    started = time.monotonic()
    lost = False
    print(f"{'writer':<18} {'variant':<14} {'points':>6}  {'outcomes':<44} {'time':>7}")
    with tempfile.TemporaryDirectory(prefix="xharness-crashpoints-") as tmp:
        for i, case in enumerate(chosen):
            for result in explore_case(case, Path(tmp) / str(i)):
                print(_row(result), flush=True)
                for point in result.failures():
                    lost = True
                    where = result.final.where(point.kill) if result.final else "?"
                    print(f"  kill point {point.kill} ({where}): {point.outcome}: {point.detail}")
    print(f"total {time.monotonic() - started:.1f}s")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
