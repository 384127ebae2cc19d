"""The workload identity (sparkctl/core/workload.py): what two runs must share, read back
from tags the producers write and, for runs older than it, from what they did record."""

from sparkctl.core.workload import BENCH, EVAL, ROLLBACK, SWEEP_CELL, UNRECORDED, WorkloadIdentity

PLAIN_PARAMS = {"prompt_sha256": "ab" * 32, "num_ctx": "8192", "num_predict": "512", "think": "False",
                "cache_policy": "cold"}


def test_tags_round_trip_to_an_equal_identity():
    cell = WorkloadIdentity.bench(prompt_sha256="cd" * 32, num_ctx=4096, num_predict=128, think=True,
                                  cache_policy="cold", profile="prose", depth=2048, concurrency=2)
    back = WorkloadIdentity.from_run(cell.to_tags(), {})
    assert back == cell and back.recorded and back.kind == SWEEP_CELL and back.cell == "prose/d2048/c2"


def test_a_sweep_cell_is_never_a_plain_bench_with_the_same_settings():
    """Issue 18 point 1: cells carried no kind of their own and 'same settings' left out
    profile, depth and concurrency. The identities differ, and the difference is named."""
    plain = WorkloadIdentity.bench(prompt_sha256="ab" * 32, num_ctx=8192, num_predict=512, think=False,
                                   cache_policy="cold")
    c8 = WorkloadIdentity.bench(prompt_sha256="ab" * 32, num_ctx=8192, num_predict=512, think=False,
                                cache_policy="cold", profile="prose", depth=0, concurrency=8)
    assert plain != c8
    (diff,) = plain.differences(c8)
    assert diff.text("plain", "sweep") == "sweep cell plain bench (plain) vs prose/d0/c8 (sweep)"


def test_runs_recorded_before_the_identity_are_mapped_conservatively():
    # a plain bench: everything it needs was recorded as params
    old = WorkloadIdentity.from_run({"model.name": "qwen3:8b"}, PLAIN_PARAMS)
    assert old.kind == BENCH and not old.recorded
    assert old == WorkloadIdentity.bench(prompt_sha256="ab" * 32, num_ctx=8192, num_predict=512, think=False,
                                         cache_policy="cold")  # so it still pairs with a new one
    # an old sweep cell had only its sweep.* tags: a cell, with its coordinates
    cell = WorkloadIdentity.from_run({"sweep.id": "x", "sweep.cell": "prose/d0/c8", "sweep.profile": "prose",
                                      "sweep.depth": "0", "sweep.concurrency": "8"}, PLAIN_PARAMS)
    assert cell.kind == SWEEP_CELL and cell.cell == "prose/d0/c8"
    # an old GSM8K eval: its template and rules were not recorded; they match nothing recorded
    ev = WorkloadIdentity.from_run({"sparkctl.kind": "eval", "eval.suite": "gsm8k"},
                                   {"num_ctx": "8192", "num_predict": "4096", "think": "True", "suite_sha256": "ff"})
    assert ev.kind == EVAL and ev.template_sha256 == UNRECORDED and ev.rule_version == UNRECORDED
    assert "template sha256" in {d.label for d in ev.differences(WorkloadIdentity.eval(
        suite="gsm8k", suite_sha256="ff", template_sha256="00" * 32, rule_version="r", num_ctx=8192,
        num_predict=4096, think=True))}
    # a rollback was recorded as a promotion run with its action
    back = WorkloadIdentity.from_run({"sparkctl.kind": "promotion", "promotion.action": "rollback"}, {})
    assert back.kind == ROLLBACK
    # nothing recorded at all: no crash, a bench with unrecorded settings
    bare = WorkloadIdentity.from_run({}, {})
    assert bare.kind == BENCH and bare.num_ctx == UNRECORDED and "inferred" in bare.describe()


def test_the_context_difference_is_named_with_the_command_flags():
    """Issue 18 point 2: "not like for like" with a generic list instead of the setting."""
    a = WorkloadIdentity.bench(prompt_sha256="ab" * 32, num_ctx=8192, num_predict=512, think=False,
                               cache_policy="cold")
    b = WorkloadIdentity.bench(prompt_sha256="ab" * 32, num_ctx=4096, num_predict=512, think=False,
                               cache_policy="cold")
    assert [d.text("A", "B") for d in a.differences(b)] == ["num_ctx 8192 (A) vs 4096 (B)"]
    assert a.bench_flags() == ["--ctx", "8192", "--num-predict", "512", "--no-think"]
