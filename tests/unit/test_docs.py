"""The documentation keeps up with the product: every command `sparkctl --help` can reach is
named in README.md or docs/*.md, every key sparkctl.toml accepts is in docs/config.md, and every
relative link (a page, a picture, a #heading) resolves. The lists come from the parser and the
config schema themselves, so a new command or key without docs fails here."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from sparkctl import config as config_module
from sparkctl.cli import TWO_WORD, build_parser

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMG_SRC = re.compile(r"<img\b[^>]*\bsrc=\"([^\"]+)\"", re.I)


def prose(page: Path) -> str:
    """The page without its fenced code blocks (a link or heading in a code sample is not one)."""
    return FENCE.sub("", page.read_text(encoding="utf-8"))


def all_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in PAGES)


def commands() -> list[str]:
    """Every command path the parser accepts: `bench`, `eval score`, a nested `x y`..."""
    out: list[str] = []

    def walk(parser: argparse.ArgumentParser, prefix: tuple[str, ...]) -> None:
        for action in parser._actions:  # argparse keeps subparsers here and nowhere public
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    words = prefix + (name,)
                    out.append(" ".join(words))
                    walk(sub, words)

    walk(build_parser(), ())
    spelled = {parser: " ".join(words) for words, parser in TWO_WORD.items()}
    return sorted(spelled.get(c, c) for c in out)


def test_the_docs_exist():
    assert (DOCS / "config.md").is_file() and len(PAGES) > 5


def test_every_command_appears_in_the_docs():
    text = all_text()
    cmds = commands()
    assert {"bench", "eval", "eval score", "suites"} <= set(cmds)
    missing = [c for c in cmds
               if not re.search(r"(?:sparkctl\s+|`)" + r"\s+".join(map(re.escape, c.split())) + r"\b", text)]
    assert not missing, f"commands named nowhere in README.md or docs/*.md: {missing}"


def config_keys() -> list[tuple[str, str]]:
    """(table, key) for every key the config accepts, from the schema the loader checks with."""
    keys = [(section, key) for section, (_cls, checks) in config_module.SECTIONS.items() for key in checks]
    keys += [("engines.NAME", key) for key in config_module.NAMED_ENGINE_KEYS]
    keys += [("hosts.NAME", key) for key in [*config_module.HOST_KEYS, "lanes"]]
    keys += [("bench.profiles.NAME", key) for key in config_module.PROFILE_KEYS]
    keys += [("lanes", key) for key in config_module.LANES_RESERVED]
    return keys


def test_every_config_key_appears_in_the_configuration_page():
    page = (DOCS / "config.md").read_text(encoding="utf-8")
    keys = config_keys()
    assert ("eval", "suites_dir") in keys and ("engines.NAME", "url") in keys
    missing = []
    for table, key in keys:
        # the table named as in TOML, and the key as a word of the page (a table's row or its list)
        if f"[{table}]" not in page or not re.search(rf"(?<![\w.]){re.escape(key)}(?![\w])", page):
            missing.append(f"[{table}] {key}")
    assert not missing, f"config keys not in docs/config.md: {missing}"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|\*|_(?=\w)|(?<=\w)_", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text stays, its target goes
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose(page).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    out |= set(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", page.read_text(encoding="utf-8")))
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    text = prose(page)
    broken = []
    for target in LINK.findall(text) + IMG_SRC.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:, ...: not ours to check
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(REPO)}")
        elif REPO not in dest.parents and dest != REPO:
            broken.append(f"{target}: outside the repository")
    assert not broken, broken


def test_every_exit_code_is_explained_in_the_cli_page_and_the_troubleshooting_table():
    """Review of issues 28-31: exit 7 (NOT_SAVED) was returned by bench, sweep, eval and the
    lane changes but missing from docs/cli.md's list. Every code the CLI can return is named."""
    from sparkctl.cli.exitcodes import ExitCode

    cli_page = " ".join((DOCS / "cli.md").read_text(encoding="utf-8").split())
    listed = cli_page.split("Exit codes:", 1)[1].split("Errors are one line", 1)[0].strip()
    table = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    for code in ExitCode:
        assert re.search(rf"(?:^|[:,] ){code.value} ", listed), f"docs/cli.md: exit code {code.value} ({code.name})"
        assert re.search(rf"^\| {code.value} \|", table, re.M), f"docs/troubleshooting.md: exit code {code.value}"
    assert "7 the bench, sweep, eval, promotion or rollback ran but its run was not saved" in listed
