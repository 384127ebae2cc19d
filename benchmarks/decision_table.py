"""The decision table (issue 18's closing figure) for two models on the FAKE Ollama that the
tests use too (testkit/decision_scenario.py): the incumbent llama3.2:3b paced at 80 tok/s and right on 85 of 100 GSM8K questions,
the contender qwen3:8b at 100 tok/s and right on 78 of the same 100 (a paired sample).
Each model benched (1 warm-up, 5 repetitions, 64 tokens) and evaluated on the 100
questions by the real BenchRunner and EvalRunner, recorded into a fresh SQLite MLflow store
in a temp dir; then `compare` as text and as `--table` Markdown, the contender named first.

Run: .venv/bin/python benchmarks/decision_table.py
The real-engine figure is benchmarks/decision_table_llama.sh.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sparkctl.services.runs.comparison import compare_models  # noqa: E402
from sparkctl.services.runs.decision import decision_table  # noqa: E402
from sparkctl.cli.textreport import render_comparison  # noqa: E402
from sparkctl.tracking.store import MlflowStore, default_tracking_uri  # noqa: E402
from testkit.fakes.ollama_server import FakeOllama, bench_scenario  # noqa: E402
from testkit.decision_scenario import CON, INC, answers_for, evaluate, write_gsm8k  # noqa: E402
from testkit.tracking import TEST_EXPERIMENT, recording_bench  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        store = MlflowStore(default_tracking_uri(tmp / "mlflow"), None, TEST_EXPERIMENT)
        store.search_runs()  # creates the tables
        state = bench_scenario(tokens_per_s=None)
        state.models[INC].tokens_per_s = 80.0
        state.models[CON].tokens_per_s = 100.0
        state.answers = answers_for({INC: 85, CON: 78})
        server = FakeOllama(state).start()
        try:
            bench = recording_bench(server.url, store, tmp / "spool.jsonl", warmup=1, reps=5, num_predict=64)
            asyncio.run(bench(INC, CON))
            asyncio.run(evaluate(server.url, store, tmp, [INC, CON], write_gsm8k(tmp / "suites")))
            cmp = compare_models(store, [CON, INC], lanes={"production": INC})
            print(render_comparison(cmp))
            print()
            print(decision_table(cmp).markdown())
        finally:
            server.stop()


if __name__ == "__main__":
    main()
