"""`promote --swap` puts the incumbent back when anything after its unload fails, and verifies
it (issue 17, point 7); a rollback does not leave the model it rolls back from resident with
no lane (point 4). Same set-up as test_promotion.py: the FAKE Ollama (testkit/fakes/ollama_server.py,
real HTTP), a REAL MLflow store (SQLite), the CLI called in-process."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from testkit.fakes.host import spark_snapshot
from tests.integration.test_promotion import CONTENDER, PROD, host, resident, seed, spark, state_file  # noqa: F401
from testkit.tracking import mlflow_store, mlflow_template_db  # noqa: F401

FOREVER_AFTER_NS = 100 * 365 * 86400 * 10**9


def incumbent(spark):
    return next((r for r in spark["state"].resident.values() if r.name == PROD), None)


def test_swap_puts_the_incumbent_back_when_the_engine_goes_away_mid_switch(spark, host):
    """--swap unloads gpt-oss:120b first (both do not fit); the engine then stops answering
    while qwen3:8b loads (a restart) and is back two seconds later. It used to raise out of
    the switch with production unloaded."""
    seed(spark["store"], spark["tmp"], model=CONTENDER)
    host["probes"].snapshot = spark_snapshot(15.0, runner_gib=80.0)
    server, state = spark["server"], spark["state"]
    state.models[CONTENDER].load_s = 1.0

    def restart():
        deadline = time.monotonic() + 30
        while not [c for c in server.calls("/api/generate") if c.body.get("model") == CONTENDER]:
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)
        time.sleep(0.2)
        server.down()
        time.sleep(1.0)
        server.up()

    t = threading.Thread(target=restart)
    t.start()
    code, out, err = spark["run"]("promote", CONTENDER, "--lane", "production", "--swap")
    t.join()
    assert code == 3, out + err  # unreachable, as any other command would say
    assert "--swap: gpt-oss:120b is unloaded first" in out
    assert "gpt-oss:120b (lane production) (context 131072, keep-alive forever) loaded back, verified" in out
    assert resident(spark) == [PROD]
    back = incumbent(spark)
    assert back.context_length == 131072 and back.expires_at_ns > time.time_ns() + FOREVER_AFTER_NS
    assert not state_file().exists()  # the lane never changed
    assert "lane production keeps gpt-oss:120b" in err


def test_swap_puts_the_incumbent_back_when_the_contender_fails_to_load(spark, host):
    seed(spark["store"], spark["tmp"], model=CONTENDER)
    host["probes"].snapshot = spark_snapshot(15.0, runner_gib=80.0)
    spark["state"].models[CONTENDER].load_error = (500, "llama runner process has terminated: exit status 2")
    code, out, _ = spark["run"]("promote", CONTENDER, "--lane", "production", "--swap")
    assert code == 5
    assert "gpt-oss:120b (lane production) (context 131072, keep-alive forever) loaded back, verified" in out
    assert resident(spark) == [PROD] and incumbent(spark).expires_at_ns > time.time_ns() + FOREVER_AFTER_NS


def test_kill_9_after_the_incumbent_was_unloaded_is_repaired_by_the_next_command(spark, host, tmp_path):
    """The promotion dies between unloading production and loading the contender: the next
    sparkctl command finds its journal and puts production back."""
    seed(spark["store"], spark["tmp"], model=CONTENDER)
    server, state = spark["server"], spark["state"]
    state.models[CONTENDER].load_s = 30.0  # it never gets that far
    import os

    env = {**os.environ, "PYTHONPATH": str(spark["config"].parents[0])}
    from pathlib import Path

    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    script = ("import sys\nfrom testkit.fakes.host import FakeProbes, spark_snapshot\n"
              "import sparkctl.services.factory as f\n"
              "f.make_probes = lambda: FakeProbes(spark_snapshot(15.0, runner_gib=80.0))\n"
              "from sparkctl import cli\nsys.exit(cli.main(sys.argv[1:]))\n")
    proc = subprocess.Popen([sys.executable, "-c", script, "--config", str(spark["config"]), "promote", CONTENDER,
                             "--lane", "production", "--swap"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not [c for c in server.calls("/api/generate") if c.body.get("model") == CONTENDER]:
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.kill()
    proc.communicate()
    assert incumbent(spark) is None
    state.models[CONTENDER].load_s = 0.02
    from sparkctl import paths
    j = list(paths.residency_dir().glob("*"))
    assert j, (paths.residency_dir(), os.environ.get("SPARKCTL_DATA_DIR"))
    code, _, err = spark["run"]("lanes")
    assert "put back what a promote of qwen3:8b" in err
    assert resident(spark) == [PROD] and incumbent(spark).context_length == 131072


def test_rollback_after_a_promotion_without_swap_unloads_the_contender(spark, host):
    """Promoted beside the incumbent, then rolled back: the contender used to stay resident
    forever, serving no lane."""
    seed(spark["store"], spark["tmp"], model=CONTENDER)
    assert spark["run"]("promote", CONTENDER, "--lane", "production")[0] == 0
    assert resident(spark) == sorted([PROD, CONTENDER])
    code, out, err = spark["run"]("rollback", "production")
    assert code == 0, out + err
    assert "rollback: it serves no lane now: unloaded qwen3:8b" in out
    assert resident(spark) == [PROD] and incumbent(spark).expires_at_ns > time.time_ns() + FOREVER_AFTER_NS



def test_a_state_file_that_cannot_be_written_leaves_the_lane_as_it_was(spark, host, tmp_path, monkeypatch):
    """The contender loads and verifies, then sparkctl's own state file cannot be written:
    while it loads, the state file's folder is replaced by a plain file (a full disk or a
    read-only ~/.config give the same OSError at that moment). It used to end in a traceback
    with the contender resident and the lane not recorded; now it is one line naming the
    path, the contender is unloaded and the incumbent serves as before."""
    seed(spark["store"], spark["tmp"], model=CONTENDER)
    folder = tmp_path / "state-folder"
    folder.mkdir()
    monkeypatch.setenv("SPARKCTL_STATE_FILE", str(folder / "state.toml"))
    server, state = spark["server"], spark["state"]
    state.models[CONTENDER].load_s = 0.5

    def block_the_folder():
        deadline = time.monotonic() + 30
        while not [c for c in server.calls("/api/generate") if c.body.get("model") == CONTENDER]:
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()
        folder.write_text("a file where the state file's folder was\n")

    t = threading.Thread(target=block_the_folder)
    t.start()
    code, out, err = spark["run"]("promote", CONTENDER, "--lane", "production")
    t.join()
    assert code not in (0, 1), out + err
    assert "Traceback" not in err
    assert f"cannot write sparkctl's own state file {folder}" in err, err
    assert "lane production keeps gpt-oss:120b" in err
    assert resident(spark) == [PROD]
    assert incumbent(spark).expires_at_ns > time.time_ns() + FOREVER_AFTER_NS
