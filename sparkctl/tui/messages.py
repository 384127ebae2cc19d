"""Messages that workers post to the app; handlers own every state change."""

from __future__ import annotations

from textual.message import Message

from sparkctl.core.snapshots import EngineStatus, HostSnapshot


class HostSampled(Message):
    def __init__(self, snapshot: HostSnapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class EngineSampled(Message):
    def __init__(self, status: EngineStatus) -> None:
        super().__init__()
        self.status = status


class NamedEnginesSampled(Message):
    """The `[engines.NAME]` entries as last probed (a tuple of NamedEngineStatus)."""

    def __init__(self, statuses: tuple) -> None:
        super().__init__()
        self.statuses = statuses


class RunnersSampled(Message):
    """The llama-server runners of the resident models (name -> core.runner_facts.RunnerFacts),
    read again when the resident set changed; `note` says why none could be read, `local`
    whether the engine runs on this machine (only then is a note worth saying)."""

    def __init__(self, runners: dict, note: str, local: bool) -> None:
        super().__init__()
        self.runners = runners
        self.note = note
        self.local = local
