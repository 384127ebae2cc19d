"""Start an app for the benchmark harness the way a user does, and note on exit what only
the process itself can say. Not a user entry point.

    python _launch.py sparkctl [ARGS...]   # sparkctl.cli.main(ARGS): the `sparkctl` command
    python _launch.py bare                 # a bare Textual app: one Static (the reference)

With $SPARKCTL_BENCH_MARKS set, the process writes there at exit, as JSON: whether
`mlflow` was ever imported, peak RSS, and the number of modules loaded. With
$SPARKCTL_BENCH_PROFILE set, the main thread runs under cProfile and its statistics go to
that file (read them with `python -m pstats FILE`).
"""

from __future__ import annotations

import atexit
import json
import os
import resource
import sys

BARE_TEXT = "bare textual app"  # what the harness waits for on the bare app's first frame


def _marks() -> None:
    path = os.environ.get("SPARKCTL_BENCH_MARKS")
    if path:
        with open(path, "w") as fh:
            json.dump({"mlflow_imported": "mlflow" in sys.modules, "modules": len(sys.modules),
                       "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}, fh)


def main() -> int:
    atexit.register(_marks)
    what, args = sys.argv[1], sys.argv[2:]
    if what == "bare":
        from textual.app import App
        from textual.widgets import Static

        class Bare(App):
            def compose(self):
                yield Static(BARE_TEXT)

        Bare().run()
        return 0
    from sparkctl.cli import main as sparkctl_main

    return sparkctl_main(args)


if __name__ == "__main__":
    profile_to = os.environ.get("SPARKCTL_BENCH_PROFILE")
    if profile_to:
        import cProfile

        profiler = cProfile.Profile()
        atexit.register(lambda: profiler.dump_stats(profile_to))
        sys.exit(profiler.runcall(main))
    sys.exit(main())
