"""Text from another process or host, made safe to show on a terminal.

A model name, an engine's error, a fleet host's status or a model's streamed answer is
written by someone else. Printed raw, an escape sequence in it acts on the user's terminal:
OSC 0/2 retitles the window, OSC 52 writes the clipboard (many terminals allow it), CSI 2J
clears the screen, a carriage return overwrites the line before it. Textual passes such
characters through to the terminal too, so the TUI needs the same care as the CLI.

What goes: every escape sequence whole (ECMA-48: CSI, OSC, DCS, SOS, PM, APC, in their
7-bit ``ESC x`` and 8-bit C1 forms, and the two-byte ``ESC x`` ones), an unterminated
string sequence to the end of the text (a terminal would swallow that much), then every
remaining C0 control, DEL and C1 control. Newlines and tabs stay unless asked otherwise.
Everything else, any script or emoji included, is left as it was.

Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any

# ESC [ or CSI (0x9b): parameters, intermediates, one final byte
_CSI = r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
# OSC, DCS, SOS, PM, APC: a string ended by ST (ESC \ or 0x9c) or, for OSC, BEL; or by the
# end of the text when the sender never ended it
_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]).*?(?:\x07|\x1b\\|\x9c|\Z)"
# any other escape: intermediates, then one final byte
_OTHER = r"\x1b[\x20-\x2f]*[\x30-\x7e]?"
_SEQUENCE = re.compile(f"{_STRING}|{_CSI}|{_OTHER}", re.DOTALL)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROLS_AND_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_HAS_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe_text(text: Any) -> str:
    """`text` without escape sequences and control characters; newlines and tabs kept."""
    if text is None:
        return ""
    if not isinstance(text, str):
        text = str(text)
    if not _HAS_CONTROL.search(text):
        return text  # the common case: nothing to do, no copy
    return _CONTROLS.sub("", _SEQUENCE.sub("", text))


def safe_line(text: Any) -> str:
    """`text` as one line: as ``safe_text``, with newlines and tabs become spaces."""
    cleaned = safe_text(text)
    if "\n" in cleaned or "\t" in cleaned:
        cleaned = cleaned.replace("\n", " ").replace("\t", " ")
    return _CONTROLS_AND_BREAKS.sub("", cleaned)


def safe_tree(obj: Any) -> Any:
    """A decoded JSON value with every string in it (keys too) through ``safe_text``."""
    if isinstance(obj, str):
        return safe_text(obj)
    if isinstance(obj, dict):
        return {safe_text(k) if isinstance(k, str) else k: safe_tree(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [safe_tree(v) for v in obj]
    return obj
