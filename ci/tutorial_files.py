"""The files a tutorial page has its reader write, written into a directory.

Every fenced block with a title (```` ```python title="myrt/runtime.py" ````, Material's syntax)
is a file the reader creates, whole; the page's other blocks (console sessions, output) are not.
``ci/example.sh`` builds the tutorial's repository from the page alone with this, installs it and
runs the commands the page runs, so the tutorial cannot drift from what works; the selftests read
the same blocks through :func:`files`.

Usage: python ci/tutorial_files.py PAGE.md DIRECTORY
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

#: a titled fence: its language, its title (the file's path) and its body, up to the closing fence
_BLOCK = re.compile(r'^```(?P<lang>[\w+-]+)[^\n]*?\btitle="(?P<path>[^"]+)"[^\n]*\n(?P<body>.*?)^```\s*$',
                    re.MULTILINE | re.DOTALL)


def files(markdown: str) -> dict[str, str]:
    """Each titled block's path and text; a path given twice is an error (the page would say
    two things about one file)."""
    found: dict[str, str] = {}
    for match in _BLOCK.finditer(markdown):
        path = match.group("path")
        if path in found:
            raise ValueError(f"the page writes {path} twice")
        if Path(path).is_absolute() or ".." in Path(path).parts:
            raise ValueError(f"the page writes {path}, outside the reader's repository")
        found[path] = match.group("body")
    return found


def write(markdown: str, root: Path) -> list[Path]:
    """Write the page's files under ``root``; returns them in the page's order."""
    written = []
    for path, text in files(markdown).items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        written.append(target)
    return written


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    for made in write(Path(sys.argv[1]).read_text(encoding="utf-8"), Path(sys.argv[2])):
        print(f"ci/tutorial_files.py: wrote {made}")
