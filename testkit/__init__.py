"""What the tests and the benchmarks share, outside both: the fakes of what cannot run here
(Ollama, a GB10 host, an OpenAI-compatible server, ssh, a registry; testkit/fakes), MLflow
on SQLite with a recording bench (tracking.py), the lanes' scenario and a TUI in a
pseudo-terminal (lanes.py), and the incumbent-against-contender decision scenario
(decision_scenario.py).

The benchmarks' published figures are measured against these, so a change here is a change
to the figures' set-up and is reviewed as one; tests/ holds tests only, and nothing under
benchmarks/ imports from it (tests/unit/test_import_hygiene.py). Not part of the sparkctl
package: pyproject does not list it, and nothing under sparkctl/ imports it.
"""
