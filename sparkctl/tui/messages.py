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
