"""The real suite files (../shared/suites, see tests/suites_data.py): read as the product
reads them, pulled from a mirror with their sha256 checked, and pointed at with
`sparkctl suites path`. The mirror is a real HTTP server on loopback serving copies of the
files (the machine that runs the tests may have no internet)."""

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
from sparkctl.services.evals import SUITES, SuiteError, load_suite, pull_suite
from tests.suites_data import shared_suites


@pytest.fixture
def suites() -> Path:
    return shared_suites()


def test_the_real_suites_read_whole_and_match_their_published_sha256(suites):
    cfg = Config(eval=EvalConfig(suites_dir=str(suites)))
    g = load_suite(cfg, "gsm8k")
    i = load_suite(cfg, "ifeval")
    assert len(g.items) == 1319 and len(i.items) == 541
    assert not g.modified and not i.modified
    first = g.items[0]
    assert first.text.startswith("Janet") and first.gold == "18" and first.text in first.prompt
    assert "The answer is" in first.prompt  # the prompt asks for the answer line strict match reads
    keys = [it.id for it in i.items]
    assert len(set(keys)) == 541 and keys[0] == "1000"
    assert all(len(it.instruction_ids) == len(it.kwargs) >= 1 for it in i.items)


@pytest.fixture
def mirror(tmp_path, suites, monkeypatch):
    """A loopback HTTP server holding copies of the suite files, as $SPARKCTL_SUITES_MIRROR."""
    root = tmp_path / "mirror"
    shutil.copytree(suites, root)
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("SPARKCTL_SUITES_MIRROR", f"http://127.0.0.1:{server.server_address[1]}")
    yield root
    server.shutdown()
    server.server_close()


def test_pull_downloads_verifies_and_then_reads(mirror, tmp_path, capsys):
    assert cli.main(["suites", "pull", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert sorted(p["suite"] for p in out["pulled"]) == ["gsm8k", "ifeval"] and out["failed"] == []
    for p in out["pulled"]:
        assert hashlib.sha256(Path(p["path"]).read_bytes()).hexdigest() == SUITES[p["suite"]].sha256
        assert (Path(p["path"]).parent / f"LICENSE-{p['suite']}.txt").is_file()
    assert cli.main(["suites", "pull", "--json"]) == 0  # again: nothing downloaded
    assert all(p["already"] for p in json.loads(capsys.readouterr().out)["pulled"])
    assert cli.main(["suites", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert [s["state"] for s in listing["suites"]] == ["ok", "ok"]


def test_a_download_with_the_wrong_sha256_is_refused_and_nothing_is_written(mirror, tmp_path, capsys):
    (mirror / "gsm8k-test.jsonl").write_text('{"question": "tampered", "answer": "#### 1"}\n')
    dest = tmp_path / "dest"
    with pytest.raises(SuiteError, match="sha256 .* does not match the published"):
        pull_suite("gsm8k", dest=dest)
    assert not (dest / "gsm8k-test.jsonl").exists()
    assert cli.main(["suites", "pull"]) == 3  # ifeval still pulled, gsm8k reported
    err = capsys.readouterr().err
    assert "gsm8k:" in err and "does not match" in err


def test_suites_path_points_at_a_copy_and_a_bad_dir_is_one_line(suites, tmp_path, capsys):
    assert cli.main(["suites", "path", str(suites)]) == 0
    capsys.readouterr()
    assert load_suite(Config(), "ifeval").path == suites.resolve() / "ifeval-input.jsonl"
    assert cli.main(["suites", "path", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sparkctl: ") and "holds none of" in err and "\n" not in err


def test_a_modified_copy_is_read_but_marked(suites, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    lines = (suites / "gsm8k-test.jsonl").read_text().splitlines()[:5]
    (folder / "gsm8k-test.jsonl").write_text("\n".join(lines) + "\n")
    suite = load_suite(Config(eval=EvalConfig(suites_dir=str(folder))), "gsm8k")
    assert len(suite.items) == 5 and suite.modified
