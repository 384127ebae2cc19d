"""Where each engine tells its speculative-decoding figures, read into core.specdec.SpecCounts.

- llama-server: every response's `timings.draft_n` / `draft_n_accepted` (openai_compat's
  DoneEvent carries them as draft_tokens / draft_accepted).
- vLLM: Prometheus counters on GET /metrics (vllm/v1/spec_decode/metrics.py registers
  `vllm:spec_decode_num_drafts`, `..._num_draft_tokens`, `..._num_accepted_tokens` as
  prometheus_client Counters, exposed with the `_total` suffix and the labels model_name
  and engine). Cumulative since the server started: difference two readings.
- SGLang: GET /get_server_info -> internal_states[0].avg_spec_accept_length, a running
  average since the server started (what SGLang's own bench_serving reports), and no
  drafted/accepted counts: it is recorded as the engine's accept length, said to be
  server-wide.
- Ollama: no figure at all. /api/show tells whether the model carries a draft (a DRAFT
  line in its Modelfile, the layer of media type application/vnd.ollama.image.draft) or
  MTP layers (`<arch>.nextn_predict_layers` in model_info, which Ollama drafts with only
  when `draft_num_predict` is set), and that is what a run records.
"""

from __future__ import annotations

import re
from typing import Any

from sparkctl.core.specdec import SpecCounts
from sparkctl.engines.base import DoneEvent, ShowInfo

VLLM_DRAFTS = "vllm:spec_decode_num_drafts_total"
VLLM_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"

SOURCE_LLAMA = "llama-server timings (draft_n, draft_n_accepted) per response"
SOURCE_VLLM = "vLLM /metrics counters (spec_decode_num_drafts/_draft_tokens/_accepted_tokens), differenced"
SOURCE_SGLANG = "SGLang /get_server_info avg_spec_accept_length (server-wide since it started)"
OLLAMA_NOT_EXPOSED = "not exposed by Ollama's API"


def from_done(done: DoneEvent) -> SpecCounts | None:
    """Per-response figures (llama-server); None when the response carries none."""
    if done.draft_tokens is None and done.draft_accepted is None:
        return None
    return SpecCounts(drafted=done.draft_tokens, accepted=done.draft_accepted, tokens=done.eval_count or None)


def parse_vllm_metrics(text: str, model: str | None = None) -> SpecCounts | None:
    """The three spec-decode counters from a /metrics page, summed over vLLM's engines (and
    over models, unless `model` names the one to keep); None when the server has none (it
    was started without a speculative config)."""
    from prometheus_client.parser import text_string_to_metric_families

    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name not in (VLLM_DRAFTS, VLLM_DRAFT_TOKENS, VLLM_ACCEPTED):
                continue
            if model is not None and sample.labels.get("model_name") not in (None, model):
                continue
            sums[sample.name] = sums.get(sample.name, 0.0) + float(sample.value)
    if not sums:
        return None
    return SpecCounts(drafted=_int(sums.get(VLLM_DRAFT_TOKENS)), accepted=_int(sums.get(VLLM_ACCEPTED)),
                      drafts=_int(sums.get(VLLM_DRAFTS)))


def parse_sglang_server_info(body: Any) -> SpecCounts | None:
    states = body.get("internal_states") if isinstance(body, dict) else None
    if not isinstance(states, list) or not states or not isinstance(states[0], dict):
        return None
    value = states[0].get("avg_spec_accept_length")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return SpecCounts(accept_length=float(value))


def _int(x: float | None) -> int | None:
    return None if x is None else int(round(x))


_DRAFT_NUM_PREDICT = re.compile(r"^draft_num_predict\s+(\d+)\s*$", re.M)


def ollama_draft(show: ShowInfo | None) -> str:
    """What /api/show says about a draft for speculative decoding, in words."""
    if show is None:
        return "unknown"
    m = _DRAFT_NUM_PREDICT.search(show.parameters or "")
    n = int(m.group(1)) if m else None
    if show.draft:
        if n == 0:
            return "draft model present, disabled (draft_num_predict 0)"
        return f"draft model (DRAFT layer), draft_num_predict {n if n is not None else '4 (default)'}"
    arch = show.model_info.get("general.architecture")
    layers = show.model_info.get(f"{arch}.nextn_predict_layers") if arch else None
    if isinstance(layers, int) and layers > 0:
        if n:
            return f"MTP layers (nextn_predict_layers {layers}), draft_num_predict {n}"
        return f"MTP layers (nextn_predict_layers {layers}), inactive: draft_num_predict is not set"
    return "none"
