"""The incumbent-against-contender scenario the decision tests and benchmarks/decision_table.py
share: the two models (the incumbent serves lane production), a 100-question GSM8K file whose
answers are known by construction, the fake Ollama's answers that make each model right on a
chosen number of them (paired: the contender's right answers are a subset of the
incumbent's), and an eval of both recorded into a store. The Ollama is a FAKE
(testkit/fakes/ollama_server.py); the host facts are FAKE probes (testkit/fakes/host.py)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from sparkctl.config import Config, EvalConfig, TrackingConfig
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.evals import EvalRunner, EvalSettings, load_suite
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.sync import record_run
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.tracking import TEST_EXPERIMENT

INC, CON = "llama3.2:3b", "qwen3:8b"  # the incumbent (lane production) and the contender
CFG = Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT), lanes={"production": INC})
QUESTIONS = 100


def write_gsm8k(folder: Path) -> Path:
    """100 questions in GSM8K's format; question i has i + 1 apples."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "gsm8k-test.jsonl", "w") as fh:
        for i in range(QUESTIONS):
            q = f"Sam has {i + 1} apples and buys 3 more. How many apples does Sam have?"
            fh.write(json.dumps({"question": q, "answer": f"{i + 1} + 3 = {i + 4}\n#### {i + 4}"}) + "\n")
    return folder


def answers_for(right: dict[str, int]):
    """The fake's answers: model m answers question i right when i >= 100 - right[m] (so
    the contender's right answers are a subset of the incumbent's: a paired sample)."""
    def answers(model: str, prompt: str) -> str | None:
        m = re.search(r"Sam has (\d+) apples", prompt)
        if m is None:
            return None
        i = int(m.group(1)) - 1
        gold = i + 4
        said = gold if i >= QUESTIONS - right[model] else gold + 1
        return f"{i + 1} and 3 make {said}. The answer is {said}."
    return answers


def spool(tmp_path: Path) -> Spool:
    return Spool(tmp_path / "spool.jsonl")


async def evaluate(url: str, store, tmp_path: Path, models, suites: Path, **kw):
    cfg = replace(CFG, eval=EvalConfig(suites_dir=str(suites)))
    suite = load_suite(cfg, "gsm8k")
    s = EvalSettings.from_config(cfg, "gsm8k", n="all", think=False, num_predict=64, num_ctx=8192, **kw)
    engine = OllamaEngine(url, timeout=10.0)
    sp = spool(tmp_path)
    try:
        runner = EvalRunner(cfg, engine, FakeProbes(spark_snapshot()), s, suite,
                            recorder=lambda rec: record_run(rec, sp, store))
        return await runner.run(list(models))
    finally:
        await engine.close()
