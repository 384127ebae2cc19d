"""Runs the real dashboard (real probes, real Ollama adapter) in a terminal for the
benchmark scripts; not a user entry point. argv: RESULT_FILE ENGINE_URL MODE [SECONDS]

MODE first-frame: write the time to the first painted frame (Textual's Ready event) and
to the first frame with data, with peak RSS, then exit. MODE idle: stay up SECONDS.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time

T0 = float(os.environ["SPARKCTL_BENCH_T0"])  # the parent's clock just before spawning us

from sparkctl.config import load_config  # noqa: E402
from sparkctl.tui.app import SparkApp, make_app  # noqa: E402


def main() -> None:
    result_file, engine_url, mode = sys.argv[1:4]
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    os.environ["OLLAMA_HOST"] = engine_url
    cfg = load_config(None)
    marks: dict = {}

    class Measured(SparkApp):
        def on_ready(self) -> None:
            marks["first_frame_s"] = time.time() - T0
            marks["rss_first_frame_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            marks["mlflow_imported"] = "mlflow" in sys.modules
            if mode == "idle":
                self.set_timer(seconds, self.exit)

        def watch_report(self, report) -> None:
            if report is not None and report.engine.reachable and "first_data_s" not in marks:
                marks["first_data_s"] = time.time() - T0
                marks["rss_first_data_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                if mode == "first-frame":
                    self.call_after_refresh(self.exit)

    base = make_app(cfg, recorder=lambda r: None)
    app = Measured(cfg, base.engine, base.probes, recorder=base.recorder, user_theme_dir=base.user_theme_dir)
    profile_to = os.environ.get("SPARKCTL_BENCH_PROFILE")
    if profile_to:  # where the idle CPU goes: python -m pstats FILE
        import cProfile

        cProfile.runctx("app.run()", globals(), {"app": app}, profile_to)
    else:
        app.run()
    marks["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with open(result_file, "w") as fh:
        json.dump(marks, fh)


if __name__ == "__main__":
    main()
