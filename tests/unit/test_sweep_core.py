"""Pure sweep logic: the plan, a cell's numbers, the exports and the depth text."""

from __future__ import annotations

import csv
import io
import json

import pytest

from sparkctl.core import depthtext
from sparkctl.core.latency import Slo
from sparkctl.core.sweep import (EXPORT_KEYS, Cell, CellResult, RequestSample, cell_stats, export_row, falloff,
                                 markdown_table, parse_int_list, plan, result_from_record, to_csv)


def test_depth_and_concurrency_lists():
    assert parse_int_list("32k,0,4k,16k,4096", "--depth") == [0, 4096, 16384, 32768]
    with pytest.raises(ValueError, match="--concurrency"):
        parse_int_list("0", "--concurrency", 1)
    with pytest.raises(ValueError, match="whole number"):
        parse_int_list("4x", "--depth")


def test_plan_interleaves_models_inside_each_cell_group():
    cells = plan(["a", "b"], ["prose"], [0, 4096], [1, 2])
    assert [(c.model, c.depth, c.concurrency) for c in cells[:4]] == [("a", 0, 1), ("b", 0, 1), ("a", 0, 2), ("b", 0, 2)]
    assert len(cells) == 8 and cells[-1] == Cell("b", "prose", 4096, 2)


def _sample(rnd, sent, ended, ttft, tokens, finished=True):
    return RequestSample(round=rnd, sent=sent, ended=ended, ttft_s=ttft, tpot_s=0.02, decode_tps=50.0,
                         prefill_tps=1000.0, eval_count=tokens, chunk_gaps_s=(0.01, 0.03), finished=finished)


def test_cell_numbers_throughput_over_round_wall_time_and_goodput():
    samples = [_sample(0, 0.0, 2.0, 0.5, 100), _sample(0, 0.0, 4.0, 1.5, 100),
               _sample(1, 10.0, 12.0, 0.4, 50), _sample(1, 10.0, 11.0, 3.0, 0, finished=False)]
    st = cell_stats(samples, Slo(ttft_s=1.0))
    assert st.throughput_tps == pytest.approx(250 / 6.0)  # rounds of 4 s and 2 s
    assert st.requests == 4 and st.dnf == 1
    assert st.ttft_s_p50 == pytest.approx(0.5)  # finished requests only: 0.4, 0.5, 1.5
    assert st.itl_ms_p50 == pytest.approx(20.0)
    assert st.goodput_pct == 50.0  # 0.5 and 0.4 meet; 1.5 misses; the DNF never meets


def test_export_has_exactly_the_issue_keys():
    r = CellResult(Cell("m", "prose", 0, 1), cell_stats([_sample(0, 0, 1, 0.2, 10)], Slo(ttft_s=1)), run_id="x")
    assert tuple(export_row(r, True)) == EXPORT_KEYS
    assert "goodput_pct" not in export_row(r, False)
    rows = list(csv.DictReader(io.StringIO(to_csv([r], True))))
    assert tuple(rows[0]) == EXPORT_KEYS and rows[0]["run_id"] == "x"
    json.dumps(export_row(r, True))


def test_markdown_in_llama_bench_form_and_falloff():
    def res(depth, tg, pp):
        s = cell_stats([_sample(0, 0, 1, 0.2, 10)])
        s.decode_tps_per_request_median, s.decode_tps_per_request_stdev = tg, 0.5
        s.prefill_tps_median, s.prefill_tps_stdev = pp, None
        return CellResult(Cell("gpt-oss-20b", "prose", depth, 1), s, prompt_tokens=2048, num_predict=32)

    rs = [res(0, 84.1, 3783.0), res(32768, 59.9, 1899.0)]
    md = markdown_table(rs, backend="CUDA")
    assert "| gpt-oss-20b | prose | CUDA | pp2048 | 3783.00 |" in md
    assert "| gpt-oss-20b | prose | CUDA | tg32 @ d32768 | 59.90 ± 0.50 |" in md
    assert falloff(rs)[("gpt-oss-20b", "prose")] == pytest.approx(59.9 / 84.1)


def test_result_rebuilt_from_a_record():
    r = result_from_record({"model": "m", "num_predict": "32", "profile_prompt_tokens": "120"},
                           {"sweep.cell": "prose/d0/c2", "sweep.profile": "prose", "sweep.depth": "0",
                            "sweep.concurrency": "2"},
                           {"requests": 2.0, "throughput_tps": 90.0, "roofline_pct": 17.0, "decode_tps_median": 1.0})
    assert r.cell == Cell("m", "prose", 0, 2) and r.stats.requests == 2 and r.stats.throughput_tps == 90.0
    assert r.prompt_tokens == 120 and r.roofline_pct == 17.0
    assert result_from_record({}, {}, {}) is None


def test_depth_text_is_deterministic_varied_and_sized():
    a = depthtext.depth_text(20000)
    assert a == depthtext.depth_text(20000) and 19000 < len(a) <= 20000
    sentences = [s for s in a.replace("\n", " ").split(". ") if s]
    assert len(set(sentences)) > 0.9 * len(sentences)  # not one sentence repeated
    assert depthtext.depth_text(0) == "" and depthtext.text_for_tokens(0, 4.0) == ""
    assert depthtext.chars_per_token(4000, 1100, 100) == 4.0
    assert depthtext.chars_per_token(4000, 100, 100) is None
    assert depthtext.depth_check(4096, 4200) == "" and "+20%" in depthtext.depth_check(4096, 4915)
