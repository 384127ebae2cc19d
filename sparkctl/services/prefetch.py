"""The dashboard's first samples, taken while Textual is still importing.

`sparkctl` with no command starts the TUI; importing Textual and building the first frame
take a few hundred milliseconds of CPU, while the first samples mostly wait on something
else (the engine's answer, NVML's initialisation, /proc). So the CLI starts this before
importing the TUI: one thread builds the probes and reads the host, another asks the
engine, and the app's sampling loops begin with their answers instead of asking again.
Never raises into the caller: a failed sample is the loops' to take again and report.
"""

from __future__ import annotations

import threading
from typing import Any


class StatusPrefetch:
    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self._probes: Any = None
        self._probes_error: BaseException | None = None
        self._probes_ready = threading.Event()
        self._samples: dict[str, Any] = {}
        self._done = {"host": threading.Event(), "engine": threading.Event()}
        # two threads: an engine that never answers (a firewall) must not hold up the host
        threading.Thread(target=self._host_thread, name="sparkctl-prefetch-host", daemon=True).start()
        threading.Thread(target=self._engine_thread, name="sparkctl-prefetch-engine", daemon=True).start()

    def _host_thread(self) -> None:
        try:
            from sparkctl.services.factory import make_probes

            self._probes = make_probes()
        except BaseException as exc:  # raised again, in the caller's thread, by .probes
            self._probes_error = exc
        finally:
            self._probes_ready.set()
        try:
            if self._probes is not None:
                self._samples["host"] = self._probes.read()
        except Exception:
            pass
        finally:
            self._done["host"].set()

    def _engine_thread(self) -> None:
        from sparkctl.services.status import poll_engine_status

        try:
            self._samples["engine"] = poll_engine_status(self.engine)
        except Exception:
            pass
        finally:
            self._done["engine"].set()

    @property
    def probes(self) -> Any:
        """The host probes (built in the thread; waits for them)."""
        self._probes_ready.wait()
        if self._probes_error is not None:
            raise self._probes_error
        return self._probes

    def first(self, which: str, wait: bool = True) -> Any:
        """The first "host" or "engine" sample, waiting for it unless ``wait`` is False;
        None when it was not taken (or not yet, without waiting)."""
        if wait:
            self._done[which].wait()
        return self._samples.get(which) if self._done[which].is_set() else None
