"""When a drifting figure is worth a repaint.

Memory in 0.1 GiB and pressure in 0.1 % move by a step most seconds on a box that is
doing anything (page cache comes and goes), and each repaint costs the dashboard a
millisecond or two of Textual's rendering: at a 1 s refresh that alone was most of its
idle CPU. A figure is repainted at once when what it says changes in kind (a level, a
model, a warning) or moves far; a small drift waits, at most ``every_s`` seconds, and is
then shown as it stands. The samples themselves still arrive every refresh.

The wait ends at the next multiple of ``every_s`` on the monotonic clock, the same for
every gate, rather than ``every_s`` after each figure's own last repaint: the drifts of the
budget bar, the pressure panel and the history's label then reach the screen in one frame
instead of three frames a second or two apart (each frame costs Textual's compositor a
few ms whatever it holds). A drift still waits at most ``every_s``.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence

FIGURE_EVERY_S = 5.0


class DriftGate:
    def __init__(self, far: float, every_s: float = FIGURE_EVERY_S) -> None:
        self.far = far  # a move this large is shown at once
        self.every_s = every_s
        self._shown: tuple[Hashable, tuple[float, ...]] | None = None
        self._at = 0.0

    def due(self, kind: Hashable, figures: Sequence[float]) -> bool:
        """Whether to show (kind, figures) now; True also records them as shown."""
        figures = tuple(figures)
        shown = self._shown
        if shown == (kind, figures):
            return False
        now = time.monotonic()
        if (shown is not None and shown[0] == kind and len(shown[1]) == len(figures)
                and all(abs(a - b) < self.far for a, b in zip(shown[1], figures))
                and now // self.every_s == self._at // self.every_s):
            return False
        self._shown, self._at = (kind, figures), now
        return True
