# Every command and subcommand of `ipufs`, found by walking the parser
# itself (so a new one is covered without touching this file), prints its
# help and is described in docs/.
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from ipufs import cli

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append(prefix + (name,))
                found += _commands(sub, prefix + (name,))
    return found


COMMANDS = _commands(cli.parser())


def test_the_parser_has_the_commands_users_know() -> None:
    top = {c[0] for c in COMMANDS}
    assert {"mount", "umount", "doctor", "ls", "info", "monitor", "reset", "inject", "trace", "docker"} <= top


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_prints_its_help(command: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main([*command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: ipufs {' '.join(command)}")


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_is_documented(command: tuple[str, ...]) -> None:
    docs = "\n".join(p.read_text() for p in DOCS.glob("*.md"))
    named = re.search(rf"`{re.escape(command[-1])}[` ]", docs) is not None  # a row of a table of them
    assert f"ipufs {' '.join(command)}" in docs or named, f"describe `ipufs {' '.join(command)}` in docs/"


@pytest.mark.parametrize("argv,where", [
    (["inject", "exception", "--couse", "x"], "ipufs inject exception"),
    (["ls", "--bogus"], "ipufs ls"),
])
def test_an_unknown_option_is_blamed_on_its_subcommand(argv: list[str], where: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"{where}: unrecognized arguments: {' '.join(argv[len(where.split()) - 1:])} "
                                f"(see `{where} --help`)"]


def test_root_advice_names_sudo_only_where_it_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    from ipufs import problems

    monkeypatch.setattr(problems.shutil, "which", lambda name: None)
    assert problems.as_root("ipufs mount /m") == "run `ipufs mount /m` as root"
    monkeypatch.setattr(problems.shutil, "which", lambda name: "/usr/bin/sudo" if name == "sudo" else None)
    assert problems.as_root("ipufs mount /m") == "run `ipufs mount /m` as root (`sudo ipufs mount /m`)"
