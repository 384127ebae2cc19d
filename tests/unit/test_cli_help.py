"""Every command's --help renders (argparse formats help strings with %, so a stray "95%"
in a help text crashes --help, not the command)."""

from __future__ import annotations

import pytest

from sparkctl import cli


def _commands() -> list[str]:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sorted(sub.choices)


def test_top_level_help(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for name in ("bench", "sync", "runs", "compare", "regressions"):
        assert name in out


@pytest.mark.parametrize("command", _commands())
def test_each_command_help(command, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([command, "--help"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: sparkctl {command}")
