# The bash completion script, generated from the parser, completes
# subcommands, options and nested fault names in a real bash.
from __future__ import annotations

import shutil
import subprocess

import pytest

from ipufs import cli, completion


def complete(*words: str) -> list[str]:
    """What bash completes for ``ipufs WORDS...`` (the last word is the one
    being completed)."""
    script = completion.bash(cli.parser())
    line = " ".join(["ipufs", *words])
    probe = (f"{script}\nCOMP_WORDS=(ipufs {' '.join(words)}); COMP_CWORD={len(words)}\n"
             f"COMP_LINE={line!r}\n_ipufs_complete\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n")
    out = subprocess.run(["bash", "--norc", "-c", probe], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return sorted(out.stdout.split())


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_from_the_parser() -> None:
    assert complete("mo") == ["monitor", "mount"]
    assert complete("monitor", "--") == ["--dev", "--help", "--interval", "--json", "--no-card-info", "--timeout", "--watch"]
    assert "icu-timeout" in complete("inject", "") and complete("inject", "icu-timeout", "--f") == ["--for"]
    assert complete("info", "--ipu-") == ["--ipu-arch", "--ipu-count"]


def test_the_command_prints_the_script() -> None:
    out = subprocess.run([*cli_command(), "completion", "bash"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.startswith("# bash completion for ipufs")
    assert "complete -F _ipufs_complete ipufs" in out.stdout


def test_help_is_a_manual() -> None:
    text = subprocess.run([*cli_command(), "--help"], capture_output=True, text=True, timeout=30).stdout
    for section in ("examples:", "exit status:", "files:"):
        assert section in text


def cli_command() -> list[str]:
    import sys

    return [sys.executable, "-m", "ipufs"]
