"""Fit before download: the verdict for a model that is not stored yet, from the registry's
manifest, its config blob and the GGUF header of its weights, read with range requests.

The header (metadata, then tensor infos) is read from the start of the weights blob in
growing windows: 256 KiB first, then at least twice as much each time, until it parses
or the cap (64 MiB) is reached. The fetch therefore stays under twice the header's size
(or the first window), never the weights. The metadata goes through the same judge as a
stored model's /api/show `model_info` (`fit.judge_model`).

Every read is bounded twice: by the client's per-read timeout, and all of them together by
one deadline (`[models] registry_timeout_s`), so a registry that answers one byte at a time
ends the check instead of holding it.

Each parse runs in a worker thread, not on the event loop: a big vocabulary's header
(Gemma 3: 262k tokens and 250k merges, ~10 MiB) takes seconds of pure-Python work on a
small CPU, and the TUI's loop would freeze meanwhile. The thread still takes turns at the
GIL with the loop (every few ms), which keeps keys and repaints flowing; the result is
small (string arrays are counted, not kept), so a process would only add its start-up.

Failure is an answer: an unreachable registry, a registry past that deadline, an unknown or private name, a model that
is not GGUF (safetensors on the MLX runner), or a header that does not parse within the
cap each give what is known (the download size, once the manifest came) and
"fit unknown until downloaded".
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sparkctl.config import Config
from sparkctl.core.fit import FitKind, implausible_shape, sliding_window
from sparkctl.core.fmt import size as size_label
from sparkctl.core.gguf_header import GGUFHeader, HeaderIncomplete, NotGGUF, file_type_label, model_info, parse_gguf_header
from sparkctl.core.names import unique_by_name, validate_model_name
from sparkctl.core.redact import redact_uri
from sparkctl.core.ollama_manifest import BadManifest, ModelConfig, OllamaManifest, parse_config, parse_manifest
from sparkctl.engines.base import ModelNotFound
from sparkctl.engines.registry import RegistryClient, RegistryError, registry_override, registry_ref
from sparkctl.services.models.fit import FitReport, fit_check, judge_model

INITIAL_HEADER_READ = 256 * 1024
MAX_HEADER_BYTES = 64 * 1024 * 1024
FIT_UNKNOWN = "fit unknown until downloaded"
REMOTE_SOURCE = "remote: from the registry manifest and GGUF header"


@dataclass(frozen=True)
class RemoteModel:
    """What the registry told about a model, and why the fit is unknown when it is."""

    name: str
    source: str  # the manifest URL, redacted
    manifest: OllamaManifest | None = None
    config: ModelConfig | None = None
    header: GGUFHeader | None = None
    header_bytes_read: int = 0  # bytes of the weights blob fetched to read the header
    problem: str | None = None
    problem_kind: str | None = None  # unreachable, not_found, unauthorized, bad_reply, not_gguf, header

    @property
    def download_size(self) -> int | None:
        return self.manifest.download_size if self.manifest else None

    def facts(self) -> list[str]:
        """Lines for what is known, whatever the outcome."""
        out: list[str] = []
        m = self.manifest
        if m is not None:
            parts = []
            model = m.model_layer
            if model is not None:
                parts.append(f"weights {size_label(model.size)}")
            parts += [f"{kind} {size_label(layer.size)}" for kind, layer in m.loaded_extras]
            inner = f" ({', '.join(parts)})" if parts else ""
            out.append(f"  download   {size_label(m.download_size)}{inner} from {self.source}")
        c = self.config
        if c is not None:
            bits = [x for x in (c.format, c.family and f"family {c.family}", c.parameter_size, c.quantization) if x]
            if c.capabilities:
                bits.append("capabilities " + ", ".join(c.capabilities))
            if c.requires:
                bits.append(f"requires Ollama {c.requires}")
            if bits:
                out.append(f"  model      {', '.join(bits)}")
        if self.header is not None:
            out.append(f"  header     {header_summary(self.header)}")
        if self.header_bytes_read:
            whole = f" of the {size_label(m.model_layer.size)} GGUF" if m is not None and m.model_layer else ""
            out.append(f"  read       {size_label(self.header_bytes_read)}{whole} (header only)")
        return out

    def to_dict(self) -> dict[str, Any]:
        m, c, h = self.manifest, self.config, self.header
        return {
            "name": self.name,
            "source": self.source,
            "download_size": self.download_size,
            "layers": None if m is None else [
                {"media_type": layer.media_type, "digest": layer.digest, "size": layer.size} for layer in m.layers
            ],
            "weights": None if m is None else m.weights,
            "config": None if c is None else {
                "format": c.format, "family": c.family, "parameter_size": c.parameter_size,
                "quantization": c.quantization, "capabilities": list(c.capabilities), "requires": c.requires,
            },
            "header": None if h is None else header_facts(h),
            "header_bytes_read": self.header_bytes_read,
            "problem": self.problem,
            "problem_kind": self.problem_kind,
        }


def _arch_key(h: GGUFHeader, key: str) -> Any:
    return h.metadata.get(f"{h.architecture}.{key}") if h.architecture else None


def header_facts(h: GGUFHeader) -> dict[str, Any]:
    """The architecture facts a fit needs, as the header gives them."""
    swa = sliding_window(model_info(h))
    return {
        "architecture": h.architecture,
        "block_count": _arch_key(h, "block_count"),
        "embedding_length": _arch_key(h, "embedding_length"),
        "head_count": _arch_key(h, "attention.head_count"),
        "head_count_kv": _arch_key(h, "attention.head_count_kv"),
        "key_length": _arch_key(h, "attention.key_length"),
        "value_length": _arch_key(h, "attention.value_length"),
        "sliding_window": _arch_key(h, "attention.sliding_window"),
        "sliding_window_layers": None if swa is None else swa.count,
        "context_length": _arch_key(h, "context_length"),
        "file_type": file_type_label(h.metadata.get("general.file_type")),
        "parameter_count": h.parameter_count,
        "tensor_count": len(h.tensors),
        "header_bytes": h.header_bytes,
    }


def header_summary(h: GGUFHeader) -> str:
    f = header_facts(h)

    def heads(v: Any) -> str:
        if isinstance(v, list):
            return f"{min(v)}-{max(v)}" if v else "?"
        return str(v) if v is not None else "?"

    dims = ""
    if f["key_length"] or f["value_length"]:
        dims = f", key/value {f['key_length'] or '?'}/{f['value_length'] or '?'}"
    if f["sliding_window"]:
        window = f"sliding window {f['sliding_window']}"
        window += f" on {f['sliding_window_layers']} of {f['block_count']} layers" \
            if f["sliding_window_layers"] is not None else " (layer pattern unknown)"
    else:
        window = "no sliding window"
    return (f"{f['architecture'] or '?'}: {f['block_count'] or '?'} layers, embedding {f['embedding_length'] or '?'}, "
            f"{heads(f['head_count'])} heads ({heads(f['head_count_kv'])} KV){dims}, "
            f"context {f['context_length'] or '?'}, {f['file_type'] or 'file type ?'}, {window}")


@dataclass(frozen=True)
class RemoteFitReport:
    remote: RemoteModel
    fit: FitReport | None  # None: fit unknown until downloaded

    @property
    def model(self) -> str:
        return self.remote.name

    @property
    def known(self) -> bool:
        return self.fit is not None

    @property
    def cannot_fit(self) -> bool:
        """Does not fit even after evicting every resident model (what `pull` refuses)."""
        return self.fit is not None and self.fit.verdict is not None and self.fit.verdict.kind is FitKind.DOES_NOT_FIT

    @property
    def refused_by_default(self) -> bool:
        return self.fit is None or self.fit.refused_by_default

    def summary(self) -> str:
        if self.fit is None:
            return f"{FIT_UNKNOWN}: {self.remote.problem}"
        return self.fit.summary()

    def lines(self) -> list[str]:
        out = [f"{self.model}: {self.summary()}", f"  source     {REMOTE_SOURCE}"]
        out += self.remote.facts()
        if self.fit is not None:
            out += self.fit.lines()[1:]
        return out

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"model": self.model, "remote": True, "source": REMOTE_SOURCE,
                             "registry": self.remote.to_dict(), "known": self.known,
                             "summary": self.summary()}
        if self.fit is not None:
            d.update({k: v for k, v in self.fit.to_dict().items() if k != "model"})
        else:
            d.update({"verdict": None, "unavailable": f"{FIT_UNKNOWN}: {self.remote.problem}"})
        return d


async def read_header(client: RegistryClient, ref: Any, digest: str, blob_size: int, *,
                      initial: int = INITIAL_HEADER_READ, cap: int = MAX_HEADER_BYTES) -> GGUFHeader:
    """The GGUF header at the start of a blob, fetched in growing windows (see the module's doc).

    NotGGUF when the bytes are not GGUF; HeaderIncomplete when the header does not end
    within `cap` bytes (or within the blob)."""
    have = bytearray()
    want = min(initial, cap, blob_size)
    while True:
        if want > len(have):
            have += await client.read_range(ref, digest, len(have), want - 1)
        try:
            # immutable bytes: the thread runs on if this worker is cancelled meanwhile
            return await asyncio.to_thread(parse_gguf_header, bytes(have))
        except HeaderIncomplete as exc:
            if len(have) >= min(cap, blob_size) or len(have) < want:
                raise HeaderIncomplete(exc.needed, len(have)) from None
            want = min(cap, blob_size, max(exc.needed, 2 * len(have)))


async def read_remote_model(name: str, *, registry: str = "", client: RegistryClient | None = None,
                            cap: int = MAX_HEADER_BYTES, initial: int = INITIAL_HEADER_READ,
                            deadline_s: float | None = None) -> RemoteModel:
    """Manifest, config and GGUF header of `name` on its registry; failures become `problem`.

    `name` as the user typed it: a leading `http://` chooses plain HTTP for its host, as
    Ollama's pull does (the validated name has no scheme any more). `deadline_s`: the most
    all the reads together may take (None: no total bound, only per-read timeouts)."""
    ref = registry_ref(name, registry)
    name = validate_model_name(name)
    own = client is None
    client = client or RegistryClient()
    got: list[RemoteModel] = [RemoteModel(name=name, source=ref.shown)]  # what is known so far
    step = ["the manifest"]
    try:
        return await asyncio.wait_for(_read_remote(name, ref, client, cap, initial, got, step), deadline_s)
    except asyncio.TimeoutError:
        known = got[-1]
        layer = known.manifest.model_layer if known.manifest is not None else None
        read = client.bytes_read.get(layer.digest, 0) if layer is not None else 0
        return RemoteModel(**{**known.__dict__, "header_bytes_read": read, "problem_kind": "unreachable",
                              "problem": f"the registry at {redact_uri(ref.base_url)} did not finish sending "
                                         f"{step[0]} within {deadline_s:g} s ([models] registry_timeout_s)"})
    finally:
        if own:
            await client.close()


async def _read_remote(name: str, ref: Any, client: RegistryClient, cap: int, initial: int,
                       got: list[RemoteModel], step: list[str]) -> RemoteModel:
    """read_remote_model's reads; `got` and `step` say how far it came when it is cut off."""
    remote = got[-1]

    def failed(kind: str, why: str, **kw: Any) -> RemoteModel:
        return RemoteModel(**{**remote.__dict__, **kw, "problem": why, "problem_kind": kind})

    try:
        manifest = parse_manifest(await client.manifest(ref))
    except RegistryError as exc:
        return failed(exc.kind, exc.message)
    except BadManifest as exc:
        return failed("bad_reply", f"the registry's manifest is unreadable: {exc}")
    remote = RemoteModel(name=name, source=ref.shown, manifest=manifest)
    got.append(remote)
    step[0] = "the config blob"
    config: ModelConfig | None = None
    try:
        config = parse_config(await client.blob_json(ref, manifest.config.digest))
    except RegistryError:
        config = None  # the layers alone still give the sizes and the header
    remote = RemoteModel(name=name, source=ref.shown, manifest=manifest, config=config)
    got.append(remote)
    step[0] = "the GGUF header"
    layer = manifest.model_layer
    if config is not None and config.format and config.format.lower() != "gguf":
        return failed("not_gguf", f"the model's format is {config.format}, not GGUF: "
                                  f"its architecture cannot be read from a header")
    if layer is None:
        return failed("not_gguf", "the manifest has no GGUF model layer "
                                  "(application/vnd.ollama.image.model)")
    try:
        header = await read_header(client, ref, layer.digest, layer.size, cap=cap, initial=initial)
    except NotGGUF as exc:
        return failed("not_gguf", f"the weights are not GGUF ({exc})",
                      header_bytes_read=client.bytes_read.get(layer.digest, 0))
    except HeaderIncomplete as exc:
        read = client.bytes_read.get(layer.digest, 0)
        if exc.have >= cap:
            limit = f"the {size_label(cap)} cap"
        elif exc.have >= layer.size:
            limit = "the end of the blob (a truncated GGUF)"
        else:
            limit = "what the storage host sent"
        return failed("header", f"the GGUF header does not end within {limit} "
                                f"({size_label(read)} read)", header_bytes_read=read)
    except RegistryError as exc:
        return failed(exc.kind, exc.message, header_bytes_read=client.bytes_read.get(layer.digest, 0))
    odd = implausible_shape(model_info(header))
    if odd is not None:
        return failed("header", f"the GGUF header says {odd}, out of any model's range",
                      header_bytes_read=client.bytes_read.get(layer.digest, 0))
    return RemoteModel(name=name, source=ref.shown, manifest=manifest, config=config, header=header,
                       header_bytes_read=client.bytes_read.get(layer.digest, 0))


async def remote_fit_check(cfg: Config, engine: Any, probes: Any, name: str, num_ctx: int | None = None, *,
                           env: Mapping[str, str] | None = None, client: RegistryClient | None = None,
                           cap: int = MAX_HEADER_BYTES) -> RemoteFitReport:
    """The fit verdict for `name` as the registry has it, beside what the engine holds now."""
    env = os.environ if env is None else env
    typed, name = name, validate_model_name(name)  # `typed` keeps an http:// scheme for the registry
    remote = await read_remote_model(typed, registry=registry_override(cfg.models.registry, env),
                                     client=client, cap=cap, deadline_s=cfg.models.registry_timeout_s)
    if remote.header is None or remote.manifest is None or remote.manifest.weights is None:
        return RemoteFitReport(remote, None)
    resident = tuple(unique_by_name(await engine.ps()))
    try:
        version = await engine.version()
    except Exception:  # noqa: BLE001 - the version is decoration here; ps already answered
        version = None
    fit = await judge_model(cfg, engine.host, probes, name, remote.manifest.weights, model_info(remote.header),
                            resident, num_ctx, engine_version=version)
    return RemoteFitReport(remote, fit)


async def fit_anywhere(cfg: Config, engine: Any, probes: Any, name: str, num_ctx: int | None = None, *,
                       env: Mapping[str, str] | None = None,
                       client: RegistryClient | None = None) -> FitReport | RemoteFitReport:
    """A stored model's fit from the engine; a model that is not stored, from its registry."""
    try:
        return await fit_check(cfg, engine, probes, name, num_ctx)
    except ModelNotFound:
        return await remote_fit_check(cfg, engine, probes, name, num_ctx, env=env, client=client)
