"""A run's workload identity: everything two runs must share before their numbers compare.

One type, written by every producer (bench, sweep cell, eval, promotion, rollback) as
``workload.*`` tags, and matched by every consumer (compare, regressions, promotion
evidence, the re-bench key, charts). The rule it enforces is the one DESIGN.md calls "the
seams": a comparison pairs runs only when the whole identity matches, never a hand-picked
subset of it. A sweep's depth-2048/concurrency-2 cell is not a plain bench, a bench at
num_ctx 4096 is not one at 8192, and a GSM8K run scored under another prompt template or
rule version is not the same measurement.

Runs recorded before the identity existed carry no ``workload.*`` tags. Their identity is
read from what they did record, conservatively: a run with ``sweep.*`` tags is a sweep cell,
a promotion run whose action is ``rollback`` is a rollback, and anything the run did not
record is ``unrecorded`` (it then matches only other runs that did not record it either).
``recorded`` says which of the two an identity is; consumers say so in their notes.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

BENCH = "bench"
SWEEP_CELL = "sweep-cell"
EVAL = "eval"
PROMOTION = "promotion"
ROLLBACK = "rollback"
IMPORT = "import"  # a run written by something else than sparkctl's producers
SWEEP = "sweep"  # a sweep's parent run: what it asked and in which order; its cells hold the numbers
KINDS = (BENCH, SWEEP_CELL, EVAL, PROMOTION, ROLLBACK, IMPORT, SWEEP)
AIPERF = "aiperf"  # the profile of an import written by AIPerf's own MLflow exporter

UNRECORDED = "unrecorded"
TAG_PREFIX = "workload."
SCHEMA = "1"  # bump when a field is added, so readers know what an older run could not say
TAG_SCHEMA = TAG_PREFIX + "schema"


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Difference:
    """One field two identities disagree on, in words."""

    name: str  # the field
    label: str  # how a user calls it: "num_ctx", "sweep cell", "prompt sha256"
    a: str
    b: str

    def text(self, who_a: str = "", who_b: str = "") -> str:
        sa = f" ({who_a})" if who_a else ""
        sb = f" ({who_b})" if who_b else ""
        return f"{self.label} {self.a}{sa} vs {self.b}{sb}"


# field -> the label shown to users
_LABELS = {
    "kind": "kind", "profile": "profile", "depth": "depth", "concurrency": "concurrency",
    "cache_policy": "cache policy", "prompt_sha256": "prompt sha256", "template_sha256": "template sha256",
    "num_ctx": "num_ctx", "num_predict": "num_predict", "think": "think", "suite": "suite",
    "suite_sha256": "suite file sha256", "rule_version": "scoring rules",
}
_HASHES = ("prompt_sha256", "template_sha256", "suite_sha256")


@dataclass(frozen=True)
class WorkloadIdentity:
    """What a run measured, apart from which model and which engine.

    kind: one of KINDS. profile/depth/concurrency: a sweep cell's coordinates (a plain bench:
    "", 0, 1). cache_policy: "cold" or "warm" (benches and cells). prompt_sha256: the fixed
    prompt's (a cell: its profile prompt's, before the depth text, which is sized per model).
    template_sha256: a suite's prompt template (evals; "" where none is applied).
    num_ctx: the context the run actually ran at (a resident model's own, the server's).
    num_predict: the token ceiling. think: "true"/"false" as asked. suite, suite_sha256 and
    rule_version: what a quality run asked and how it scored the answers.

    Fields hold strings (tags are strings) so that an identity read back compares equal to
    the one written. ``recorded`` is False for an identity inferred from an older run; it
    takes no part in equality.
    """

    kind: str
    profile: str = ""
    depth: str = "0"
    concurrency: str = "1"
    cache_policy: str = ""
    prompt_sha256: str = ""
    template_sha256: str = ""
    num_ctx: str = ""
    num_predict: str = ""
    think: str = ""
    suite: str = ""
    suite_sha256: str = ""
    rule_version: str = ""
    recorded: bool = field(default=True, compare=False)

    # ---- building ------------------------------------------------------------------------

    @classmethod
    def bench(cls, *, prompt_sha256: str, num_ctx: int, num_predict: int, think: bool, cache_policy: str,
              profile: str = "", depth: int = 0, concurrency: int = 1) -> "WorkloadIdentity":
        kind = SWEEP_CELL if profile else BENCH
        return cls(kind, profile=profile, depth=str(int(depth)), concurrency=str(int(concurrency)),
                   cache_policy=cache_policy, prompt_sha256=prompt_sha256, num_ctx=str(int(num_ctx)),
                   num_predict=str(int(num_predict)), think=_bool(think))

    @classmethod
    def eval(cls, *, suite: str, suite_sha256: str, template_sha256: str, rule_version: str, num_ctx: int,
             num_predict: int, think: bool) -> "WorkloadIdentity":
        return cls(EVAL, num_ctx=str(int(num_ctx)), num_predict=str(int(num_predict)), think=_bool(think),
                   suite=suite, suite_sha256=suite_sha256, template_sha256=template_sha256,
                   rule_version=rule_version)

    @classmethod
    def lane_change(cls, action: str) -> "WorkloadIdentity":
        return cls(ROLLBACK if action == ROLLBACK else PROMOTION)

    # ---- tags ------------------------------------------------------------------------------

    def to_tags(self) -> dict[str, str]:
        out = {TAG_SCHEMA: SCHEMA}
        for f in fields(self):
            if f.name != "recorded":
                out[TAG_PREFIX + f.name] = str(getattr(self, f.name))
        return out

    @classmethod
    def from_run(cls, tags: Mapping[str, str], params: Mapping[str, str]) -> "WorkloadIdentity":
        """The identity a run recorded, or, for a run older than the identity, the one its
        other tags and params imply (``recorded`` False, unknown fields ``unrecorded``)."""
        if tags.get(TAG_SCHEMA):
            values = {f.name: str(tags.get(TAG_PREFIX + f.name, "")) for f in fields(cls) if f.name != "recorded"}
            values["kind"] = values["kind"] or _legacy_kind(tags)
            return cls(**values)
        return _legacy(tags, params)

    # ---- comparing -------------------------------------------------------------------------

    def differences(self, other: "WorkloadIdentity") -> list[Difference]:
        out = []
        for f in fields(self):
            if f.name == "recorded":
                continue
            a, b = getattr(self, f.name), getattr(other, f.name)
            if a != b:
                out.append(Difference(f.name, _LABELS[f.name], _show(f.name, a), _show(f.name, b)))
        if {d.name for d in out} & {"profile", "depth", "concurrency"}:
            # a cell's coordinates read best together (and say the kind: a cell or a plain bench)
            plain = {self.kind, other.kind} <= {BENCH, SWEEP_CELL}
            out = [d for d in out if d.name not in ("profile", "depth", "concurrency") and not (plain and d.name == "kind")]
            out.insert(0, Difference("cell", "sweep cell", self.cell or "plain bench", other.cell or "plain bench"))
        return out

    @property
    def cell(self) -> str:
        """A sweep cell's key ("prose/d2048/c2"); "" for anything else."""
        if self.kind != SWEEP_CELL:
            return ""
        return f"{self.profile}/d{self.depth}/c{self.concurrency}"

    def describe(self) -> str:
        """One line: what was measured, e.g. "bench, prompt 1a2b3c4d, num_ctx 8192, num_predict 512,
        think false, cold"."""
        if self.kind in (PROMOTION, ROLLBACK, IMPORT, SWEEP):
            return self.kind
        parts = [self.kind if self.kind != SWEEP_CELL else f"sweep cell {self.cell}"]
        if self.kind == EVAL:
            parts.append(self.suite or "?")
            parts.append(f"template {_show('template_sha256', self.template_sha256)}")
            parts.append(f"rules {self.rule_version or '-'}")
        else:
            parts.append(f"prompt {_show('prompt_sha256', self.prompt_sha256)}")
        parts.append(f"num_ctx {self.num_ctx or '?'}")
        parts.append(f"num_predict {self.num_predict or '?'}")
        parts.append(f"think {self.think or '?'}")
        if self.kind != EVAL:
            parts.append(self.cache_policy or "?")
        if not self.recorded:
            parts.append("(inferred: recorded before sparkctl kept the workload identity)")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def _shared_flags(self) -> list[str]:
        out = []
        if self.num_ctx and self.num_ctx != UNRECORDED:
            out += ["--ctx", self.num_ctx]
        if self.num_predict and self.num_predict != UNRECORDED:
            out += ["--num-predict", self.num_predict]
        if self.think == "false":
            out.append("--no-think")
        return out

    def bench_flags(self) -> list[str]:
        """`sparkctl bench` flags that reproduce this workload where the command line can say
        it (the prompt itself is named by its sha256 only)."""
        out = self._shared_flags()
        if self.cache_policy == "warm":
            out += ["--cache", "warm"]
        if self.kind == SWEEP_CELL:
            out += ["--profile", self.profile, "--depth", self.depth, "--concurrency", self.concurrency]
        return out

    def eval_flags(self) -> list[str]:
        """`sparkctl eval` flags for this workload (the suite first)."""
        return (["--suite", self.suite] if self.suite else []) + self._shared_flags()


def _bool(value: object) -> str:
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("true", "1", "yes", "on"):
            return "true"
        if v in ("false", "0", "no", "off"):
            return "false"
        return v or UNRECORDED
    return "true" if value else "false"


def _show(name: str, value: str) -> str:
    if not value:
        return "none"
    if name in _HASHES and value != UNRECORDED:
        return value[:12]
    return value


def _legacy_kind(tags: Mapping[str, str]) -> str:
    kind = (tags.get("sparkctl.kind") or "").strip().lower()
    if kind == PROMOTION:
        return ROLLBACK if (tags.get("promotion.action") or "").strip().lower() == ROLLBACK else PROMOTION
    if kind in KINDS:
        return kind
    if tags.get("aiperf.version"):
        return IMPORT  # AIPerf's run in the same experiment: another tool's measurement, never a bench
    if tags.get("sweep.id") or tags.get("sweep.cell"):
        return SWEEP_CELL
    return BENCH if not kind else IMPORT


def _legacy(tags: Mapping[str, str], params: Mapping[str, str]) -> WorkloadIdentity:
    kind = _legacy_kind(tags)

    def param(key: str) -> str:
        value = params.get(key)
        return str(value).strip() if value not in (None, "", "None") else UNRECORDED

    if kind in (BENCH, SWEEP_CELL):
        cache = (params.get("cache_policy") or tags.get("guard.cache_policy") or "").strip() or UNRECORDED
        cell = kind == SWEEP_CELL
        return WorkloadIdentity(
            kind, profile=tags.get("sweep.profile", "") if cell else "",
            depth=str(tags.get("sweep.depth") or "0") if cell else "0",
            concurrency=str(tags.get("sweep.concurrency") or "1") if cell else "1",
            # an older cell recorded its whole prompt (depth text sized per model included)
            cache_policy=cache, prompt_sha256=param("prompt_sha256"), num_ctx=param("num_ctx"),
            num_predict=param("num_predict"), think=_bool(params.get("think") or ""), recorded=False)
    if kind == EVAL:
        suite = (tags.get("eval.suite") or "").strip()
        return WorkloadIdentity(
            EVAL, num_ctx=param("num_ctx"), num_predict=param("num_predict"), think=_bool(params.get("think") or ""),
            suite=suite, suite_sha256=param("suite_sha256"),
            # IFEval prompts are sent as written; a GSM8K template was not recorded before
            template_sha256="" if suite == "ifeval" else UNRECORDED, rule_version=UNRECORDED, recorded=False)
    if kind == IMPORT and tags.get("aiperf.version"):
        return WorkloadIdentity(IMPORT, profile=AIPERF, concurrency=str(params.get("loadgen.concurrency") or "1"),
                                recorded=False)
    return WorkloadIdentity(kind, recorded=False)
