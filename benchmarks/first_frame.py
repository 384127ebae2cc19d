"""Time to the dashboard's first frame with engine data, as a ratio to a bare Textual app
measured in the same run (goal: within 1.5x). Runs alternate between the two apps, so a
busy machine slows both alike; min and median of each are printed.

Measured from outside (benchmarks/tui_harness.py): the `sparkctl` command in a 140x45
pseudo-terminal beside a FAKE Ollama; "first frame with engine data" is the moment the
first resident model's name reaches the terminal, the bare app's first frame the moment
its one Static's text does. Run: .venv/bin/python benchmarks/first_frame.py [RUNS]
"""

from __future__ import annotations

import statistics
import sys

from tui_harness import BARE_TEXT, FIRST_MODEL, SPARKCTL_FIRST_FRAME, AppRun, fake_engine

GOAL_RATIO = 1.5


def once(what: str, url: str) -> tuple[float | None, float | None, dict, float, float]:
    run = AppRun(what, url).start()
    try:
        if what == "bare":
            first = data = run.wait_for(BARE_TEXT)
        else:
            first = run.wait_for(SPARKCTL_FIRST_FRAME)
            data = run.wait_for(FIRST_MODEL)
        cpu = run.cpu_s()  # CPU seconds to that frame: a busy machine stretches it less than wall time
        rss = run.rss_mb()
    finally:
        marks = run.quit()
    return first, data, marks, rss, cpu


def main(runs: int = 7) -> int:
    server = fake_engine()
    bare: list[float] = []
    frame: list[float] = []
    data: list[float] = []
    rss: list[float] = []
    cpu_bare: list[float] = []
    cpu_data: list[float] = []
    mlflow = False
    try:
        once("bare", server.url)  # warm-up, not counted: bytecode caches written, files in the page cache
        once("sparkctl", server.url)
        for _ in range(runs):
            b, _, _, _, cb = once("bare", server.url)
            f, d, marks, r, cd = once("sparkctl", server.url)
            if b is None or d is None:
                print(f"a run did not finish (bare {b}, sparkctl data {d})", file=sys.stderr)
                continue
            bare.append(b)
            frame.append(f)
            data.append(d)
            rss.append(r)
            cpu_bare.append(cb)
            cpu_data.append(cd)
            mlflow |= bool(marks.get("mlflow_imported"))
    finally:
        server.stop()
    if not data:
        print("first frame: no run finished")
        return 1
    ratio_med = statistics.median(data) / statistics.median(bare)
    ratios = sorted(d / b for d, b in zip(data, bare))

    def ms(xs):
        return f"min {min(xs) * 1000:.0f} ms, median {statistics.median(xs) * 1000:.0f} ms"

    print(f"bare Textual app, first frame:       {ms(bare)} ({len(bare)} runs, alternating)")
    print(f"sparkctl dashboard, first frame:     {ms(frame)}")
    print(f"sparkctl, first frame with engine data: {ms(data)}; RSS then {statistics.median(rss):.0f} MB; "
          f"mlflow imported: {mlflow}")
    print(f"CPU to that frame: sparkctl {ms(cpu_data)}, bare {ms(cpu_bare)}: median "
          f"{statistics.median(cpu_data) / statistics.median(cpu_bare):.2f}x")
    print(f"first frame with engine data / bare first frame: median {ratio_med:.2f}x "
          f"(per pair min {ratios[0]:.2f}x, median {statistics.median(ratios):.2f}x) - goal <= {GOAL_RATIO}x: "
          f"{'MET' if ratio_med <= GOAL_RATIO else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 7))
