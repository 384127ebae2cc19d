"""What each screen shows, for the help screen (`?`): its columns and where the data comes
from. The keys are not written here: the help screen reads them from the bindings that are
active, so they cannot drift from what the keys do. Keyed by screen class name."""

from __future__ import annotations

HELP: dict[str, str] = {
    "DashboardScreen": """\
**The dashboard**: the memory budget, what is loaded, the engine, the GPU and memory pressure,
sampled every `[ui] refresh_s` in worker threads.

- **Memory budget**: unified memory (on a GB10) or VRAM split into lane models (their lane's
  colour), other resident models, other use, reclaimable page cache, and the headroom left
  above `[budget] reserve_gib`. From /proc/meminfo (MemTotal, MemAvailable + SwapFree) and
  the engine's `/api/ps`.
- **Resident models** (`/api/ps`): *Lane* the role from `[lanes]`; *Size* what the engine
  reports loaded (weights + KV cache + compute graph); *Processor* GPU/CPU split from
  size_vram vs size; *Context* num_ctx it was loaded with; *Until* when its keep-alive ends.
- **Engine**: reachable or not, its version, and how the host was chosen.
- **GPU** (NVML): utilisation, temperature, power, SM clock, throttle reasons. On a GB10
  NVML has no memory figures; the budget comes from /proc/meminfo.
- **Memory pressure** (PSI, /proc/pressure/memory): stall share over 10 s and 60 s.
- Warnings under the resident models, one line each (the rows come first; what does not
  fit whole is counted in a last line, and `N` shows every warning whole, then the
  messages): in red, models a bench that died (or whose restore failed) did not put back;
  the dashboard only shows them (views only read), `P` puts them back (as `sparkctl lanes
  --restore` does), and a bench started here does it first. In yellow, lanes spilled to the
  CPU (decode bound by host memory), lanes to bench again with the key that does it:
  `(h then B)` re-benches a lane last benched on another engine version with the settings
  of that run, `(b)` a lane never benched here is benched from the Bench screen,
  `(spilled: not now)` a bench would be refused until the lane is all on the GPU; lanes not
  resident.
""",
    "ModelsScreen": """\
**Models**: the engine's local models (`/api/tags`, `/api/show`).

- *Size* on disk; *Family*, *Params*, *Quant* from the model's metadata; *Context* its
  trained context; *Can* capabilities (tools, thinking, vision); *Lane* its role from
  `[lanes]`, or *contender* for a model loaded from this screen (until promoted or
  unloaded); *Loaded* whether `/api/ps` lists it.
- Fit (`f`) asks for a context (blank: `[models] num_ctx`, else the engine's choice), then
  estimates the resident size (weights + KV cache + overhead, from `/api/show` model_info)
  and judges it against the budget with the lanes still loaded; a load that would
  evict a lane model or plan below the reserve is refused unless forced (`L`, offered
  only where forcing could work).
- Load (`l`) asks for a context and a keep-alive, side-loads beside what is resident and
  verifies placement from `/api/ps` and NVML. The keep-alive is kept in sparkctl's state
  file: a bench that has to reload the model puts it back with it. `escape` closes the
  result and pull panels.
- Would it fit (`w`): name any model, pulled or not; its fit here from its registry (the
  manifest and the GGUF header, a few kB). Nothing is pulled.
""",
    "BenchScreen": """\
**Bench**: a fixed prompt at temperature 0 and a fixed seed, a warm-up, then interleaved
repetitions; each run lands in MLflow (spooled first) with the engine version, placement
and GPU state.

- *decode tok/s*: the engine's eval_count / eval_duration, median over repetitions, with
  min, max and CV; *client*: the same measured by sparkctl from the stream.
- *prefill*: prompt tokens per second, from cold requests only (every request starts
  differently, so no prompt-cache hit inflates it); *TTFT*: first token, client clock.
- *load s*: load_duration; a reload after the warm-up is flagged.
- *DNF*: repetitions past the ceiling (`[bench] timeout_s`).
- *verdict*: stable (CV < 5%), unstable, or INVALID (not 100% GPU, cached prefill,
  foreign load, throttled...).
- *num_ctx* (settings): empty runs every model at one context, chosen for them: the one a
  resident lane model among them runs at (or, for a contender, the one the lane model it is
  compared with runs at), else `[bench] num_ctx`; the settings line says which before the
  run, and what runs (its kind and context) while it runs.
- *sweep* mode (the picker left of the models, or `w`): Run becomes "Run sweep" and the
  sweep's fields show (profiles, depths, concurrency, SLO, as the CLI's flags); one run per
  cell, and the matrix opens at the end. In bench mode the sweep fields are not used.
- *notes* (under the summary): refusals, warnings and each run's flags with what they mean
  for the numbers, whole; `enter` on a run or `n` opens them on a whole screen.
- `f` follows a llama-benchy run: give the file of its `--emit-progress`; the gauges move
  with its requests as they stream, and at its `bench_complete` (or `escape`) the run is
  recorded, kind import, each request a step (Runs screen).
- *solo* (settings): every other model is unloaded for the bench (a `SOLO` badge shows
  beside Run); Run first asks, naming each model it unloads and for about how long. After
  the run the switch returns to `[bench] mode`.
- After any ending, the engine holds what it held before: models the bench loaded are
  unloaded, the ones it unloaded are put back (context and keep-alive) and verified; the
  line under the summary says what was done (`residency after the bench`).
""",
    "RunsScreen": """\
**Runs**: past runs from MLflow (`[tracking] uri`), newest first, 100 at a time (`n` for
more), read in a worker thread.

- *tok/s*, *CV%*, *TTFT s*, *prefill*: the bench's medians; *J/tok* energy per token from
  NVML power; *roof%* decode against the memory-bandwidth ceiling; *score%* an eval's
  headline accuracy (GSM8K strict, IFEval prompt-level strict).
- *Flags*: invalid, placement, dnf=N, throttled, reload, prefill-cached, foreign-load,
  truncated, cache=warm, lane-restore-failed, recovered.
- Enter opens a run (repetitions, guards, GPU samples, output or items); `c` charts the
  selected model across engine versions; `space` marks models and `v` compares them with
  95% intervals (at 80 columns one line per metric, `w` the whole tables; `b` benches a pair
  measured at two contexts at one, `e` evaluates the contender again at the incumbent's
  context and sample); `B` re-benches lane models last benched on another engine version; `R`
  lists engine-change regressions (as `sparkctl regressions`); `P` promotes; `M` shows the
  workload sweep the selected run is a cell of (matrix and charts). The chart (`c`) adds the
  model's time to first chunk by its OpenTelemetry name, AIPerf's runs in the experiment beside
  sparkctl's.
""",
    "EvalScreen": """\
**Eval**: GSM8K or IFEval on one or more models, the same sampled items for each, scored by
the references' rules (lm-evaluation-harness for GSM8K, Google's instruction_following_eval
for IFEval) on the final answer, never the thinking.

- The grid: one cell per item: pass, wrong, DNF (past `[eval] timeout_s`, counted apart
  from wrong answers), engine error.
- Accuracy over all items (DNF = not passed) with its 95% Wilson interval; the same over
  answered items only is in the results table and MLflow.
- *ctx*: empty runs every model at one context, chosen as on the Bench screen (its value in
  the field until one is typed), so a contender's run pairs with the lane model's.
- Refusals, failures and each run's guard flags are in the notes under the results (`n`
  opens them whole), why a run did not happen first.
- `s` scores a file of saved responses (JSONL, one `{"prompt", "response"}` a line) against
  a suite, as `sparkctl eval score`: no model runs and nothing is recorded.
- Each eval talks to the engine with a read timeout of the item ceiling times the
  concurrency (plus a minute), as the CLI does: a queued item is not cut short by the
  dashboard's shorter one.
""",
    "FleetScreen": """\
**Fleet**: one row per host (`[hosts.NAME]`, or `[fleet] ssh_hosts` names from the ssh
config), each read with the system's `ssh` running `sparkctl status --json` there, every
`[fleet] refresh_s`, one ssh session per host at a time, at most `[fleet] timeout_s` each.

- *State*: live; engine-down / engine-error (the host answered, its engine did not);
  unreachable, with why: ssh's own error, sparkctl missing there, too old, no answer in time.
- *Memory*: available / total, and the headroom above that host's reserve.
- *Models*: resident models with their lane (the host's `[lanes]`, or `[hosts.NAME.lanes]`)
  and any CPU share; *Warnings*: lanes not resident, lanes spilled off the GPU, the engine
  changed since a lane's last bench (from the tracking store), an older sparkctl there.
- *Seen*: "now", or the age of the last known state of a host that does not answer.
- Enter opens that host's dashboard, read-only.
""",
    "HostDashboardScreen": """\
**A host's dashboard, read-only**: what that host's own `sparkctl status --json` says
(budget, resident models, engine, GPU, pressure), refreshed by the fleet every
`[fleet] refresh_s`. The histories start when the view opens. Nothing here changes the host:
ssh in and run `sparkctl` there to act.
""",
}


def help_for(screen_name: str) -> str:
    return HELP.get(screen_name, "")
