"""The workload matrix: model x profile x depth x concurrency cells, what each cell measured,
and the tables people post (JSON/CSV rows, llama-bench-style Markdown).

Pure core of sparkctl.services.bench.sweep: that service runs the cells and hands the
measurements here.
"""

from __future__ import annotations

import csv
import io
import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sparkctl.core.latency import RequestLatency, Slo, goodput_pct, judged, percentile_n

# The export's keys, in order (issue 12): --json cells and --csv columns are exactly these.
EXPORT_KEYS = ("model", "profile", "depth", "concurrency", "requests", "decode_tps_per_request_median",
               "throughput_tps", "ttft_s_p50", "ttft_s_p90", "ttft_s_p99", "itl_ms_p50", "itl_ms_p99",
               "goodput_pct", "dnf", "run_id")


def parse_int_list(text: str, what: str, minimum: int = 0) -> list[int]:
    """`0,4k,16k,32768` -> [0, 4096, 16384, 32768] (k = 1024), sorted, duplicates dropped.
    Raises ValueError with a one-line reason naming `what`."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(k?)", part)
        if not m:
            raise ValueError(f"{what}: {part!r} is not a whole number (e.g. 4096 or 4k)")
        n = int(m.group(1)) * (1024 if m.group(2) else 1)
        if n < minimum:
            raise ValueError(f"{what}: {n} is below {minimum}")
        out.append(n)
    if not out:
        raise ValueError(f"{what}: empty list")
    return sorted(set(out))


@dataclass(frozen=True)
class Cell:
    model: str
    profile: str
    depth: int  # tokens of context before the measured prompt
    concurrency: int

    @property
    def key(self) -> str:
        return f"{self.profile}/d{self.depth}/c{self.concurrency}"


def plan(models: Sequence[str], profiles: Sequence[str], depths: Sequence[int],
         concurrencies: Sequence[int], schedule: Sequence[tuple[int, int]] | None = None) -> list[Cell]:
    """The order cells run in. Models interleave inside each (profile, depth, concurrency)
    group, so a drift over the sweep (heat, a background job) touches every model alike;
    depth and concurrency rise, so a refusal or a DNF at the deep end comes last.

    `schedule`: a published order of (depth, concurrency) cells (Spark Arena's heat-aware
    one), kept exactly; profiles and models interleave inside each of its steps."""
    if schedule is not None:
        return [Cell(m, p, d, c) for d, c in schedule for p in profiles for m in models]
    return [Cell(m, p, d, c) for p in profiles for d in depths for c in concurrencies for m in models]


def context_needed(depth: int, prompt_tokens: int, num_predict: int, margin: int = 64) -> int:
    """Tokens one request of a cell occupies: its depth, its own prompt, what it may
    generate and a margin for the chat template and the cold-cache preamble."""
    return depth + prompt_tokens + num_predict + margin


def round_ctx(n: int) -> int:
    """num_ctx for a sweep: the need rounded up to a multiple of 1024."""
    return max(1024, int(math.ceil(n / 1024.0)) * 1024)


# ---- one cell's numbers ----------------------------------------------------------------------


@dataclass(frozen=True)
class RequestSample:
    """One measured request of a cell, as the client saw it."""

    round: int
    sent: float  # client clock (s)
    ended: float
    ttft_s: float | None
    tpot_s: float | None
    decode_tps: float | None  # the engine's eval_count / eval_duration
    prefill_tps: float | None
    eval_count: int | None
    chunk_gaps_s: tuple[float, ...] = ()
    finished: bool = True
    queued: bool = False
    prompt_eval_count: int | None = None

    @property
    def latency(self) -> RequestLatency:
        return RequestLatency(self.ttft_s, self.tpot_s, self.ended - self.sent if self.finished else None,
                              self.finished)


@dataclass
class CellStats:
    requests: int = 0
    dnf: int = 0
    decode_tps_per_request_median: float | None = None
    decode_tps_per_request_stdev: float | None = None
    prefill_tps_median: float | None = None
    prefill_tps_stdev: float | None = None
    throughput_tps: float | None = None
    ttft_s_p50: float | None = None
    ttft_s_p90: float | None = None
    ttft_s_p99: float | None = None
    itl_ms_p50: float | None = None
    itl_ms_p90: float | None = None
    itl_ms_p99: float | None = None
    tpot_ms_median: float | None = None
    goodput_pct: float | None = None
    queued: int = 0
    ttft_n: int = 0  # requests with a measured TTFT: the n behind the TTFT percentiles
    itl_n: int = 0  # inter-chunk gaps behind the ITL percentiles
    goodput_unmeasured: int = 0  # finished requests goodput could not judge (no cold TTFT), left out
    extra: dict[str, float] = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        """For MLflow's summary metrics (None left out)."""
        out = {k: float(v) for k, v in self.__dict__.items() if k != "extra" and v is not None}
        out.update(self.extra)
        return out


def cell_stats(samples: Sequence[RequestSample], slo: Slo | None = None) -> CellStats:
    st = CellStats(requests=len(samples), dnf=sum(not s.finished for s in samples),
                   queued=sum(s.queued for s in samples))
    ok = [s for s in samples if s.finished]
    dec = [s.decode_tps for s in ok if s.decode_tps]
    if dec:
        st.decode_tps_per_request_median = statistics.median(dec)
        st.decode_tps_per_request_stdev = statistics.stdev(dec) if len(dec) > 1 else None
    pre = [s.prefill_tps for s in ok if s.prefill_tps]
    if pre:
        st.prefill_tps_median = statistics.median(pre)
        st.prefill_tps_stdev = statistics.stdev(pre) if len(pre) > 1 else None
    st.throughput_tps = throughput(samples)
    # withheld below the n that makes them mean something (latency.min_n), n kept beside
    ttfts = [s.ttft_s for s in ok]
    (st.ttft_s_p50, st.ttft_n), (st.ttft_s_p90, _), (st.ttft_s_p99, _) = (percentile_n(ttfts, q) for q in (50, 90, 99))
    itl = [g * 1000.0 for s in ok for g in s.chunk_gaps_s]
    (st.itl_ms_p50, st.itl_n), (st.itl_ms_p90, _), (st.itl_ms_p99, _) = (percentile_n(itl, q) for q in (50, 90, 99))
    tp = [s.tpot_s * 1000.0 for s in ok if s.tpot_s is not None]
    st.tpot_ms_median = statistics.median(tp) if tp else None
    if slo is not None:
        st.goodput_pct = goodput_pct([s.latency for s in samples], slo)
        st.goodput_unmeasured = sum(not judged(s.latency, slo) for s in samples)
    return st


def throughput(samples: Iterable[RequestSample]) -> float | None:
    """Aggregate output tok/s: every token the engine generated, over the wall time of the
    rounds they ran in (first request sent .. last stream closed, per round, summed)."""
    rounds: dict[int, list[RequestSample]] = {}
    for s in samples:
        rounds.setdefault(s.round, []).append(s)
    tokens = 0
    wall = 0.0
    for rs in rounds.values():
        tokens += sum(s.eval_count or 0 for s in rs)
        wall += max(s.ended for s in rs) - min(s.sent for s in rs)
    return tokens / wall if wall > 0 and tokens else None


# ---- exports -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CellResult:
    cell: Cell
    stats: CellStats
    run_id: str | None = None
    depth_tokens: int | None = None  # measured by the engine (prompt_eval_count difference)
    roofline_pct: float | None = None
    flags: tuple[str, ...] = ()
    prompt_tokens: int | None = None  # the profile prompt's own tokens (depth 0 cell)
    num_predict: int = 0


def export_row(r: CellResult, with_goodput: bool) -> dict:
    s = r.stats
    row = {
        "model": r.cell.model, "profile": r.cell.profile, "depth": r.cell.depth,
        "concurrency": r.cell.concurrency, "requests": s.requests,
        "decode_tps_per_request_median": _round(s.decode_tps_per_request_median, 2),
        "throughput_tps": _round(s.throughput_tps, 2),
        "ttft_s_p50": _round(s.ttft_s_p50, 4), "ttft_s_p90": _round(s.ttft_s_p90, 4),
        "ttft_s_p99": _round(s.ttft_s_p99, 4),
        "itl_ms_p50": _round(s.itl_ms_p50, 3), "itl_ms_p99": _round(s.itl_ms_p99, 3),
        "goodput_pct": _round(s.goodput_pct, 1),
        "dnf": s.dnf, "run_id": r.run_id,
    }
    if not with_goodput:
        del row["goodput_pct"]
    return row


def _round(x: float | None, nd: int) -> float | None:
    return None if x is None else round(x, nd)


def to_csv(results: Sequence[CellResult], with_goodput: bool) -> str:
    keys = [k for k in EXPORT_KEYS if with_goodput or k != "goodput_pct"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
    w.writeheader()
    for r in results:
        w.writerow({k: ("" if v is None else v) for k, v in export_row(r, with_goodput).items()})
    return buf.getvalue()


def _pm(median: float | None, stdev: float | None, nd: int = 2) -> str:
    if median is None:
        return "-"
    return f"{median:.{nd}f} ± {stdev:.{nd}f}" if stdev is not None else f"{median:.{nd}f}"


def markdown_table(results: Sequence[CellResult], backend: str = "") -> str:
    """llama.cpp's published Spark form (llama-bench's Markdown): one row per model and
    test, `pp<prompt tokens>` (prefill tok/s) and `tg<num_predict>` (decode tok/s) at each
    depth as `@ d<depth>`, `median ± std`, from the concurrency-1 cells."""
    lines = ["| model | profile | backend | test | t/s |", "| --- | --- | --- | ---: | ---: |"]
    ones = [r for r in results if r.cell.concurrency == 1]
    by_key: dict[tuple[str, str], list[CellResult]] = {}
    for r in ones:
        by_key.setdefault((r.cell.model, r.cell.profile), []).append(r)
    for (model, profile), rs in by_key.items():
        rs = sorted(rs, key=lambda r: r.cell.depth)
        pp_n = next((r.prompt_tokens for r in rs if r.prompt_tokens), None)
        for r in rs:
            at = f" @ d{r.cell.depth}" if r.cell.depth else ""
            pp = f"pp{pp_n}" if pp_n else "pp"
            lines.append(f"| {model} | {profile} | {backend} | {pp}{at} | "
                         f"{_pm(r.stats.prefill_tps_median, r.stats.prefill_tps_stdev)} |")
            lines.append(f"| {model} | {profile} | {backend} | tg{r.num_predict}{at} | "
                         f"{_pm(r.stats.decode_tps_per_request_median, r.stats.decode_tps_per_request_stdev)} |")
    lines.append("")
    lines.append("pp: prefill tok/s of the whole cold prompt (depth + prompt, every request paying its "
                 "prefill); tg: the engine's decode tok/s; concurrency 1.")
    return "\n".join(lines)


def falloff(results: Sequence[CellResult], deepest: int | None = None) -> dict[tuple[str, str], float]:
    """Decode tok/s at the deepest depth over depth 0, per (model, profile), concurrency 1:
    the ratio that carries across machines (llama.cpp's Spark table: gpt-oss-20b 59.9/84.1)."""
    out: dict[tuple[str, str], float] = {}
    ones = [r for r in results if r.cell.concurrency == 1]
    for key in {(r.cell.model, r.cell.profile) for r in ones}:
        rs = {r.cell.depth: r.stats.decode_tps_per_request_median for r in ones
              if (r.cell.model, r.cell.profile) == key}
        d = deepest if deepest is not None else max(rs)
        if rs.get(0) and rs.get(d) and d:
            out[key] = rs[d] / rs[0]
    return out


# llama.cpp's published DGX Spark table (benches/dgx-spark/dgx-spark.md, build 6918): llama-bench,
# flash attention on (its `fa` column 1), tg32 at depth 0 and at depth 32768.
LLAMA_CPP_SPARK_TG32 = (
    ("gpt-oss-20b MXFP4", 84.10, 59.85),
    ("Qwen3-Coder-30B-A3B Q8_0", 60.92, 30.80),
)


def falloff_table(results: Sequence[CellResult], identity: Mapping[str, Mapping[str, str]] | None = None,
                  gpu: str = "") -> str:
    """Decode falloff with depth (deepest / depth 0, concurrency 1) per model and profile, in
    Markdown, beside llama.cpp's published Spark figures: with the engine facts that decide
    whether the two compare (GPU, runner build, flash attention, KV cache type). `identity`
    maps a model to its run's `engine.*` tags."""
    ratios = falloff(results)
    lines = ["| source | model | GPU | build | flash attention | KV cache | tg d0 | tg deepest | falloff |",
             "| --- | --- | --- | --- | --- | --- | ---: | ---: | ---: |"]
    ones = [r for r in results if r.cell.concurrency == 1]
    for (m, p), ratio in sorted(ratios.items()):
        rs = {r.cell.depth: r.stats.decode_tps_per_request_median for r in ones if (r.cell.model, r.cell.profile) == (m, p)}
        deepest = max(rs)
        tags = (identity or {}).get(m, {})
        lines.append(f"| sparkctl | {m} ({p}) | {gpu or '?'} | {tags.get('engine.runner_build', '?')} | "
                     f"{tags.get('engine.flash_attn', '?')} | {tags.get('engine.kv_cache_type', '?')} | "
                     f"{_n(rs[0])} | {_n(rs[deepest])} @ d{deepest} | {ratio:.3f} |")
    for name, d0, d32 in LLAMA_CPP_SPARK_TG32:
        lines.append(f"| llama.cpp Spark table | {name} | GB10 | b6918 | on | f16 | {d0:.2f} | {d32:.2f} @ d32768 | "
                     f"{d32 / d0:.3f} |")
    lines.append("")
    lines.append("falloff: decode tok/s at the deepest depth over depth 0, one request at a time. Ratios carry across "
                 "machines only with the same attention kernels: compare rows with the same flash attention.")
    return "\n".join(lines)


def matrix_text(results: Sequence[CellResult], slo: Slo | None = None) -> str:
    """The CLI's matrix: one row per model and profile, one column per depth x concurrency
    cell holding per-request decode tok/s / aggregate tok/s (and goodput with an SLO)."""
    cols = sorted({(r.cell.depth, r.cell.concurrency) for r in results})
    rows = list(dict.fromkeys((r.cell.model, r.cell.profile) for r in results))
    get = {(r.cell.model, r.cell.profile, r.cell.depth, r.cell.concurrency): r for r in results}
    head = [f"d{_k(d)} c{c}" for d, c in cols]
    width = max([14] + [len(h) for h in head])
    label_w = max(12, *(len(f"{m} {p}") for m, p in rows)) if rows else 12
    out = [f"{'MODEL PROFILE':<{label_w}} " + " ".join(f"{h:>{width}}" for h in head)]
    for m, p in rows:
        cells = []
        for d, c in cols:
            r = get.get((m, p, d, c))
            if r is None:
                cells.append(f"{'':>{width}}")
                continue
            s = r.stats
            txt = f"{_n(s.decode_tps_per_request_median)}/{_n(s.throughput_tps)}"
            if slo is not None and s.goodput_pct is not None:
                txt += f" {s.goodput_pct:.0f}%"
            if s.extra.get("spec_acceptance_pct_total") is not None:
                txt += f" a{s.extra['spec_acceptance_pct_total']:.0f}%"
            if s.dnf:
                txt += " DNF"
            cells.append(f"{txt:>{width}}")
        out.append(f"{m + ' ' + p:<{label_w}} " + " ".join(cells))
    spec = acceptance_by_profile(results)
    out.append("cells: per-request decode tok/s (median) / aggregate tok/s" +
               (" goodput%" if slo is not None else "") + (" a<speculative acceptance>%" if spec else ""))
    for (m, p), (acc, length) in spec.items():
        out.append(f"speculative decoding {m} {p}: acceptance {acc:.1f}%"
                   + (f", {length:.2f} tokens per step" if length is not None else ""))
    return "\n".join(out)


def acceptance_by_profile(results: Sequence[CellResult]) -> dict[tuple[str, str], tuple[float, float | None]]:
    """Speculative-decoding acceptance per (model, profile), the median over its cells:
    structured output (JSON, code) drafts better than prose, and this is where it shows."""
    groups: dict[tuple[str, str], list[CellResult]] = {}
    for r in results:
        if r.stats.extra.get("spec_acceptance_pct_total") is not None:
            groups.setdefault((r.cell.model, r.cell.profile), []).append(r)
    out = {}
    for key, rs in groups.items():
        accs = [r.stats.extra["spec_acceptance_pct_total"] for r in rs]
        lens = [r.stats.extra["spec_accept_len_total"] for r in rs if r.stats.extra.get("spec_accept_len_total") is not None]
        out[key] = (statistics.median(accs), statistics.median(lens) if lens else None)
    return out


def _k(n: int) -> str:
    return f"{n // 1024}k" if n and n % 1024 == 0 else str(n)


def _n(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def result_from_record(params: dict, tags: dict, metrics: dict, run_id: str | None = None) -> CellResult | None:
    """A cell's result rebuilt from its recorded run (the spool's or MLflow's params, tags
    and summary metrics): the exports of a sweep that ended before it could print them."""
    if "sweep.cell" not in tags:
        return None
    known = set(CellStats.__dataclass_fields__) - {"extra"}
    st = CellStats(**{k: (int(v) if k in ("requests", "dnf", "queued", "ttft_n", "itl_n", "goodput_unmeasured")
                          else float(v))
                      for k, v in metrics.items() if k in known and v is not None})
    st.extra = {k: float(v) for k, v in metrics.items()
                if k in ("roofline_aggregate_pct", "spec_acceptance_pct_total", "spec_accept_len_total") and v is not None}
    cell = Cell(params.get("model", tags.get("model.name", "")), tags["sweep.profile"], int(tags["sweep.depth"]),
                int(tags["sweep.concurrency"]))
    depth = metrics.get("depth_tokens_measured")
    return CellResult(cell, st, run_id=run_id, depth_tokens=int(depth) if depth is not None else None,
                      roofline_pct=metrics.get("roofline_pct"), num_predict=int(params.get("num_predict", 0) or 0),
                      prompt_tokens=int(params["profile_prompt_tokens"]) if params.get("profile_prompt_tokens") else None)


# ---- a recorded sweep read back (the TUI's matrix and charts) ---------------------------------


@dataclass(frozen=True)
class SweepView:
    """One sweep as recorded: its cells rebuilt from their runs (profile, depth,
    concurrency, model order)."""

    sweep_id: str
    results: tuple[CellResult, ...]
    slo: str = ""  # the SLO's text as recorded ('' without one)
    engine: str = ""  # "kind version" of the first cell
    statuses: tuple[str, ...] = ()  # each cell run's status, as results

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(r.cell.model for r in self.results))

    @property
    def columns(self) -> list[tuple[str, int, int]]:
        """(profile, depth, concurrency) of every column, profiles in plan order."""
        profiles = list(dict.fromkeys(r.cell.profile for r in self.results))
        return sorted({(r.cell.profile, r.cell.depth, r.cell.concurrency) for r in self.results},
                      key=lambda c: (profiles.index(c[0]), c[1], c[2]))

    def get(self, model: str, column: tuple[str, int, int]) -> CellResult | None:
        for r in self.results:
            if r.cell.model == model and (r.cell.profile, r.cell.depth, r.cell.concurrency) == column:
                return r
        return None


def sweep_from_runs(sweep_id: str, runs: Sequence[dict]) -> SweepView:
    """The cells of one sweep from its runs (MLflow's run dicts: params, tags, metrics,
    run_id, start_time, status). Runs that are not cells are left out; a cell recorded twice
    (a replay) keeps its newest run."""
    ordered = sorted(runs, key=lambda r: (r.get("start_time") or 0, r.get("run_id") or ""))
    by_cell: dict[tuple, tuple[CellResult, dict]] = {}
    for run in ordered:
        r = result_from_record(run.get("params") or {}, run.get("tags") or {}, run.get("metrics") or {},
                               run.get("run_id"))
        if r is not None:
            by_cell[(r.cell.model, r.cell.key)] = (r, run)
    # every cell run of a sweep carries the sweep's start time: the order is rebuilt from
    # the cells themselves (models and profiles by name, depth and concurrency rising)
    pairs = sorted(by_cell.values(), key=lambda p: (p[0].cell.profile, p[0].cell.depth, p[0].cell.concurrency,
                                                    p[0].cell.model))
    first = pairs[0][1] if pairs else {}
    slo = (first.get("params") or {}).get("slo", "")
    tags = first.get("tags") or {}
    return SweepView(sweep_id, tuple(r for r, _ in pairs), "" if slo in ("", "none") else slo,
                     f"{tags.get('engine.kind', '')} {tags.get('engine.version', '')}".strip(),
                     tuple(str(run.get("status") or "") for _, run in pairs))


def heat_share(value: float | None, best: float | None) -> float | None:
    """A cell's decode tok/s as a share of its row's best (the heat-map's colour)."""
    if value is None or not best or best <= 0:
        return None
    return max(0.0, min(1.0, value / best))


def depth_series(results: Sequence[CellResult]) -> list[tuple[tuple[str, str, int], list[tuple[int, float | None]]]]:
    """Decode tok/s per request against depth: ((model, profile, concurrency), [(depth, tok/s)])."""
    groups: dict[tuple[str, str, int], dict[int, float | None]] = {}
    for r in results:
        groups.setdefault((r.cell.model, r.cell.profile, r.cell.concurrency), {})[r.cell.depth] = \
            r.stats.decode_tps_per_request_median
    return [(k, sorted(v.items())) for k, v in groups.items()]


def concurrency_series(results: Sequence[CellResult]) \
        -> list[tuple[tuple[str, str, int], list[tuple[int, float | None, float | None]]]]:
    """Aggregate throughput and per-request latency (TPOT ms, else ITL p50) against
    concurrency: ((model, profile, depth), [(concurrency, tok/s, ms per token)])."""
    groups: dict[tuple[str, str, int], dict[int, tuple[float | None, float | None]]] = {}
    for r in results:
        s = r.stats
        lat = s.tpot_ms_median if s.tpot_ms_median is not None else s.itl_ms_p50
        groups.setdefault((r.cell.model, r.cell.profile, r.cell.depth), {})[r.cell.concurrency] = (s.throughput_tps, lat)
    return [(k, [(c, t, lat) for c, (t, lat) in sorted(v.items())]) for k, v in groups.items()]


def depth_label(n: int) -> str:
    """4096 -> '4k' (the matrix's column heads)."""
    return _k(n)
