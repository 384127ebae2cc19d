"""Quality suites (GSM8K, IFEval): the suite files, the runner, rescoring saved responses.
The public names are re-exported here; scoring rules live in ``sparkctl.core.suites``."""

from sparkctl.services.evals.runner import (
    EvalFinished,
    EvalModelDone,
    EvalRunner,
    EvalSettings,
    EvalStarted,
    ItemDone,
    ItemLive,
    ItemResult,
    ItemStarted,
    ModelEval,
)
from sparkctl.services.evals.suites import (
    SUITE_NAMES,
    SUITES,
    Suite,
    SuiteError,
    SuiteItem,
    load_suite,
    pull_suite,
    set_location,
    suites_dir,
)

__all__ = [
    "SUITES", "SUITE_NAMES", "EvalFinished", "EvalModelDone", "EvalRunner", "EvalSettings", "EvalStarted",
    "ItemDone", "ItemLive", "ItemResult", "ItemStarted", "ModelEval", "Suite", "SuiteError", "SuiteItem",
    "load_suite", "pull_suite", "set_location", "suites_dir",
]
