"""An air-gapped Spark: `sparkctl eval MODEL --suite gsm8k --n 20` on a fresh install, with no
suites pulled, no mirror and no network, against the FAKE Ollama (testkit/fakes/ollama_server.py,
on loopback, the one place a connection may go). The run reads the GSM8K copy shipped in the
package and records its sha256; MLflow is a REAL SQLite store."""

from __future__ import annotations

import hashlib
import json

from sparkctl import cli
from sparkctl.services.evals import shipped_dir
from testkit.fakes.ollama_server import bench_scenario
from tests.integration.test_eval import A, data_dir  # noqa: F401
from testkit.tracking import mlflow_template_db  # noqa: F401

GSM8K_SHA256 = "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14"  # the published test.jsonl


def gold_by_question() -> dict[str, str]:
    """Each GSM8K question's answer, read here from the file's own '#### N' lines."""
    out = {}
    for line in (shipped_dir() / "gsm8k-test.jsonl").read_text().splitlines():
        row = json.loads(line)
        out[row["question"]] = row["answer"].rsplit("####", 1)[1].strip().replace(",", "")
    return out


def test_eval_gsm8k_20_items_offline_reads_the_shipped_suite(serve, data_dir, tmp_path, capsys, no_network):  # noqa: F811
    gold = gold_by_question()
    state = bench_scenario(tokens_per_s=None)

    def answers(model: str, prompt: str) -> str | None:  # a model that knows every answer
        asked = [q for q in gold if q in prompt]
        return None if len(asked) != 1 else f"Working it out gives {gold[asked[0]]}. The answer is {gold[asked[0]]}."

    state.answers = answers
    server = serve(state)
    cfg = tmp_path / "sparkctl.toml"
    cfg.write_text(f'[engine]\nhost = "{server.url}"\n[tracking]\nexperiment = "offline"\n')  # no [eval] suites_dir

    assert cli.main(["--config", str(cfg), "eval", A, "--suite", "gsm8k", "--n", "20", "--json"]) == 0
    captured = capsys.readouterr()
    (run,) = json.loads(captured.out)
    assert "gsm8k: shipped copy · sha256 3730d312f6e3 · 1319 items" in captured.err  # which file it read
    assert run["status"] == "FINISHED" and run["summary"]["items"] == 20 and run["summary"]["dnf_count"] == 0
    assert run["summary"]["gsm8k_flexible"] == 1.0  # every item was a real GSM8K question, answered right
    assert no_network == []  # nothing beyond loopback was even looked up
    assert not (data_dir / "suites").exists()  # nothing pulled, nothing written beside the data

    from sparkctl.tracking.store import MlflowStore, default_tracking_uri

    landed = [r for r in MlflowStore(default_tracking_uri(data_dir), None, "offline").search_runs()
              if r["run_id"] == run["mlflow_run_id"]][0]
    assert landed["params"]["suite_sha256"] == GSM8K_SHA256
    assert landed["tags"]["eval.suite_copy"] == "shipped" and landed["tags"]["eval.suite_modified"] == "false"
    shipped = shipped_dir() / "gsm8k-test.jsonl"
    assert hashlib.sha256(shipped.read_bytes()).hexdigest() == GSM8K_SHA256
