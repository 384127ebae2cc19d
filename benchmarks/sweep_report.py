"""The tables of a workload sweep rebuilt from sparkctl's spool (JSONL records), for a sweep
run on another machine or one stopped before it printed: the matrix, the per-cell table with
roofline %, the depth falloff, the --json cells and llama.cpp-style Markdown.

    python benchmarks/sweep_report.py spool.jsonl [--status FINISHED,KILLED]
"""

from __future__ import annotations

import argparse
import json
import sys

from sparkctl.core.sweep import export_row, falloff_table, markdown_table, matrix_text, result_from_record


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("spool")
    args = ap.parse_args(argv)
    last: dict[str, dict] = {}
    for line in open(args.spool, encoding="utf-8"):
        d = json.loads(line)
        rec = d.get("record") or {}
        if "sweep.cell" in rec.get("tags", {}):
            last[rec["record_id"]] = rec  # the latest line of a record wins (journal, then final)
    results, status, identity, gpu = [], {}, {}, ""
    for rec in last.values():
        identity.setdefault(rec["params"].get("model", ""), {k: v for k, v in rec["tags"].items() if k.startswith("engine.")})
        gpu = gpu or rec["tags"].get("gpu.name", "")
        r = result_from_record(rec["params"], rec["tags"], rec["summary_metrics"], rec.get("record_id"))
        if r is not None and r.stats.requests:
            results.append(r)
            status[r.cell] = rec["status"]
    results.sort(key=lambda r: (r.cell.model, r.cell.profile, r.cell.depth, r.cell.concurrency))
    print(matrix_text(results))
    print()
    print(f"{'MODEL':<18} {'DEPTH':>6} {'C':>2} {'REQ':>4} {'DEC/req':>8} {'AGG':>7} {'PREFILL':>8} "
          f"{'TTFT p50':>8} {'p99':>7} {'ITL p50':>8} {'p99':>7} {'ROOF%':>6} {'AGG ROOF%':>9}  STATUS")
    for r in results:
        s = r.stats
        f = lambda x, sp=".1f": "-" if x is None else format(x, sp)  # noqa: E731
        print(f"{r.cell.model:<18} {r.cell.depth:>6} {r.cell.concurrency:>2} {s.requests:>4} "
              f"{f(s.decode_tps_per_request_median):>8} {f(s.throughput_tps):>7} {f(s.prefill_tps_median, '.0f'):>8} "
              f"{f(s.ttft_s_p50, '.2f'):>8} {f(s.ttft_s_p99, '.2f'):>7} {f(s.itl_ms_p50):>8} {f(s.itl_ms_p99):>7} "
              f"{f(r.roofline_pct, '.0f'):>6} {f(s.extra.get('roofline_aggregate_pct') if s.extra else None, '.0f'):>9}"
              f"  {status[r.cell]}")
    print()
    print(falloff_table(results, identity, gpu))  # the flash-attention rerun's table goes here (docs/sweeps.md)
    print()
    print(markdown_table(results, backend="CUDA"))
    print()
    print(json.dumps({"cells": [export_row(r, False) for r in results]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
