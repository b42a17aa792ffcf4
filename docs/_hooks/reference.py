"""A MkDocs hook (``hooks:`` in ``mkdocs.yml``): the reference tables, generated from the code at
build time, so that nothing generated is kept in ``docs/`` and nothing can drift.

A page asks for a table with a placeholder on a line of its own:

``<!-- xharness:cli -->``         every command of ``xharness`` (``harness.cli.build_parser()``),
                                  each subcommand and sub-subcommand with its usage, its
                                  description and its arguments with their help;
``<!-- xharness:settings -->``    every setting (``harness.settings.markdown_table()``);
``<!-- xharness:exit-codes -->``  every exit code (``harness.exits.markdown_table()``);
``<!-- xharness:findings -->``    every known finding (``harness.report.findings.markdown_table()``).

A placeholder of another name fails the build. ``suites/selftest/test_docs.py`` imports this module
to hold the pages to the code the same way.
"""

from __future__ import annotations

import argparse
import html
import re
from collections.abc import Callable, Iterator
from typing import Any

PLACEHOLDER = re.compile(r"^<!-- xharness:([a-z-]+) -->$", re.MULTILINE)
#: the width usage lines are wrapped at (argparse's own wrapping, made independent of the terminal)
WIDTH = 78


class UnknownPlaceholder(ValueError):
    """A page names a generated table that does not exist."""


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """The parser's subcommands in the order it lists them: name, one-line help, parser."""
    for action in parser._actions:  # noqa: SLF001 - argparse keeps its actions here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}  # noqa: SLF001
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield name, helps.get(name, ""), sub


def _formatter(parser: argparse.ArgumentParser) -> argparse.HelpFormatter:
    return parser.formatter_class(prog=parser.prog, width=WIDTH)


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = _formatter(parser)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)  # noqa: SLF001
    return formatter.format_help().strip()


def _arguments(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """(what to type, help) of every argument but ``-h`` and the subcommands."""
    formatter = _formatter(parser)
    rows = []
    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):  # noqa: SLF001
            continue
        if action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            args = formatter._format_args(action, action.dest.upper()) if action.nargs != 0 else ""  # noqa: SLF001
            spelled = ", ".join(f"{o} {args}".strip() for o in action.option_strings)
        else:
            spelled = formatter._format_args(action, action.dest)  # noqa: SLF001
        help_text = formatter._expand_help(action) if action.help else ""  # noqa: SLF001
        if action.required and action.option_strings:
            help_text = f"(required) {help_text}".strip()
        rows.append((spelled, help_text))
    return rows


def _anchor(path: list[str]) -> str:
    return "-".join(re.sub(r"[^a-z0-9]+", "-", part.lower()).strip("-") for part in path)


def _command(path: list[str], summary: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    out = [f"{'#' * level} {' '.join(path)} {{#{_anchor(path)}}}", ""]
    if summary:
        out += [f"<p><em>{html.escape(summary)}</em></p>", ""]
    if parser.description and parser.description != summary:
        out += [f"<p>{html.escape(parser.description)}</p>", ""]
    out += ["```text", _usage(parser), "```", ""]
    rows = _arguments(parser)
    if rows:
        out.append("<table><thead><tr><th>argument</th><th>meaning</th></tr></thead><tbody>")
        out += [f"<tr><td><code>{html.escape(spelled)}</code></td><td>{html.escape(meaning)}</td></tr>"
                for spelled, meaning in rows]
        out += ["</tbody></table>", ""]
    for name, help_text, sub in _subcommands(parser):
        out += _command([*path, name], help_text, sub, min(level + 1, 6))
    return out


def _walk(path: list[str], parser: argparse.ArgumentParser) -> Iterator[tuple[list[str], str]]:
    for name, help_text, sub in _subcommands(parser):
        yield [*path, name], help_text
        yield from _walk([*path, name], sub)


def cli_reference() -> str:
    """Every command of ``xharness``, from the parser the command itself builds."""
    from harness import cli

    parser = cli.build_parser()
    index = [f"- [`{' '.join(path)}`](#{_anchor(path)}): {html.escape(help_text)}"
             for path, help_text in _walk(["xharness"], parser)]
    body: list[str] = []
    for name, help_text, sub in _subcommands(parser):
        body += _command(["xharness", name], help_text, sub, 2)
    top = ["```text", _usage(parser), "```", ""]
    return "\n".join([*top, *index, "", *body])


def settings_reference() -> str:
    from harness import settings

    return settings.markdown_table()


def findings_reference() -> str:
    from harness.report import findings

    return findings.markdown_table()


def exit_codes_reference() -> str:
    from harness import exits

    return exits.markdown_table() + "\n"


GENERATORS: dict[str, Callable[[], str]] = {
    "cli": cli_reference,
    "settings": settings_reference,
    "exit-codes": exit_codes_reference,
    "findings": findings_reference,
}


def fill(markdown: str) -> str:
    """``markdown`` with every placeholder replaced by its generated table."""
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise UnknownPlaceholder(f"<!-- xharness:{name} -->: no such generated table "
                                     f"(known: {', '.join(GENERATORS)})")
        return GENERATORS[name]().rstrip("\n")

    return PLACEHOLDER.sub(replace, markdown)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    try:
        return fill(markdown)
    except UnknownPlaceholder as exc:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"{page.file.src_path}: {exc}") from exc
