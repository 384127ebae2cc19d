"""The quality gate's default margins, in percentage points per suite.

Kept apart from ``core/noninferiority.py`` (which says why 2 and 3) so that loading the
config, which fills ``[promote] quality_margin_pp`` with them, does not import the
statistics behind the gate: every start of the dashboard and of the CLI loads the config.
"""

DEFAULT_MARGINS_PP: dict[str, float] = {"gsm8k": 2.0, "ifeval": 3.0}
