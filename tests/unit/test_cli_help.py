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
    spoken = next((" ".join(words) for words, name in cli.TWO_WORD.items() if name == command), command)
    assert capsys.readouterr().out.startswith(f"usage: sparkctl {spoken}")


def test_two_word_commands_parse_with_options_anywhere():
    args = cli.build_parser().parse_args(cli._join_two_word(["--config", "x.toml", "eval", "score", "--suite",
                                                             "gsm8k", "r.jsonl", "--json"]))
    assert (args.command, args.file, args.suite, args.json) == ("eval-score", "r.jsonl", "gsm8k", True)
    args = cli.build_parser().parse_args(cli._join_two_word(["eval", "qwen3", "--suite", "ifeval"]))
    assert args.command == "eval" and args.models == ["qwen3"]
