"""Time to the dashboard's first frame and peak RSS before MLflow is touched
(DESIGN.md budget: first frame with engine data <= 0.6 s; peak RSS <= 120 MB before MLflow).
Run: .venv/bin/python benchmarks/first_frame.py"""

from __future__ import annotations

import statistics

from tui_harness import run_dashboard


def main(runs: int = 5) -> None:
    results = [run_dashboard("first-frame") for _ in range(runs)]
    results = [r for r in results if r]
    ff = [r["first_frame_s"] for r in results]
    fd = [r["first_data_s"] for r in results if "first_data_s" in r]
    rss = [r["rss_first_frame_mb"] for r in results]
    rss_data = [r["rss_first_data_mb"] for r in results if "rss_first_data_mb" in r]
    mlflow = any(r["mlflow_imported"] for r in results)
    print(f"first frame: median {statistics.median(ff):.2f} s (min {min(ff):.2f}, max {max(ff):.2f}) over {len(ff)} runs")
    if fd:
        med = statistics.median(fd)
        print(f"first frame with engine data: median {med:.2f} s (min {min(fd):.2f}, max {max(fd):.2f})"
              f" ({'within' if med <= 0.6 else 'OVER'} the 0.6 s budget)")
    print(f"peak RSS at first frame: median {statistics.median(rss):.0f} MB, max {max(rss):.0f} MB"
          f"; at first data frame: max {max(rss_data or [0]):.0f} MB"
          f" ({'within' if max(rss_data or rss) <= 120 else 'OVER'} the 120 MB budget); mlflow imported: {mlflow}")


if __name__ == "__main__":
    main()
