"""Community figures beside sparkctl's own: the imported llama-benchy runs of a model at one
depth and concurrency. Shown apart from a comparison, never inside its statistics: another
tool measured them (client-side, means), on a machine and engine sparkctl did not see.
Blocking (MLflow): call from a worker thread."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sparkctl.services.imports.llama_benchy import KIND_IMPORT
from sparkctl.services.runs.query import list_runs, quote

HISTORY = 200


@dataclass(frozen=True)
class CommunityFigure:
    model: str
    depth: int
    concurrency: int
    prompt_tokens: str
    num_predict: str
    decode_tps: float | None
    decode_tps_std: float | None
    prefill_tps: float | None
    ttft_s: float | None
    engine: str
    source_file: str
    run_id: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        parts = [f"decode {self.decode_tps:.1f}" + (f" ± {self.decode_tps_std:.1f}" if self.decode_tps_std else "")
                 + " tok/s" if self.decode_tps is not None else "decode -"]
        if self.prefill_tps is not None:
            parts.append(f"prefill {self.prefill_tps:.0f} tok/s" + (f" (pp{self.prompt_tokens})" if self.prompt_tokens else ""))
        if self.ttft_s is not None:
            parts.append(f"TTFT {self.ttft_s:.2f} s")
        return (f"{self.model} @ d{self.depth} c{self.concurrency}: " + ", ".join(parts)
                + f" · {self.engine} · llama-benchy {self.source_file} ({self.run_id[:8]})")


def figures(store: Any, model: str, depth: int = 0, concurrency: int = 1,
            experiment: str | None = None) -> list[CommunityFigure]:
    """The newest imported figure of `model` per source file, at `depth` and `concurrency`."""
    out: dict[str, CommunityFigure] = {}
    for row in list_runs(store, model=model, kind=KIND_IMPORT, limit=HISTORY, experiment=experiment):
        found = store.search_runs(f"attributes.run_id = {quote(row.run_id)}", max_results=1)
        if not found:
            continue
        run = found[0]
        params, tags, metrics = run.get("params") or {}, run.get("tags") or {}, run.get("metrics") or {}
        if tags.get("import.phase") == "context":
            continue  # llama-benchy's context-loading request, not a measurement to put beside ours
        if (tags.get("import.depth"), tags.get("import.concurrency")) != (str(depth), str(concurrency)):
            continue
        source = params.get("source_file", "")
        if source in out:
            continue  # newest first: keep one per file
        engine = f"{tags.get('engine.kind', 'unknown')} {tags.get('engine.version', '')}".strip()
        out[source] = CommunityFigure(
            row.model, depth, concurrency, params.get("prompt_tokens", ""), params.get("num_predict", ""),
            metrics.get("decode_tps_median"), metrics.get("decode_tps_std"), metrics.get("prefill_tps_median"),
            metrics.get("ttft_s_median"), engine, source, row.run_id)
    return list(out.values())
