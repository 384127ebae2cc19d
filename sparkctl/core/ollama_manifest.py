"""An Ollama model as its registry describes it: the manifest's layers and the config blob.

Read from Ollama's server code (`server/images.go`, `types/model/config.go`) and the
Docker registry API it speaks: `GET /v2/<namespace>/<model>/manifests/<tag>` with
`Accept: application/vnd.docker.distribution.manifest.v2+json` returns
`{"schemaVersion": 2, "mediaType", "config": {mediaType, digest, size},
"layers": [{mediaType, digest, size}, ...]}`. The download is the config plus every layer
(Ollama's `GetTotalSize`). The weights are the `application/vnd.ollama.image.model`
layer (a GGUF); a vision projector, a LoRA adapter and a speculative-decoding draft model
come as layers of their own media types and are loaded beside the weights. The config
blob (`ConfigV2`) names the format ("gguf", or "safetensors" for models that run on the
MLX runner), the family, the parameter size (`model_type`), the quantisation
(`file_type`) and, on newer registries, capabilities. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MANIFEST_MEDIA_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
MODEL_LAYER = "application/vnd.ollama.image.model"
# Layers loaded into memory beside the weights, by the name sparkctl shows them under.
LOADED_LAYERS = {
    "application/vnd.ollama.image.projector": "projector",
    "application/vnd.ollama.image.adapter": "adapter",
    "application/vnd.ollama.image.draft": "draft",
}


class BadManifest(ValueError):
    """The registry's answer is not a manifest sparkctl can read."""


# A layer past this (8 PiB, where a float stops counting bytes exactly) is no model's.
MAX_LAYER_SIZE = 2**53


@dataclass(frozen=True)
class Layer:
    media_type: str
    digest: str
    size: int


@dataclass(frozen=True)
class OllamaManifest:
    config: Layer
    layers: tuple[Layer, ...]

    @property
    def download_size(self) -> int:
        return self.config.size + sum(layer.size for layer in self.layers)

    @property
    def model_layer(self) -> Layer | None:
        return next((layer for layer in self.layers if layer.media_type == MODEL_LAYER), None)

    @property
    def loaded_extras(self) -> tuple[tuple[str, Layer], ...]:
        """(projector|adapter|draft, layer) for the other layers a load brings into memory."""
        return tuple((LOADED_LAYERS[layer.media_type], layer) for layer in self.layers
                     if layer.media_type in LOADED_LAYERS)

    @property
    def weights(self) -> int | None:
        """What a load puts in memory before the KV cache: the model layer and its extras."""
        model = self.model_layer
        if model is None:
            return None
        return model.size + sum(layer.size for _, layer in self.loaded_extras)


def _layer(raw: Any, where: str) -> Layer:
    if not isinstance(raw, Mapping):
        raise BadManifest(f"{where} is not an object")
    digest, size, media = raw.get("digest"), raw.get("size"), raw.get("mediaType", "")
    if not isinstance(digest, str) or not digest.startswith("sha256:"):
        raise BadManifest(f"{where} has no sha256 digest")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise BadManifest(f"{where} has no size")
    if size >= MAX_LAYER_SIZE:
        raise BadManifest(f"{where} claims {size} bytes, beyond any model")
    return Layer(str(media), digest, size)


def parse_manifest(doc: Any) -> OllamaManifest:
    if not isinstance(doc, Mapping):
        raise BadManifest("the manifest is not a JSON object")
    layers = doc.get("layers")
    if not isinstance(layers, list):
        raise BadManifest("the manifest has no layers")
    return OllamaManifest(
        config=_layer(doc.get("config"), "the manifest's config"),
        layers=tuple(_layer(x, f"layer {i}") for i, x in enumerate(layers)),
    )


@dataclass(frozen=True)
class ModelConfig:
    """The config blob's facts (empty strings where the blob says nothing)."""

    format: str
    family: str
    parameter_size: str
    quantization: str
    capabilities: tuple[str, ...] = ()
    requires: str = ""  # the Ollama version the model needs, when the registry says


def parse_config(doc: Any) -> ModelConfig:
    doc = doc if isinstance(doc, Mapping) else {}

    def text(key: str) -> str:
        v = doc.get(key)
        return v if isinstance(v, str) else ""

    caps = doc.get("capabilities")
    return ModelConfig(
        format=text("model_format"),
        family=text("model_family"),
        parameter_size=text("model_type"),
        quantization=text("file_type"),
        capabilities=tuple(c for c in caps if isinstance(c, str)) if isinstance(caps, list) else (),
        requires=text("requires"),
    )
