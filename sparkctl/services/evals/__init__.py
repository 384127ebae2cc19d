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
from sparkctl.services.evals.suite_pull import MIRROR_ENV, Pulled, PullReport, pull_all, pull_suite
from sparkctl.services.evals.suites import (
    SUITE_NAMES,
    SUITES,
    CopyState,
    Suite,
    SuiteCopy,
    SuiteError,
    SuiteItem,
    clear_location,
    copy_state,
    load_suite,
    locate,
    pull_dir,
    set_location,
    shipped_dir,
)

__all__ = [
    "SUITES", "SUITE_NAMES", "EvalFinished", "EvalModelDone", "EvalRunner", "EvalSettings", "EvalStarted",
    "ItemDone", "ItemLive", "ItemResult", "ItemStarted", "ModelEval", "Suite", "SuiteError", "SuiteItem",
    "load_suite", "pull_suite", "set_location", "MIRROR_ENV", "Pulled", "PullReport", "pull_all", "CopyState",
    "SuiteCopy", "clear_location", "copy_state", "locate", "pull_dir", "shipped_dir",
]
