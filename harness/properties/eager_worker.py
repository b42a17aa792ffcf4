"""The eager-PyTorch side of the semantics oracle: a worker process in a torch environment.

It runs by path in an interpreter that has torch and numpy (``python eager_worker.py``), never
imports the harness (that environment need not hold it), and speaks JSON lines on stdin and
stdout: a request ``{"code": TEXT}`` is run in a fresh namespace, and the answer is
``{"seen": {label: array or null}, "error": null or {"type", "message", "stage"}, "version"}``.
Arrays cross as ``{"dtype", "shape", "data"}`` with the bytes in base64: data, never pickles.
The code sets ``stage`` before each statement, so an error names the statement that raised.

One process serves many programs: importing torch costs seconds, a program milliseconds.
"""

from __future__ import annotations

import base64
import json
import sys
import traceback
from typing import Any


def _encode(value: Any) -> Any:
    import numpy as np

    if value is None:
        return None
    array = np.array(value, order="C")  # ascontiguousarray would make a 0-d value 1-d
    return {"dtype": array.dtype.str, "shape": list(array.shape),
            "data": base64.b64encode(array.tobytes()).decode("ascii")}


def run(code: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"seen": {}, "stage": -1}
    error = None
    try:
        exec(compile(code, "<eager program>", "exec"), namespace)  # noqa: S102 - the harness' own programs
    except Exception as exc:  # an error is an answer: which statement, which exception
        error = {"type": type(exc).__name__, "message": str(exc).splitlines()[0][:500] if str(exc) else "",
                 "stage": namespace.get("stage", -1), "trace": traceback.format_exc()[-2000:]}
    seen = namespace.get("seen", {})
    return {"seen": {str(k): _encode(v) for k, v in seen.items()}, "error": error}


def main() -> int:
    import torch

    torch.set_num_threads(1)  # programs are tiny; the harness runs its own processes beside this one
    hello = {"ready": True, "torch": torch.__version__, "python": sys.version.split()[0]}
    sys.stdout.write(json.dumps(hello) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        sys.stdout.write(json.dumps(run(request["code"])) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
