"""llama-benchy's --emit-progress stream read into requests and cells (issue 31 point 5). The
streams are written by tests/benchy_stream.py from the published schema; the expected figures
are worked out here from the made-up timings, not with sparkctl's own functions."""

from __future__ import annotations

import json

import pytest

from sparkctl.core import benchy_progress as bp
from tests.benchy_stream import GAP, Plan, lines, ttft_of


def read(text_lines) -> bp.ProgressState:
    state = bp.ProgressState()
    for line in text_lines:
        state.feed_line(line)
    return state


def test_requests_cells_and_per_request_figures_follow_the_schema():
    plan = Plan(cells=((0, 1), (4096, 2)), runs=2, tg=6)
    state = read(lines(plan))
    assert state.version == "0.4.0" and state.latency_s == 0.002 and state.status == "ok"
    cells = state.cells()
    assert [(c.depth, c.concurrency, len(c.requests)) for c in cells] == [(0, 1, 2), (4096, 2, 4)]
    r = cells[1].requests[1]  # depth 4096, run 0, slot 1
    assert r.ttft_s == pytest.approx(ttft_of(4096, 0, 1))
    # llama-benchy's tg per request: (tokens - 1) / decode_seconds
    assert r.decode_tps == pytest.approx((6 - 1) / ((6 - 1) * GAP + 0.001), rel=1e-3)
    # its est_ppt: prompt tokens over (ttfr - latency)
    assert r.prefill_tps(state.latency_s) == pytest.approx((2048 + 4096) / (ttft_of(4096, 0, 1) - 0.001 - 0.002))
    assert r.tpoc_s == pytest.approx(GAP, rel=1e-3) and r.ttfc_s == pytest.approx(ttft_of(4096, 0, 1) - 0.001)
    assert not any(x.context_phase for c in cells for x in c.requests)


def test_prefix_caching_runs_mark_their_context_loading_requests():
    state = read(lines(Plan(cells=((4096, 2),), runs=2, prefix_caching=True)))
    (cell,) = state.cells()
    assert len(cell.requests) == 8
    # each run: the first two requests loaded the context, the next two were measured
    assert [r.context_phase for r in cell.requests] == [True, True, False, False] * 2


def test_other_schemas_unknown_types_and_an_unfinished_stream():
    text = lines(Plan(cells=((0, 1),), runs=1), complete=False)
    other = json.dumps({"schema": "llama-benchy-progress.v2", "type": "header", "ts": 1.0}) + "\n"
    unknown = json.dumps({"schema": bp.SCHEMA, "type": "gpu_sample", "ts": 2.0, "util": 99}) + "\n"
    state = read([other, *text[:3], unknown, "not json\n", *text[3:]])
    assert state.skipped == 2 and state.status is None and not state.complete
    assert [len(c.requests) for c in state.cells()] == [1]
    assert bp.looks_like_stream(text[0]) and not bp.looks_like_stream("model,test_name,t_s_mean")


def test_every_string_of_the_stream_loses_its_escape_sequences():
    """The file is another program's: what it says reaches the terminal (CLI and Bench screen)."""
    osc = "\x1b]0;PWNED\x07"
    text = lines(Plan(model=f"evil{osc}", cells=((0, 1),), runs=1, tg=2))
    text = [line.replace('"0.4.0"', json.dumps(f"0.4{osc}")).replace('"http://127.0.0.1:8080/v1"',
                                                                    json.dumps(f"http://h{osc}/v1"))
            .replace('"error":""', '"error":' + json.dumps(f"boom{osc}\nline 2"))
            .replace('" w1"', json.dumps(f" w1{osc}\x1b[2J")) for line in text]
    state = read(text)
    (r,) = state.requests.values()
    assert (r.model, r.base_url, r.error, r.snippet, state.version) == ("evil", "http://h/v1", "boom line 2", " w1",
                                                                       "0.4")
    assert [c.model for c in state.cells()] == ["evil"]
