"""What sparkctl notes when it records a bench, for the dashboard's engine-change note
(services/benched.py): the newest usable bench per store, model and engine kind. Real
files in a temporary data dir; the records are built by hand as the bench builds them."""

from __future__ import annotations

from dataclasses import dataclass

from sparkctl.services.benched import notes_from_file, remember
from sparkctl.tracking.record import RunRecord


@dataclass
class Store:  # what the file keys a store by: an MlflowStore's display URI and experiment
    display_uri: str = "sqlite:////data/mlflow.db"
    experiment: str = "sparkctl"


def bench(model: str, version: str, start_ms: int, *, valid: bool = True, status: str = "FINISHED",
          kind: str = "ollama", experiment: str = "sparkctl") -> RunRecord:
    return RunRecord(experiment=experiment, run_name=f"{model} @ {kind} {version}", status=status,
                     start_ms=start_ms, end_ms=start_ms + 1000,
                     tags={"model.name": model, "engine.kind": kind, "engine.version": version,
                           "guard.valid": str(valid).lower()},
                     summary_metrics={"decode_tps_median": 42.0})


def test_the_newest_usable_bench_of_each_model_is_what_the_note_reads(tmp_path):
    path, store, lanes = tmp_path / "last_benches.json", Store(), {"production": "qwen3:8b", "fast": "llama3.2"}
    remember(bench("qwen3:8b", "0.12.6", 1000), store, path)
    remember(bench("qwen3:8b", "0.13.0", 3000, valid=False), store, path)  # invalid: not a bench to go by
    remember(bench("qwen3:8b", "0.13.0", 4000, status="KILLED"), store, path)  # stopped: neither
    remember(bench("qwen3:8b", "0.11.0", 500), store, path)  # an older run replayed later
    remember(bench("Llama3.2", "0.13.0", 2000), store, path)  # "llama3.2:latest" by Ollama's rules
    notes, rest = notes_from_file(store, lanes, "ollama", "0.13.0", path)
    assert notes == [("production", "engine 0.13.0 since last bench of production (0.12.6): re-bench", True)]
    assert rest == {}
    # another engine kind, another store, no file: nothing known, the store is asked
    assert notes_from_file(store, lanes, "openai", "b5000", path) == ([], lanes)
    assert notes_from_file(Store(experiment="team"), lanes, "ollama", "0.13.0", path) == ([], lanes)
    assert notes_from_file(store, lanes, "ollama", "0.13.0", tmp_path / "none.json") == ([], lanes)


def test_an_unreadable_file_answers_nothing_and_is_written_afresh(tmp_path):
    path, store = tmp_path / "last_benches.json", Store()
    path.write_text("{not json")
    assert notes_from_file(store, {"production": "qwen3:8b"}, "ollama", "0.13.0", path) == (
        [], {"production": "qwen3:8b"})
    remember(bench("qwen3:8b", "0.12.6", 1000), store, path)
    assert notes_from_file(store, {"production": "qwen3:8b"}, "ollama", "0.12.6", path) == ([], {})
