"""The TUI in a web browser (`sparkctl serve`): textual-serve's server, locked with a
per-launch token and an Origin check, and a page that loads nothing from the internet."""
