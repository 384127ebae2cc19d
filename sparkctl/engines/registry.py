"""Ollama's model registry, read without pulling: a manifest, a small JSON blob, and the
first bytes of a large blob through HTTP range requests.

Where a name leads, as Ollama decides it (`types/model/name.go`: `ParseName`,
`Name.BaseURL`; `server/images.go`: `pullModelManifest`): `[scheme://][host/][namespace/]
model[:tag]` with the defaults https, registry.ollama.ai, library and latest; the manifest
is `<scheme>://<host>/v2/<namespace>/<model>/manifests/<tag>` and a blob
`.../v2/<namespace>/<model>/blobs/<digest>`. The registry answers a blob GET with a
redirect to a storage host that serves the bytes and honours `Range`; that location is
remembered per blob so later ranges go straight to it.

`SPARKCTL_REGISTRY` (or `[models] registry` in the config) replaces the scheme and host
for names that carry no host of their own, to read a mirror or a test registry. Async
(httpx); the caller owns the event loop. Every URL in a message is redacted.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import httpx

from sparkctl.core.loopback import LOOPBACK_MOUNTS
from sparkctl.core.names import DEFAULT_HOST, parse_model_name
from sparkctl.core.ollama_manifest import MANIFEST_MEDIA_TYPE
from sparkctl.core.redact import redact_uri
from sparkctl.core.safeload import Unparsable, load_json

REGISTRY_ENV = "SPARKCTL_REGISTRY"
MAX_JSON_BYTES = 4 * 1024 * 1024  # manifests and config blobs are a few KiB


class RegistryError(Exception):
    """`kind`: unreachable, not_found, unauthorized, bad_reply."""

    def __init__(self, kind: str, message: str) -> None:
        from sparkctl.core.termtext import safe_text

        message = safe_text(message)  # may quote the registry's own reply
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class RegistryRef:
    base_url: str  # scheme://host
    repository: str  # namespace/model
    tag: str

    @property
    def manifest_url(self) -> str:
        return f"{self.base_url}/v2/{self.repository}/manifests/{self.tag}"

    def blob_url(self, digest: str) -> str:
        return f"{self.base_url}/v2/{self.repository}/blobs/{digest}"

    @property
    def shown(self) -> str:
        return redact_uri(self.manifest_url)


def registry_override(config_value: str = "", env: Mapping[str, str] | None = None) -> str:
    """The registry base that replaces the default host ('' for none): env, then config."""
    env = os.environ if env is None else env
    return (env.get(REGISTRY_ENV, "").strip() or (config_value or "").strip()).rstrip("/")


def registry_ref(name: str, override: str = "") -> RegistryRef:
    """Where Ollama would fetch `name` from (InvalidModelName when Ollama would refuse it)."""
    parsed = parse_model_name(name)
    q = parsed.qualified()
    scheme = "http" if name.strip().lower().startswith("http://") else "https"
    if override and not parsed.host:
        base = override if "://" in override else f"https://{override}"
    else:
        base = f"{scheme}://{q.host or DEFAULT_HOST}"
    return RegistryRef(base.rstrip("/"), f"{q.namespace}/{q.model}", q.tag)


class RegistryClient:
    """Reads from registries; `bytes_read[digest]` counts every blob byte received."""

    def __init__(self, *, timeout_s: float = 15.0, transport: httpx.AsyncBaseTransport | None = None) -> None:
        # http(s)_proxy/no_proxy apply (a registry is remote), except to a registry or blob
        # host on this machine, which is always asked directly (core/loopback.py)
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 5.0)),
                                       follow_redirects=False, transport=transport,
                                       mounts=None if transport is not None else dict(LOOPBACK_MOUNTS),
                                       headers={"User-Agent": "sparkctl"})
        self._blob_location: dict[str, str] = {}
        self.bytes_read: dict[str, int] = {}

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> RegistryClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # -- plumbing ------------------------------------------------------------------------
    async def _send(self, url: str, headers: Mapping[str, str]) -> httpx.Response:
        """GET `url` as a stream (the caller reads and closes it); redirects are the caller's."""
        try:
            request = self._http.build_request("GET", url, headers=dict(headers))
            return await self._http.send(request, stream=True)
        except httpx.TimeoutException:
            raise RegistryError("unreachable", f"the registry at {redact_uri(url)} did not answer in time") from None
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise RegistryError("unreachable", f"cannot reach the registry at {redact_uri(url)}: {reason}") from None

    @staticmethod
    async def _fail(resp: httpx.Response, what: str) -> RegistryError:
        body = b""
        try:
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) > 4096:
                    break
        finally:
            await resp.aclose()
        detail = _registry_message(body)
        where = redact_uri(str(resp.request.url))
        if resp.status_code == 404:
            return RegistryError("not_found", f"the registry has no {what} ({where}: 404{detail})")
        if resp.status_code in (401, 403):
            return RegistryError("unauthorized",
                                 f"the registry refused {what} without credentials ({where}: "
                                 f"{resp.status_code}{detail}): a private model, or one that needs sign-in")
        return RegistryError("bad_reply", f"the registry answered {resp.status_code} for {what} ({where}{detail})")

    async def _json(self, url: str, headers: Mapping[str, str], what: str) -> Any:
        for _ in range(5):  # a registry may redirect a blob to its storage host
            resp = await self._send(url, headers)
            if resp.is_redirect and "location" in resp.headers:
                await resp.aclose()
                url = urljoin(url, resp.headers["location"])
                headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
                continue
            if resp.status_code != 200:
                raise await self._fail(resp, what)
            body = b""
            try:
                async for chunk in resp.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_JSON_BYTES:
                        raise RegistryError("bad_reply", f"the {what} from {redact_uri(url)} is over "
                                                         f"{MAX_JSON_BYTES} bytes")
            finally:
                await resp.aclose()
            try:
                return load_json(body)
            except Unparsable as exc:
                raise RegistryError("bad_reply", f"the {what} from {redact_uri(url)} cannot be read: {exc}") from None
            except ValueError:
                raise RegistryError("bad_reply", f"the {what} from {redact_uri(url)} is not JSON") from None
        raise RegistryError("bad_reply", f"too many redirects for the {what}")

    # -- reads ---------------------------------------------------------------------------
    async def manifest(self, ref: RegistryRef) -> Any:
        return await self._json(ref.manifest_url, {"Accept": MANIFEST_MEDIA_TYPE},
                                f"manifest for {ref.repository}:{ref.tag}")

    async def blob_json(self, ref: RegistryRef, digest: str) -> Any:
        return await self._json(ref.blob_url(digest), {}, f"config blob {digest[:19]}")

    async def read_range(self, ref: RegistryRef, digest: str, start: int, end: int) -> bytes:
        """Bytes `start`..`end` (inclusive) of a blob. A host that ignores `Range` answers 200
        with the whole blob: then only up to `end` is read and the connection closed."""
        if end < start:
            return b""
        url = self._blob_location.get(digest, ref.blob_url(digest))
        headers = {"Range": f"bytes={start}-{end}", "Accept-Encoding": "identity"}
        for _ in range(5):
            resp = await self._send(url, headers)
            if resp.is_redirect and "location" in resp.headers:
                await resp.aclose()
                url = urljoin(url, resp.headers["location"])
                self._blob_location[digest] = url
                continue
            break
        else:
            raise RegistryError("bad_reply", f"too many redirects for blob {digest[:19]}")
        if resp.status_code == 206:
            skip = _range_start(resp.headers.get("content-range", ""))
            if skip is None or skip > start:
                await resp.aclose()
                raise RegistryError("bad_reply", f"blob {digest[:19]}: a 206 without a usable Content-Range")
            skip = start - skip
        elif resp.status_code == 200:
            skip = start
        else:
            raise await self._fail(resp, f"blob {digest[:19]}")
        want = end - start + 1
        out = bytearray()
        try:
            async for chunk in resp.aiter_raw():
                self.bytes_read[digest] = self.bytes_read.get(digest, 0) + len(chunk)
                if skip:
                    drop = min(skip, len(chunk))
                    chunk, skip = chunk[drop:], skip - drop
                out += chunk
                if len(out) >= want:
                    break
        except httpx.HTTPError as exc:
            raise RegistryError("unreachable", f"blob {digest[:19]} broke off: {exc}") from None
        finally:
            await resp.aclose()
        return bytes(out[:want])


def _range_start(content_range: str) -> int | None:
    """The first byte of `bytes a-b/n`, or None."""
    try:
        unit, _, rest = content_range.strip().partition(" ")
        if unit.lower() != "bytes":
            return None
        return int(rest.split("-", 1)[0])
    except ValueError:
        return None


def _registry_message(body: bytes) -> str:
    """The Docker registry's `{"errors": [{"code", "message"}]}` as ": MESSAGE", else ''."""
    try:
        doc = load_json(body)
    except ValueError:
        return ""
    errors = doc.get("errors") if isinstance(doc, dict) else None
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        msg = errors[0].get("message") or errors[0].get("code")
        return f": {msg}" if isinstance(msg, str) and msg else ""
    if isinstance(doc, dict) and isinstance(doc.get("error"), str):
        return f": {doc['error']}"
    return ""
