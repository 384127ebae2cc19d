"""Text another process sends never acts on the user's terminal: model names, details and
error texts with escape sequences in them (OSC 0 retitles the window, OSC 52 writes the
clipboard, CSI 2J clears the screen), through real `sparkctl` processes and the real TUI in a
pseudo-terminal. The engine is the FAKE Ollama (testkit/fakes/ollama_server.py) playing a
misbehaving one: real Ollama refuses such names, but anything may listen on that port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from testkit.fakes.ollama_server import default_state, make_model
from testkit.lanes import Tui, wait_for

# every way a terminal could be told something: ESC, BEL, C1 controls (CSI as one code point)
HOSTILE = "\x1b]0;PWNED-TITLE\x07\x1b]52;c;cHduZWQ=\x07\x1b[2J\x9b31m"
NAME = f"evil{HOSTILE}:latest"
BAD_BYTES = (b"\x1b]", b"\x07", b"\x1b[2J", "\x9b".encode(), b"PWNED-TITLE\x07")


def hostile_state():
    state = default_state()
    state.add_model(make_model(NAME, size_gib=2.0, family=f"llama{HOSTILE}", quantization_level=f"Q4{HOSTILE}"))
    state.add_resident(NAME, expires_in_s=None, context_length=4096)
    return state


def sparkctl(config, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkctl", "--config", str(config), *argv],
                          capture_output=True, timeout=120)


def assert_clean(data: bytes, where: str) -> None:
    for bad in BAD_BYTES:
        assert bad not in data, f"{where}: {bad!r} reached the terminal: {data[-600:]!r}"


def test_status_models_and_load_print_no_escape_sequence_from_the_engine(serve, tmp_path):
    server = serve(hostile_state())
    server.state.fail("/api/generate", 500, f"model runner crashed{HOSTILE} while loading")
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "{server.url}"\n')
    for argv in (("status",), ("models",), ("load", "llama3.2:3b")):
        done = sparkctl(config, *argv)
        assert_clean(done.stdout + done.stderr, " ".join(argv))
        assert b"Traceback" not in done.stderr
        if argv[0] == "load":
            assert done.returncode == 5 and b"model runner crashed while loading" in done.stderr
        else:
            assert b"evil" in done.stdout  # the model is still shown, as plain text


def test_the_dashboard_draws_a_hostile_model_name_as_plain_text(serve, tmp_path):
    server = serve(hostile_state())
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "{server.url}"\n[ui]\nrefresh_s = 1.0\n')
    tui = Tui(config, tmp_path)
    try:
        wait_for(lambda: tui.has("Resident models"), "the dashboard never drew")
        wait_for(lambda: tui.has("evil"), "the resident model never showed")
        time.sleep(1.5)  # a refresh or two more
        # Textual writes escape sequences of its own: the hostile ones are told by their payloads
        for payload in (b"PWNED-TITLE", b"cHduZWQ=", "\x9b".encode()):
            assert payload not in tui.seen, f"{payload!r} reached the terminal"
    finally:
        os.kill(tui.pid, signal.SIGTERM)
        tui.exit_code(30)
        tui.close()
