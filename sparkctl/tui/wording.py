"""What the TUI says, in the TUI's own words and never as markup.

The services write their messages for the CLI, naming its flags ("lower --ctx, or use
--solo"). On a screen those flags do not exist: the user has a setting or a switch. This
module turns each flag a service message can name into the control that does the same on
the screen the message is shown on. (Messages also carry config keys such as
``[bench] timeout_s``, which markup would read as a style tag and delete: the screens show
them as ``Text`` or in labels and toasts with markup off.)
"""

from __future__ import annotations

import re

from rich.text import Text

from sparkctl.core.termtext import safe_line, safe_text

# (CLI words, what the Bench and Eval screens call the same thing). Longest first where one
# flag's text holds another's. The bench settings open with ctrl+s.
_SETTINGS = (
    (r"\(--ctx / the form\)", "(the form)"),
    (r"--allow-cpu", "the 'allow CPU' setting"),
    (r"--keep-loaded", "the 'keep loaded' setting"),
    (r"--no-think", "the 'think' switch"),
    (r"--solo", "the 'solo' setting"),
    (r"--ctx", "the num_ctx setting"),
    (r"--keep-alive", "the keep-alive field"),
    (r"--profile/--depth/--concurrency/--slo", "the sweep mode (w)"),
    (r"--profile", "the profiles field"),
    (r"--depth", "the depths field"),
    (r"--concurrency", "the concurrency field"),
    (r"--slo", "the SLO field"),
)
# The Models screen asks for a context and a keep-alive in its fit and load dialogs, and
# forces a refused load with L.
_MODELS = (
    (r"\(--ctx / the form\)", "(the form)"),
    (r"set --ctx or", "give a context in the fit dialog (f) or set"),
    (r"--ctx", "the context field"),
    (r"--keep-alive", "the keep-alive field"),
    (r"--force", "L (load anyway)"),
)
# The Eval screen has the num_ctx setting and the think switch, not the bench's others; the
# guards it shares with the bench speak of "the bench".
_EVAL = (
    (r"\(--ctx / the form\)", "(the form)"),
    (r", or use --solo", ", or unload other models first"),
    (r"--allow-cpu", "`sparkctl eval --allow-cpu`"),
    (r"--no-think", "the 'think' switch"),
    (r"--ctx", "the num_ctx setting"),
    (r"\bthe bench\b", "the eval"),
)
_WHERE = {"bench": _SETTINGS, "eval": _EVAL, "models": _MODELS}
_COMPILED = {where: tuple((re.compile(cli), tui) for cli, tui in table) for where, table in _WHERE.items()}


def tui_words(text: str, where: str = "bench") -> str:
    """`text` with each CLI flag replaced by the control that does the same on `where`'s
    screen ("bench", "eval", "models")."""
    for pattern, words in _COMPILED.get(where, ()):
        text = pattern.sub(words, text)
    return text


def plain(text: object, style: str = "", *, one_line: bool = False) -> Text:
    """Text another program or person wrote (a model name, an MLflow tag, a registry's or a
    host's reply, a config path) as it is: Textual would read `[` in a string as markup (a
    `[/bold]` without its opening tag is a MarkupError that ends the app; `[@click=...]` an
    action), and would pass an escape sequence through to the terminal. For labels, static
    text and border titles."""
    return Text((safe_line if one_line else safe_text)(text), style=style)
