"""What a bench is asked to do (BenchSettings, from [bench] and the command's flags) and the
refusal a validity guard answers with before it starts (BenchRefused, exit code 4)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

from sparkctl.config import BenchConfig
from sparkctl.core import prefill
from sparkctl.core.keepalive import parse_keep_alive


class BenchRefused(Exception):
    """A validity guard refused the run before it started (exit code 4)."""


@dataclass(frozen=True)
class BenchSettings:
    prompt: str
    num_predict: int
    temperature: float
    seed: int
    num_ctx: int
    warmup: int
    reps: int
    timeout_s: float
    mode: str  # "beside" | "solo"
    keep_alive: str
    bandwidth_gbps: float
    reload_threshold_s: float
    think: bool
    allow_cpu: bool = False
    cache: str = prefill.COLD  # "cold": every request pays its prefill; "warm": cached follow-ups
    ctx_explicit: bool = False  # --ctx given: never switch to a resident model's own context
    wait: bool = True  # another bench on the engine: wait (True) or refuse (False)
    until_resolved: int = 0  # > 0: two models, repetitions until decode differs or is pinned, up to this many
    keep_loaded: bool = False  # models the bench loaded stay resident after it
    ctx_why: str = ""  # why num_ctx is fixed when not the user's (a sweep's depth), for the screens
    parent_run_id: str = ""  # --mlflow-parent-run-id: an existing MLflow run this bench's runs go under
    follow_up_chars: int = 0  # warm policy: characters of fresh text each request adds (a sweep's pp)

    @classmethod
    def from_config(cls, b: BenchConfig, **overrides: Any) -> "BenchSettings":
        base = cls(
            prompt=b.prompt, num_predict=b.num_predict, temperature=b.temperature, seed=b.seed,
            num_ctx=b.num_ctx, warmup=b.warmup, reps=b.reps, timeout_s=b.timeout_s, mode=b.mode,
            keep_alive=b.keep_alive, bandwidth_gbps=b.bandwidth_gbps,
            reload_threshold_s=b.reload_threshold_s, think=b.think, keep_loaded=b.keep_loaded,
        )
        if overrides.get("num_ctx") is not None:
            overrides.setdefault("ctx_explicit", True)
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})

    @property
    def options(self) -> dict[str, Any]:
        # num_ctx stays fixed for the whole bench: a changed runner option makes Ollama reload.
        return {"num_ctx": self.num_ctx, "num_predict": self.num_predict,
                "temperature": self.temperature, "seed": self.seed}

    @property
    def keep_alive_wire(self) -> int | float:
        """keep_alive as Ollama accepts it (a bare "-1" string would be a 400)."""
        return parse_keep_alive(self.keep_alive).wire

    @property
    def prompt_sha256(self) -> str:
        return hashlib.sha256(self.prompt.encode()).hexdigest()

