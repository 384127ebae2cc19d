"""Models: list what the engine stores, pull with progress, check the fit, side-load a
contender beside production and verify what actually got loaded, unload, delete.

The CLI and the TUI both drive these functions; neither talks to the engine directly.
Every check that can say "no" says so in one line a user can act on, and every load is
followed by a look at what the engine really did ("verify what ran, not that something
ran"): a CPU spill, an evicted lane model or an NVML disagreement is reported, not hidden.

One module per capability (catalog, pull, fit, load; `common` holds the lookups they share,
`errors` what they raise); this package re-exports their public names, so
`from sparkctl.services.models import X` keeps working. Patch a name where it is used
(e.g. `...models.pull._disk_free`).
"""

from __future__ import annotations

from sparkctl.services.models.errors import ModelsRefused, LoadFailed
from sparkctl.services.models.common import (
    close_names,
    did_you_mean,
    not_found,
    lane_map,
    lane_label,
    LOCAL_HOSTS,
)
from sparkctl.services.models.catalog import (
    NOTABLE_CAPABILITIES,
    ModelRow,
    ModelList,
    ShowCache,
    list_models,
    modified_label,
    with_resident,
    DeleteReport,
    delete_target,
    delete_model,
)
from sparkctl.services.models.pull import (
    ModelStore,
    DEFAULT_STORES,
    find_model_store,
    DiskCheck,
    size_label,
    rate_label,
    eta_label,
    LayerProgress,
    PullView,
    NEWER_VERSION_MARK,
    SPEED_WINDOW_S,
    PullTracker,
    describe_pull_error,
    pull_model,
)
from sparkctl.services.models.fit import (
    FitReport,
    modelfile_num_ctx,
    gpu_memory_total,
    context_note,
    fit_check,
    refusal_reason,
    override_blocker,
    override_offered,
    judge_model,
)
from sparkctl.services.models.load import (
    parse_keep_alive,
    keep_alive_label,
    Verification,
    verify_load,
    LoadReport,
    side_load,
    UnloadReport,
    unload_model,
)
from sparkctl.services.models.remote import (
    FIT_UNKNOWN,
    REMOTE_SOURCE,
    RemoteFitReport,
    RemoteModel,
    fit_anywhere,
    read_remote_model,
    remote_fit_check,
)

__all__ = [
    "ModelsRefused",
    "LoadFailed",
    "close_names",
    "did_you_mean",
    "not_found",
    "lane_map",
    "lane_label",
    "LOCAL_HOSTS",
    "NOTABLE_CAPABILITIES",
    "ModelRow",
    "ModelList",
    "ShowCache",
    "list_models",
    "modified_label",
    "with_resident",
    "DeleteReport",
    "delete_target",
    "delete_model",
    "ModelStore",
    "DEFAULT_STORES",
    "find_model_store",
    "DiskCheck",
    "size_label",
    "rate_label",
    "eta_label",
    "LayerProgress",
    "PullView",
    "NEWER_VERSION_MARK",
    "SPEED_WINDOW_S",
    "PullTracker",
    "describe_pull_error",
    "pull_model",
    "FitReport",
    "modelfile_num_ctx",
    "gpu_memory_total",
    "context_note",
    "fit_check",
    "refusal_reason",
    "override_blocker",
    "override_offered",
    "judge_model",
    "parse_keep_alive",
    "keep_alive_label",
    "Verification",
    "verify_load",
    "LoadReport",
    "side_load",
    "UnloadReport",
    "unload_model",
    "FIT_UNKNOWN",
    "REMOTE_SOURCE",
    "RemoteFitReport",
    "RemoteModel",
    "fit_anywhere",
    "read_remote_model",
    "remote_fit_check",
]
