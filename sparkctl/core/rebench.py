"""Whether a lane model can be re-benched with the settings of its last run (the Runs
screen's B), and in words why not. The dashboard offers B only where B will run, and B says
the same words for the lanes it leaves out. Pure."""

from __future__ import annotations


def rebench_blocker(has_run: bool, spilled: bool) -> str:
    """Why B cannot re-bench a stale lane now, or "" when it can. `has_run`: the lane model
    has a valid bench on this engine kind to repeat; `spilled`: it is resident partly on the
    CPU, where a bench is refused for placement."""
    if spilled:
        return "spilled to the CPU: a bench is refused for placement until it is all on the GPU"
    if not has_run:
        return "never benched here: there is no earlier run to repeat"
    return ""
