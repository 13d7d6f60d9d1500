# The mount settings are declared once (ipufs/daemon/settings.py): the file's
# types, the shipped file and its copy in docs/systemd.md, and the options of
# `ipufs mount` and `ipufs run` all come from that table.
from __future__ import annotations

import argparse
import os
from dataclasses import fields
from pathlib import Path

import pytest

from ipufs import cli
from ipufs.daemon import config as cfg
from ipufs.daemon.config import DaemonConfig
from ipufs.daemon.settings import BY_KEY, RUN_SETTINGS, SETTINGS, Form, example_file, given, mount_argv
from ipufs.fuse.transports import SWITCHES
from scripts import generate_settings


def _subparser(name: str) -> argparse.ArgumentParser:
    for action in cli.parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]  # type: ignore[no-any-return]
    raise AssertionError("no subcommands")


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions if a.dest in BY_KEY}


def test_the_shipped_file_and_its_copy_in_the_docs_are_generated() -> None:
    assert generate_settings.SHIPPED.read_text() == example_file(), "run: ./dev generate"
    doc = generate_settings.DOC.read_text()
    assert generate_settings.render_doc(doc) == doc, "run: ./dev generate"


def test_the_shipped_file_names_every_setting_and_loads(tmp_path: Path) -> None:
    text = example_file()
    uncommented = tmp_path / "all.toml"
    uncommented.write_text("\n".join(line.removeprefix("# ") if " = " in line else line
                                     for line in text.splitlines()))
    settings = cfg.load(uncommented)
    assert set(settings) == set(BY_KEY) == cfg.KEYS
    cfg.daemon_config(settings).validate()


def test_every_setting_builds_the_config_and_nothing_else_does() -> None:
    built = ({f.name for f in fields(DaemonConfig)} - {"ownership", "transports"}
             | {"owner", "group", "mode", "cdi"} | set(SWITCHES))
    assert built == set(BY_KEY)


#: A value of each setting unlike its default, with settings given beside
#: it where it needs them to show.
GIVEN: dict[str, tuple[object, dict[str, object]]] = {
    "mountpoint": ("/elsewhere", {}), "ipus": (2, {}), "profile": ("ipu1", {}), "owner": ("1", {}),
    "group": ("1", {}), "mode": ("0600", {}), "link_dev": (os.geteuid() != 0, {}), "passthrough": (False, {}),
    "state_dir": ("/s", {}), "group_size": (2, {}), "spin_us": (0, {}), "uring": ("off", {}),
    "fast_path": (False, {}), "control": ("/c", {}), "dev_dir": ("/d", {}), "fault_plan": ("/p", {}),
    "trace_file": ("/t", {}), "trace_max_bytes": (1, {}), "exporter": ("127.0.0.1:1", {}),
    "cdi": (False, {"cdi_dir": "/x"}), "cdi_dir": ("/x", {"cdi": True}), "cdi_prefix": ("p", {}),
    "cdi_follow_restarts": (True, {}), "while_attached": ("shared", {}), "control_group": ("1", {}),
}


@pytest.mark.parametrize("key", sorted(BY_KEY))
def test_every_setting_reaches_the_config(key: str) -> None:
    # A setting that daemon_config() forgets keeps its default silently.
    assert key in GIVEN, f"give {key} a value unlike its default in GIVEN"
    value, beside = GIVEN[key]
    assert cfg.daemon_config({**beside, key: value}) != cfg.daemon_config(beside), key


def test_every_setting_has_a_value_to_try() -> None:
    assert set(GIVEN) == set(BY_KEY)


def test_mount_offers_every_setting_and_run_those_it_passes_on() -> None:
    mount, run = _options(_subparser("mount")), _options(_subparser("run"))
    assert set(mount) == set(BY_KEY)
    assert set(run) == {s.key for s in RUN_SETTINGS}
    for key, action in run.items():  # one help text, one spelling
        assert (action.option_strings, action.help) == (mount[key].option_strings, mount[key].help), key


@pytest.mark.parametrize("argv", [
    ["--ipus", "2", "--profile", "ipu1", "--no-passthrough", "--mode", "0600"],
    ["--trace-file", "/t", "--trace-max-bytes", "99", "--spin-us", "0", "--state-dir", "/s"],
    ["--group-size", "2", "--fault-plan", "/p.toml", "--no-fast-path"],
    [],
])
def test_run_passes_on_exactly_the_settings_it_was_given(argv: list[str]) -> None:
    run_args = vars(_subparser("run").parse_args([*argv, "--", "true"]))
    forwarded = mount_argv(run_args)
    mount_args = vars(_subparser("mount").parse_args(forwarded))
    assert given(mount_args) == given(run_args, RUN_SETTINGS)
    assert len(given(run_args, RUN_SETTINGS)) == sum(1 for a in argv if a.startswith("--"))


def test_an_off_switch_in_the_file_matches_its_option(tmp_path: Path) -> None:
    for setting in (s for s in SETTINGS if s.form is Form.OFF):
        args = vars(_subparser("mount").parse_args([setting.flag]))
        assert given(args) == {setting.key: False}
