"""A FAKE Ollama model registry for tests: real HTTP on loopback, two servers like the real
service (a registry that answers manifests and redirects blob GETs, and a storage host
that serves blob bytes with Range), built from the Docker registry HTTP API v2 (the
"distribution" spec) and what Ollama's client expects of it (`server/images.go`,
`server/download.go`), never from sparkctl's code.

- `GET /v2/<ns>/<model>/manifests/<tag>`: 200 with the manifest (media type
  application/vnd.docker.distribution.manifest.v2+json, a Docker-Content-Digest header);
  404 `{"errors":[{"code":"MANIFEST_UNKNOWN",...}]}` for an unknown name; 401 with a
  `WWW-Authenticate: Bearer ...` challenge and `{"errors":[{"code":"UNAUTHORIZED",...}]}`
  for a private one.
- `GET /v2/<ns>/<model>/blobs/<digest>`: 307 to the storage host with a signed-looking
  query (the registry never serves bytes itself); 404 `BLOB_UNKNOWN` for a digest the
  repository does not hold.
- Storage host `GET /blobs/<digest>`: `Range: bytes=a-b` or `bytes=a-` -> 206 with
  `Content-Range: bytes a-b/size` and only those bytes; no Range -> 200 with the whole
  blob; a range past the end -> 416 with `Content-Range: bytes */size`. Every byte sent
  is counted per digest (`sent`), so a test can prove what was fetched.

Blobs are real files (SmolLM2's GGUF, random GGUFs) or small JSON documents; digests are
their sha256. Listens on 127.0.0.1 only.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"
CONFIG_MEDIA = "application/vnd.docker.container.image.v1+json"
MODEL_MEDIA = "application/vnd.ollama.image.model"


@dataclass
class Blob:
    digest: str
    size: int
    path: Path | None = None  # served from the file
    data: bytes | None = None  # or from memory

    def read(self, start: int, end: int) -> bytes:
        if self.data is not None:
            return self.data[start:end + 1]
        assert self.path is not None
        with open(self.path, "rb") as f:
            f.seek(start)
            return f.read(end - start + 1)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


@dataclass
class RegistryState:
    manifests: dict[str, dict[str, Any]] = field(default_factory=dict)  # "ns/model:tag" -> manifest
    raw_manifests: dict[str, bytes] = field(default_factory=dict)  # "ns/model:tag" -> body sent as it is
    private: set[str] = field(default_factory=set)  # "ns/model" answered 401
    blobs: dict[str, Blob] = field(default_factory=dict)
    sent: dict[str, int] = field(default_factory=dict)  # digest -> bytes sent by the storage host
    ranges: list[tuple[str, str]] = field(default_factory=list)  # (digest, Range header or "")
    honour_range: bool = True  # False: a storage host that ignores Range (answers 200)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_blob_bytes(self, data: bytes) -> Blob:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blob = Blob(digest, len(data), data=data)
        self.blobs[digest] = blob
        return blob

    def add_blob_file(self, path: Path) -> Blob:
        digest = _sha256_file(path)
        blob = Blob(digest, path.stat().st_size, path=path)
        self.blobs[digest] = blob
        return blob

    def add_model(self, name: str, *, gguf: Path | None = None, config: dict[str, Any] | None = None,
                  layers: list[tuple[str, bytes | Path]] = ()) -> dict[str, Any]:
        """Publish `name` ("ns/model:tag"): an optional GGUF model layer, other layers given
        as (media type, bytes or file), and a config blob (Ollama's ConfigV2 fields)."""
        cfg = {"model_format": "gguf", "model_family": "", "model_families": [], "model_type": "",
               "file_type": "", "architecture": "amd64", "os": "linux",
               "rootfs": {"type": "layers", "diff_ids": []}, **(config or {})}
        entries = []
        if gguf is not None:
            b = self.add_blob_file(gguf)
            entries.append({"mediaType": MODEL_MEDIA, "digest": b.digest, "size": b.size})
        for media, content in layers:
            b = self.add_blob_file(content) if isinstance(content, Path) else self.add_blob_bytes(content)
            entries.append({"mediaType": media, "digest": b.digest, "size": b.size})
        cfg["rootfs"]["diff_ids"] = [e["digest"] for e in entries]
        cblob = self.add_blob_bytes(json.dumps(cfg).encode())
        manifest = {"schemaVersion": 2, "mediaType": MANIFEST_V2,
                    "config": {"mediaType": CONFIG_MEDIA, "digest": cblob.digest, "size": cblob.size},
                    "layers": entries}
        self.manifests[name] = manifest
        return manifest


def _errors(code: str, message: str) -> bytes:
    return json.dumps({"errors": [{"code": code, "message": message, "detail": None}]}).encode()


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802
        if self.server.role == "registry":
            self._registry()
        else:
            self._storage()

    # -- the registry --------------------------------------------------------------------
    def _registry(self) -> None:
        st = self.server.state
        m = re.fullmatch(r"/v2/([^/]+/[^/]+)/(manifests|blobs)/([^/?]+)", self.path.split("?", 1)[0])
        if self.path in ("/v2", "/v2/"):
            self._send(200, b"{}", {"Content-Type": "application/json"})
            return
        if m is None:
            self._send(404, _errors("NAME_UNKNOWN", "repository name not known to registry"),
                       {"Content-Type": "application/json"})
            return
        repo, kind, ref = m.groups()
        if repo in st.private:
            self._send(401, _errors("UNAUTHORIZED", "authentication required"), {
                "Content-Type": "application/json",
                "WWW-Authenticate": f'Bearer realm="https://127.0.0.1/token",service="fake",scope="repository:{repo}:pull"',
            })
            return
        if kind == "manifests" and f"{repo}:{ref}" in st.raw_manifests:  # a damaged or hostile one
            self._send(200, st.raw_manifests[f"{repo}:{ref}"], {"Content-Type": MANIFEST_V2})
            return
        if kind == "manifests":
            manifest = st.manifests.get(f"{repo}:{ref}")
            if manifest is None:
                self._send(404, _errors("MANIFEST_UNKNOWN", "manifest unknown"), {"Content-Type": "application/json"})
                return
            body = json.dumps(manifest).encode()
            self._send(200, body, {"Content-Type": MANIFEST_V2,
                                   "Docker-Content-Digest": "sha256:" + hashlib.sha256(body).hexdigest()})
            return
        held = {e["digest"] for k, man in st.manifests.items() if k.split(":")[0] == repo
                for e in [man["config"], *man["layers"]]}
        if ref not in held or ref not in st.blobs:
            self._send(404, _errors("BLOB_UNKNOWN", "blob unknown to registry"), {"Content-Type": "application/json"})
            return
        where = f"http://127.0.0.1:{self.server.storage_port}/blobs/{ref}?X-Amz-Expires=1200&X-Amz-Signature=fake"
        self._send(307, b"", {"Location": where})

    # -- the storage host ------------------------------------------------------------------
    def _storage(self) -> None:
        st = self.server.state
        m = re.fullmatch(r"/blobs/(sha256:[0-9a-f]{64})", self.path.split("?", 1)[0])
        blob = st.blobs.get(m.group(1)) if m else None
        if blob is None:
            self._send(404, b"<Error><Code>NoSuchKey</Code></Error>", {"Content-Type": "application/xml"})
            return
        rng = self.headers.get("Range", "")
        with st.lock:
            st.ranges.append((blob.digest, rng))
        start, end = 0, blob.size - 1
        partial = False
        if rng and st.honour_range:
            r = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
            if r is None:
                self._send(400, b"bad range")
                return
            start = int(r.group(1))
            end = min(int(r.group(2)) if r.group(2) else blob.size - 1, blob.size - 1)
            if start >= blob.size or end < start:
                self._send(416, b"", {"Content-Range": f"bytes */{blob.size}"})
                return
            partial = True
        headers = {"Content-Type": "application/octet-stream", "Accept-Ranges": "bytes",
                   "Content-Length": str(end - start + 1)}
        if partial:
            headers["Content-Range"] = f"bytes {start}-{end}/{blob.size}"
        self.send_response(206 if partial else 200)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        pos = start
        try:
            while pos <= end:
                chunk = blob.read(pos, min(end, pos + (1 << 16) - 1))
                self.wfile.write(chunk)
                with st.lock:
                    st.sent[blob.digest] = st.sent.get(blob.digest, 0) + len(chunk)
                pos += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client had what it wanted and hung up: what was written is counted


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, role: str, state: RegistryState) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.role = role
        self.state = state
        self.storage_port = 0


class FakeRegistry:
    """The registry at `url` (use it as SPARKCTL_REGISTRY) and its storage host."""

    def __init__(self, state: RegistryState | None = None) -> None:
        self.state = state or RegistryState()
        self._storage = _Server("storage", self.state)
        self._registry = _Server("registry", self.state)
        self._registry.storage_port = self._storage.server_address[1]
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._registry.server_address[1]}"

    def start(self) -> "FakeRegistry":
        for srv in (self._storage, self._registry):
            t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        for srv in (self._registry, self._storage):
            srv.shutdown()
            srv.server_close()

    def __enter__(self) -> "FakeRegistry":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
