"""CPU use of the idle dashboard at 1 s refresh over 60 s (DESIGN.md budget: <= 1% of one core).
Run: .venv/bin/python benchmarks/idle_cpu.py [SECONDS]"""

from __future__ import annotations

import sys
import time

import psutil
from tui_harness import run_dashboard


def main(window: float = 60.0) -> None:
    warmup = 5.0
    box: dict = {}

    def measure(proc):
        p = psutil.Process(proc.pid)
        time.sleep(warmup)
        c0 = sum(p.cpu_times()[:2])
        t0 = time.monotonic()
        box["start"] = (p, c0, t0)
        box["threads0"] = {t.id: t.user_time + t.system_time for t in p.threads()}

    import threading

    def sampler(proc):
        threading.Thread(target=measure, args=(proc,), daemon=True).start()

    def finish():
        p, c0, t0 = box["start"]
        c1 = sum(p.cpu_times()[:2])
        before = box["threads0"]
        box["threads"] = sorted(((t.user_time + t.system_time - before.get(t.id, 0.0)) for t in p.threads()),
                                reverse=True)
        return (c1 - c0) / (time.monotonic() - t0) * 100

    usage = {}

    def on_start(proc):
        sampler(proc)

        def stopper():
            time.sleep(warmup + window)
            try:
                usage["pct"] = finish()
            except psutil.NoSuchProcess:
                pass

        threading.Thread(target=stopper, daemon=True).start()

    run_dashboard("idle", seconds=warmup + window + 1, on_start=on_start)
    pct = usage.get("pct")
    if pct is None:
        print("idle CPU: could not measure (the app exited early)")
        return
    per_thread = ", ".join(f"{t / window * 100:.2f}%" for t in box.get("threads", [])[:4])
    print(f"idle dashboard CPU at 1 s refresh: {pct:.2f}% of one core over {window:.0f} s "
          f"({'within' if pct <= 1.0 else 'OVER'} the 1% budget); busiest threads: {per_thread}")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 60.0)
