"""The suite files: shipped in the package and read with nothing else on the machine; which
copy wins (config, `suites path`, pulled, shipped); `sparkctl suites pull` checking a source
for a file other than the shipped one. Sources here are a real HTTP server on loopback, a
file:// URL and a plain directory; "the internet" is made unreachable (`no_network`), so a
test can never reach the published URLs."""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sparkctl import cli
from sparkctl.config import Config, EvalConfig
from sparkctl.services.evals import SuiteError, load_suite, pull_suite, shipped_dir
from sparkctl.services.evals import suites as suites_module

# The published files' sha256, taken from the upstream files themselves (openai/grade-school-math
# test.jsonl; google-research instruction_following_eval input_data.jsonl): an expectation
# written down apart from the package's own SHA256SUMS.
GSM8K_SHA256 = "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14"
IFEVAL_SHA256 = "67ffeee0fcb87c317c5b08a2de85557b4a7e96ada6178aa645b4954fe4b53d49"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def changed_gsm8k(folder: Path, lines: int = 5) -> Path:
    """A GSM8K file that is not the published one (its first few rows)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = (shipped_dir() / "gsm8k-test.jsonl").read_text().splitlines()[:lines]
    (folder / "gsm8k-test.jsonl").write_text("\n".join(rows) + "\n")
    return folder


# ---- shipped -------------------------------------------------------------------------------------


def test_the_package_ships_the_published_files_with_their_licences_and_sums():
    d = shipped_dir()
    assert sha(d / "gsm8k-test.jsonl") == GSM8K_SHA256 and sha(d / "ifeval-input.jsonl") == IFEVAL_SHA256
    assert "MIT License" in (d / "LICENSE-gsm8k.txt").read_text()
    assert "Apache License" in (d / "LICENSE-ifeval.txt").read_text()
    listed = dict(reversed(line.split()) for line in (d / "SHA256SUMS").read_text().splitlines())
    data = {p.name for p in d.iterdir() if p.is_file() and p.suffix != ".py" and p.name != "SHA256SUMS"}
    assert set(listed) == data  # every shipped file is in the manifest, and only those
    assert all(sha(d / name) == digest for name, digest in listed.items())


def test_with_nothing_set_up_the_shipped_suites_are_read_whole(no_network):
    g = load_suite(Config(), "gsm8k")
    i = load_suite(Config(), "ifeval")
    assert (g.copy, i.copy) == ("shipped", "shipped")
    assert g.sha256 == GSM8K_SHA256 and i.sha256 == IFEVAL_SHA256
    assert len(g.items) == 1319 and len(i.items) == 541
    assert not g.modified and not i.modified
    first = g.items[0]
    assert first.text.startswith("Janet") and first.gold == "18" and first.text in first.prompt
    keys = [it.id for it in i.items]
    assert len(set(keys)) == 541 and keys[0] == "1000"
    assert all(len(it.instruction_ids) == len(it.kwargs) >= 1 for it in i.items)
    assert no_network == []


def test_a_damaged_shipped_copy_is_refused_in_one_line(tmp_path, monkeypatch):
    fake_pkg = tmp_path / "suites_data"
    shutil.copytree(shipped_dir(), fake_pkg)
    rows = (fake_pkg / "gsm8k-test.jsonl").read_text().splitlines()
    (fake_pkg / "gsm8k-test.jsonl").write_text("\n".join(rows[:-1]) + "\n")  # the last question lost
    suites_module.shipped_sums.cache_clear()
    monkeypatch.setattr(suites_module, "shipped_dir", lambda: fake_pkg)
    try:
        with pytest.raises(SuiteError, match=r"shipped copy .* is damaged .* reinstall sparkctl"):
            load_suite(Config(), "gsm8k")
    finally:
        suites_module.shipped_sums.cache_clear()


# ---- which copy wins -----------------------------------------------------------------------------


def test_config_beats_suites_path_beats_pulled_beats_shipped(tmp_path, capsys):
    pulled = changed_gsm8k(Path(suites_module.pulled_dir()), lines=7)
    assert (load_suite(Config(), "gsm8k").copy, len(load_suite(Config(), "gsm8k").items)) == ("pulled", 7)
    assert load_suite(Config(), "ifeval").copy == "shipped"  # per suite: no pulled IFEval

    mine = changed_gsm8k(tmp_path / "mine", lines=5)
    assert cli.main(["suites", "path", str(mine)]) == 0
    capsys.readouterr()
    suite = load_suite(Config(), "gsm8k")
    assert (suite.copy, suite.path, len(suite.items), suite.modified) == ("path", mine.resolve() / "gsm8k-test.jsonl", 5, True)

    team = changed_gsm8k(tmp_path / "team", lines=3)
    assert load_suite(Config(eval=EvalConfig(suites_dir=str(team))), "gsm8k").copy == "config"

    assert cli.main(["suites", "path", "--reset"]) == 0
    assert load_suite(Config(), "gsm8k").path == pulled / "gsm8k-test.jsonl"


def test_a_chosen_dir_without_the_file_is_an_error_saying_how_back_to_the_shipped_copy(tmp_path, capsys):
    mine = changed_gsm8k(tmp_path / "mine")
    assert cli.main(["suites", "path", str(mine)]) == 0
    capsys.readouterr()
    with pytest.raises(SuiteError) as err:
        load_suite(Config(), "ifeval")  # this directory has GSM8K only
    message = str(err.value)
    assert str(mine.resolve()) in message and "`sparkctl suites path --reset`" in message and "\n" not in message
    assert cli.main(["suites", "--json"]) == 0
    listing = {s["suite"]: s for s in json.loads(capsys.readouterr().out)["suites"]}
    assert (listing["gsm8k"]["copy"], listing["gsm8k"]["state"]) == ("path", "differs")
    assert (listing["ifeval"]["copy"], listing["ifeval"]["state"]) == ("path", "missing")


def test_suites_path_refuses_a_dir_without_suites_in_one_line(tmp_path, capsys):
    assert cli.main(["suites", "path", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sparkctl: ") and "holds none of" in err and "\n" not in err
    assert load_suite(Config(), "gsm8k").copy == "shipped"  # nothing was remembered


# ---- pull: sources ---------------------------------------------------------------------------------


@pytest.fixture
def mirror_dir(tmp_path) -> Path:
    """A site's copy of the published files, as an air-gapped lab would keep it."""
    root = tmp_path / "mirror"
    shutil.copytree(shipped_dir(), root, ignore=shutil.ignore_patterns("*.py", "SHA256SUMS", "__pycache__"))
    return root


@pytest.fixture
def http_mirror(mirror_dir, monkeypatch):
    """mirror_dir served by a real HTTP server on loopback, as $SPARKCTL_SUITES_MIRROR."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(mirror_dir))
    handler.log_message = lambda *a, **k: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("SPARKCTL_SUITES_MIRROR", f"http://127.0.0.1:{server.server_address[1]}")
    yield mirror_dir
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("form", ["http", "file-url", "plain-dir"])
def test_pull_from_each_kind_of_mirror_finds_the_shipped_files_current(form, mirror_dir, tmp_path, monkeypatch,
                                                                       capsys, request, no_network):
    if form == "http":
        request.getfixturevalue("http_mirror")
    else:
        monkeypatch.setenv("SPARKCTL_SUITES_MIRROR", mirror_dir.as_uri() if form == "file-url" else str(mirror_dir))
    assert cli.main(["suites", "pull", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["failed"] == [] and sorted(p["suite"] for p in out["pulled"]) == ["gsm8k", "ifeval"]
    assert all(p["outcome"] == "shipped" and p["already"] for p in out["pulled"])
    assert not Path(out["into"], "gsm8k-test.jsonl").exists()  # no second copy of the shipped file
    assert cli.main(["suites", "--json"]) == 0
    assert [s["copy"] for s in json.loads(capsys.readouterr().out)["suites"]] == ["shipped", "shipped"]
    assert no_network == []  # the mirror was enough


def test_pull_into_a_chosen_dir_writes_the_file_and_its_licence(http_mirror, tmp_path, capsys):
    mine = changed_gsm8k(tmp_path / "mine")  # an old, cut-down copy the user pointed at
    assert cli.main(["suites", "path", str(mine)]) == 0
    assert cli.main(["suites", "pull", "--json"]) == 0
    capsys.readouterr()
    assert sha(mine / "gsm8k-test.jsonl") == GSM8K_SHA256 and sha(mine / "ifeval-input.jsonl") == IFEVAL_SHA256
    assert "MIT License" in (mine / "LICENSE-gsm8k.txt").read_text()
    assert load_suite(Config(), "gsm8k").copy == "path" and not load_suite(Config(), "gsm8k").modified


def test_a_different_file_is_refused_unless_accepted_and_then_it_is_the_pulled_copy(http_mirror, tmp_path, capsys):
    changed_gsm8k(http_mirror, lines=9)  # the mirror now holds a file other than the shipped one
    dest = tmp_path / "dest"
    with pytest.raises(SuiteError, match=r"is not the shipped file's .* nothing was written.*--accept-new"):
        pull_suite("gsm8k", dest=dest)
    assert not (dest / "gsm8k-test.jsonl").exists()
    assert cli.main(["suites", "pull"]) == 3  # ifeval current, gsm8k reported
    err = capsys.readouterr().err
    assert "gsm8k:" in err and "nothing was written" in err and "evals keep reading the shipped copy" in err
    assert load_suite(Config(), "gsm8k").copy == "shipped"

    assert cli.main(["suites", "pull", "--accept-new", "--json"]) == 0
    pulled = {p["suite"]: p for p in json.loads(capsys.readouterr().out)["pulled"]}
    assert pulled["gsm8k"]["outcome"] == "new" and pulled["ifeval"]["outcome"] == "shipped"
    suite = load_suite(Config(), "gsm8k")
    assert (suite.copy, len(suite.items), suite.modified) == ("pulled", 9, True)
    assert cli.main(["suites", "pull", "--json"]) == 0  # again: the pulled file is what the source has
    assert json.loads(capsys.readouterr().out)["pulled"][0]["outcome"] == "already"


# ---- pull: offline ---------------------------------------------------------------------------------


def test_pull_offline_says_what_to_do_and_that_the_shipped_copy_is_in_use(no_network, capsys):
    assert cli.main(["suites", "pull"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2  # one line per suite
    gsm8k = err[0]
    assert gsm8k.startswith("sparkctl: gsm8k: https://raw.githubusercontent.com/")
    assert "download failed" in gsm8k and "$SPARKCTL_SUITES_MIRROR" in gsm8k and "`sparkctl suites path DIR`" in gsm8k
    assert gsm8k.endswith("evals keep reading the shipped copy")
    assert ("resolve", "raw.githubusercontent.com") in no_network  # it did try, and only that
    assert load_suite(Config(), "gsm8k").copy == "shipped"


def test_a_mirror_that_lacks_a_file_or_speaks_another_scheme_is_one_line(mirror_dir, monkeypatch, capsys, no_network):
    (mirror_dir / "ifeval-input.jsonl").unlink()
    monkeypatch.setenv("SPARKCTL_SUITES_MIRROR", mirror_dir.as_uri())
    assert cli.main(["suites", "pull"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"sparkctl: ifeval: {mirror_dir / 'ifeval-input.jsonl'}: not found ($SPARKCTL_SUITES_MIRROR "
                   "names the directory holding the suite files); evals keep reading the shipped copy"]
    monkeypatch.setenv("SPARKCTL_SUITES_MIRROR", "ftp://mirror.lab/suites")
    assert cli.main(["suites", "pull"]) == 3
    err = capsys.readouterr().err
    assert "use an https:// or file:// URL, or a directory" in err and no_network == []
