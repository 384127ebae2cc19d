"""Ollama adapter: the Engine protocol over `ollama.AsyncClient`.

Everything a caller sees is a snapshot dataclass or an event from base.py; every
failure is one of base.py's errors. The client library raises a mix of its own
`ResponseError`, the builtin `ConnectionError`, raw httpx exceptions (inside streams,
and for every timeout) and pydantic errors; `_translate` maps all of them.

Timeouts: the client's default is none at all, so a dead server behind a firewall
would hang a worker forever. Quick calls (ps, tags, show, delete, version) get
`timeout`; calls that legitimately wait on the model (load, generate, pull) get
`load_timeout` between two bytes. Both fail fast on connect (`connect_timeout`).
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from sparkctl.core.loopback import proxies_apply
from sparkctl.core.names import ModelName, model_key
from sparkctl.core.snapshots import EngineStatus, LocalModel, ModelDetails, ResidentModel
from sparkctl.core.termtext import safe_line
from sparkctl.engines.base import (
    DoneEvent,
    EngineError,
    EngineStalled,
    EngineUnreachable,
    ModelNotFound,
    PullEvent,
    ShowInfo,
    StreamEvent,
    TokenEvent,
)

DEFAULT_HOST = "http://127.0.0.1:11434"
DEFAULT_PORT = 11434


def normalize_host(host: str | None = None) -> str:
    """Resolve a host the way OLLAMA_HOST is read: scheme and port optional.

    "" / None -> $OLLAMA_HOST or http://127.0.0.1:11434; "box" -> http://box:11434;
    ":8080" -> http://127.0.0.1:8080; "http://box" -> http://box:80 (an explicit
    scheme brings its own default port, as in Ollama's envconfig); a path is kept.
    """
    raw = (host if host is not None else os.environ.get("OLLAMA_HOST", "")).strip()
    if not raw:
        return DEFAULT_HOST
    scheme, sep, rest = raw.partition("://")
    if sep:
        scheme = scheme.lower()
        if scheme not in ("http", "https"):
            raise ValueError(f"unsupported scheme in Ollama host {raw!r}")
        default_port = 443 if scheme == "https" else 80
    else:
        scheme, rest, default_port = "http", raw, DEFAULT_PORT
    hostport, _, path = rest.partition("/")
    if hostport.startswith("["):  # [ipv6] or [ipv6]:port
        end = hostport.find("]")
        if end < 0:
            raise ValueError(f"bad IPv6 address in Ollama host {raw!r}")
        name, port_text = hostport[: end + 1], hostport[end + 1 :].lstrip(":")
    else:
        name, _, port_text = hostport.partition(":")
    name = name or "127.0.0.1"
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"bad port in Ollama host {raw!r}")
        port = int(port_text)
    else:
        port = default_port
    path = path.strip("/")
    return f"{scheme}://{name}:{port}" + (f"/{path}" if path else "")


def same_model(a: str, b: str) -> bool:
    """Whether two names denote one model by Ollama's rules: 'qwen3' == 'qwen3:latest' ==
    'library/qwen3' == 'registry.ollama.ai/library/qwen3:latest', ignoring case. Through the
    project's one name key (core.names.model_key), which never raises."""
    return model_key(a) == model_key(b)


class OllamaEngine:
    """Talks to one Ollama server. Create it once, use it from async code, `close()` it."""

    kind = "ollama"

    def __init__(
        self,
        host: str | None = None,
        timeout: float = 10.0,
        connect_timeout: float = 3.0,
        *,
        load_timeout: float = 600.0,
    ) -> None:
        self.host = normalize_host(host)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.load_timeout = load_timeout
        self._built = False
        self._building: asyncio.Lock | None = None
        self._poll = _JsonGetter(self.host, timeout, connect_timeout)

    async def _ensure(self) -> None:
        """Build the clients on first use, in a thread: importing `ollama` (pydantic models)
        and making a TLS context take ~0.5 s, which must not delay the TUI's first frame
        nor stall its event loop. version and ps need neither (see _JsonGetter)."""
        if self._built:
            return
        if self._building is None:
            self._building = asyncio.Lock()
        async with self._building:
            if not self._built:
                await asyncio.to_thread(self._build)

    def _build(self) -> None:
        import httpx
        import ollama

        quick = httpx.Timeout(self.timeout, connect=self.connect_timeout)
        slow = httpx.Timeout(self.load_timeout, connect=self.connect_timeout)
        tls = _tls_context(self.host)
        # a loopback server is never reached through a proxy (core/loopback.py): Go's client
        # does the same, and `ollama ps` must not answer while sparkctl says unreachable
        direct = {"trust_env": proxies_apply(self.host)}
        self._quick = ollama.AsyncClient(host=self.host, timeout=quick, verify=tls, **direct)
        self._slow = ollama.AsyncClient(host=self.host, timeout=slow, verify=tls, **direct)
        self._built = True

    def __repr__(self) -> str:
        return f"OllamaEngine({self.host!r})"

    async def __aenter__(self) -> "OllamaEngine":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._poll.close()
        if not self._built:
            return
        for closer in (self._quick.close, self._slow.close):
            try:
                await closer()
            except Exception:  # closing must not mask what the caller is handling
                pass

    # ------------------------------------------------------------------ simple calls
    def version_blocking(self) -> str:
        """/api/version in the calling thread (the dashboard's poll, which runs in one)."""
        try:
            return safe_line(self._poll.get("/api/version", "version")["version"])
        except EngineError:
            raise
        except Exception as exc:
            raise self._translate(exc, "version") from exc

    def ps_blocking(self) -> list[ResidentModel]:
        """/api/ps in the calling thread, read into sparkctl's own types."""
        try:
            return [_resident(m) for m in self._poll.get("/api/ps", "ps")["models"]]
        except EngineError:
            raise
        except Exception as exc:
            raise self._translate(exc, "ps") from exc

    def model_path_blocking(self, model: str) -> str:
        """Where the model's weights are (the FROM line of /api/show's Modelfile: its blob
        path), in the calling thread: what ties a resident model to its runner process
        (/api/ps's digest is the manifest's, not the weights blob's)."""
        try:
            answer = self._poll.get("/api/show", "show", {"model": model})
        except EngineError:
            raise
        except Exception as exc:
            raise self._translate(exc, "show", model) from exc
        return modelfile_directive(str(answer.get("modelfile") or ""), "FROM") if isinstance(answer, dict) else ""

    async def version(self) -> str:
        return await asyncio.to_thread(self.version_blocking)

    async def ps(self) -> list[ResidentModel]:
        return await asyncio.to_thread(self.ps_blocking)

    async def tags(self) -> list[LocalModel]:
        await self._ensure()
        try:
            response = await self._quick.list()
        except Exception as exc:
            raise self._translate(exc, "tags") from exc
        return [_local(m) for m in response.models]

    async def show(self, model: str) -> ShowInfo:
        await self._ensure()
        try:
            response = await self._quick.show(model)
        except Exception as exc:
            raise self._translate(exc, "show", model) from exc
        return ShowInfo(
            name=model,
            details=response.details.model_dump(exclude_none=True) if response.details else {},
            model_info=dict(response.modelinfo or {}),
            capabilities=tuple(response.capabilities or ()),
            parameters=response.parameters or "",
            modified_at=response.modified_at.isoformat() if response.modified_at else None,
            # the client's ShowResponse drops the server's `system` field: read the directive
            # from the Modelfile the server writes (parser.Command.String's quoting)
            system=modelfile_directive(response.modelfile or "", "SYSTEM"),
            template=response.template or "",
            draft=modelfile_directive(response.modelfile or "", "DRAFT"),
            model_path=modelfile_directive(response.modelfile or "", "FROM"),
        )

    async def delete(self, model: str) -> None:
        await self._ensure()
        try:
            await self._quick.delete(model)
        except Exception as exc:
            raise self._translate(exc, "delete", model) from exc

    async def status(self) -> EngineStatus:
        """Version and resident models in one answer that never raises."""
        try:
            version = await self.version()
            resident = await self.ps()
        except EngineError as exc:
            return EngineStatus(
                kind=self.kind, host=self.host, reachable=not isinstance(exc, EngineUnreachable), error=exc.message
            )
        return EngineStatus(kind=self.kind, host=self.host, reachable=True, version=version, resident=tuple(resident))

    # ------------------------------------------------------------------ load / unload
    async def load(
        self,
        model: str,
        keep_alive: float | str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> DoneEvent:
        """Load a model without generating (empty prompt); keep_alive < 0 keeps it forever."""
        await self._ensure()
        try:
            response = await self._slow.generate(
                model=model, prompt="", keep_alive=keep_alive, options=dict(options) if options else None
            )
        except Exception as exc:
            raise self._translate(exc, "load", model) from exc
        return _done(response)

    async def unload(self, model: str, wait_s: float = 15.0, poll_s: float = 0.1) -> None:
        """Ask the server to unload (keep_alive 0), then wait until /api/ps no longer lists it.

        The server answers at once and frees the memory afterwards; callers that plan
        memory need the second half. Raises EngineError if it is still there after wait_s.
        """
        await self._ensure()
        try:
            await self._quick.generate(model=model, prompt="", keep_alive=0)
        except Exception as exc:
            raise self._translate(exc, "unload", model) from exc
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        # /api/ps lists the shortest name ("qwen3:8b") for "library/qwen3:8b" and its kin
        key = model_key(model)
        while True:
            resident = await self.ps()
            if not any(model_key(r.name) == key for r in resident):
                return
            if loop.time() >= deadline:
                raise EngineError(f"{model} is still loaded on {self.host} {wait_s:g}s after the unload request")
            await asyncio.sleep(poll_s)

    # ------------------------------------------------------------------ streams
    async def pull(self, model: str) -> AsyncIterator[PullEvent]:
        """Progress lines of a download. Cancel by closing the iterator (`aclose()`):
        the connection is closed and the server keeps what it has for the next pull."""
        await self._ensure()
        stream: Any = None
        last_status = ""
        try:
            stream = await self._slow.pull(model, stream=True)
            async for part in stream:
                last_status = part.status or ""
                yield PullEvent(
                    status=part.status or "",
                    digest=part.digest,
                    total=part.total,
                    completed=part.completed,
                )
        except (GeneratorExit, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise self._translate(exc, "pull", model) from exc
        finally:
            if stream is not None:
                await _close_quietly(stream)
        if last_status != "success":
            raise EngineUnreachable(f"Ollama at {self.host} ended the pull of {model} before it succeeded")

    async def generate(
        self,
        model: str,
        prompt: str,
        *,
        options: Mapping[str, Any] | None = None,
        keep_alive: float | str | None = None,
        think: bool | str | None = None,
        system: str | None = None,
        raw: bool | None = None,
        format: str | dict | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Stream a completion: TokenEvents (thinking=True for reasoning text), then one DoneEvent.
        `format`: "json" or a JSON schema (structured output), sent only when given."""
        await self._ensure()
        extra = {"format": format} if format is not None else {}
        start = self._slow.generate(
            model=model, prompt=prompt, system=system, raw=raw,
            options=dict(options) if options else None, keep_alive=keep_alive, think=think, stream=True,
            **extra,
        )
        async for event in self._events(start, "generate", model, lambda part: (part.thinking, part.response)):
            yield event

    async def chat(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        options: Mapping[str, Any] | None = None,
        keep_alive: float | str | None = None,
        think: bool | str | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Like generate, over /api/chat (the model's chat template applies)."""
        await self._ensure()
        start = self._slow.chat(
            model=model, messages=[dict(m) for m in messages],
            options=dict(options) if options else None, keep_alive=keep_alive, think=think, stream=True,
        )

        def texts(part: Any) -> tuple[str | None, str | None]:
            message = part.message
            return (message.thinking, message.content) if message is not None else (None, None)

        async for event in self._events(start, "chat", model, texts):
            yield event

    async def _events(self, start: Any, action: str, model: str, texts: Any) -> AsyncIterator[StreamEvent]:
        """The shared body of generate and chat: client chunks -> TokenEvents + one DoneEvent,
        every failure translated, the connection closed however the stream ends."""
        stream: Any = None
        finished = False
        try:
            stream = await start
            async for part in stream:
                thinking, content = texts(part)
                if thinking:
                    yield TokenEvent(thinking, thinking=True)
                if content:
                    yield TokenEvent(content)
                if part.done:
                    finished = True
                    yield _done(part)
        except (GeneratorExit, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise self._translate(exc, action, model) from exc
        finally:
            if stream is not None:
                await _close_quietly(stream)
            elif hasattr(start, "close"):
                start.close()  # never awaited (cancelled first): no "never awaited" warning
        if not finished:
            raise EngineUnreachable(f"Ollama at {self.host} ended the {model} stream without its final chunk")

    # ------------------------------------------------------------------ errors
    def _translate(self, exc: BaseException, action: str, model: str | None = None) -> EngineError:
        """Turn anything the client stack raises into a base.py error with a short message."""
        if isinstance(exc, EngineError):
            return exc
        # a library never imported cannot have raised: the dashboard's calls import none of them
        httpx, ollama, pydantic = (sys.modules.get(m) for m in ("httpx", "ollama", "pydantic"))
        if ollama is not None and isinstance(exc, ollama.ResponseError):
            message = _clean(str(exc.error))
            status = exc.status_code
            if status == 404 or (status == -1 and "file does not exist" in message):
                return ModelNotFound(message, status)
            return EngineError(message, status)
        if httpx is not None:
            if isinstance(exc, httpx.ConnectTimeout):
                return EngineUnreachable(
                    f"Ollama at {self.host} did not accept a connection within {self.connect_timeout:g}s")
            if isinstance(exc, httpx.ReadTimeout) and action in ("generate", "chat"):
                return EngineStalled(f"Ollama at {self.host} sent nothing for {self.load_timeout:g}s during {action}")
            if isinstance(exc, httpx.TimeoutException):
                limit = self.load_timeout if action in ("load", "pull", "generate", "chat") else self.timeout
                return EngineUnreachable(f"Ollama at {self.host} did not answer {action} within {limit:g}s")
            if isinstance(exc, httpx.ConnectError):
                return EngineUnreachable(f"cannot connect to Ollama at {self.host} (is it running?)")
            if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
                return EngineUnreachable(f"connection to Ollama at {self.host} dropped during {action}")
            if isinstance(exc, httpx.TransportError):
                return EngineUnreachable(f"cannot talk to Ollama at {self.host}: {type(exc).__name__}")
        if isinstance(exc, ConnectionError):
            return EngineUnreachable(f"cannot connect to Ollama at {self.host} (is it running?)")
        if isinstance(exc, (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError)) or (
                pydantic is not None and isinstance(exc, pydantic.ValidationError)):
            return EngineError(f"unexpected {action} response from {self.host}: {type(exc).__name__}")
        return EngineError(f"{action} failed on {self.host}: {exc}")


_TLS_CONTEXT: ssl.SSLContext | None = None


def _tls_context(host: str) -> ssl.SSLContext | bool:
    """One verified TLS context per process for https hosts; none needed for http.

    Each httpx client otherwise builds its own from the CA bundle (~0.1 s apiece),
    which would cost the TUI its first-frame budget.
    """
    global _TLS_CONTEXT
    if not host.startswith("https://"):
        return False  # plain HTTP: no TLS is ever negotiated
    if _TLS_CONTEXT is None:
        import httpx

        _TLS_CONTEXT = httpx.create_ssl_context()
    return _TLS_CONTEXT


# ---------------------------------------------------------------------- conversions


async def _close_quietly(stream: Any) -> None:
    try:
        await stream.aclose()
    except Exception:
        pass


def _clean(message: str) -> str:
    """Collapse the registry's multi-line texts into one readable line."""
    return " ".join(message.split())


def _status_error(status: int, text: str) -> EngineError:
    """An HTTP error answer as the `ollama` client reads one: the body's "error" text when
    it is JSON, else the body; 404 is a missing model."""
    try:
        message = str(json.loads(text)["error"])
    except (ValueError, KeyError, TypeError):
        message = text
    message = _clean(message)
    if status == 404:
        return ModelNotFound(message, status)
    return EngineError(message, status)


_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy")


class _JsonGetter:
    """GET a JSON answer from Ollama in the calling thread: /api/version and /api/ps, which
    the dashboard asks every second.

    On plain http:// with no proxy in the environment (a Spark's own 127.0.0.1:11434): the
    standard library's http.client on kept-alive connections, ~0.1 ms of CPU a request
    against ~1 ms through httpx's async client, and no httpx import before the first
    frame. With TLS or a proxy configured: a sync httpx client, which honours both as every
    other call of this adapter does (the `ollama` client is httpx too).
    """

    def __init__(self, host: str, timeout: float, connect_timeout: float) -> None:
        from urllib.parse import urlsplit

        self.host = host
        self.timeout, self.connect_timeout = timeout, connect_timeout
        url = urlsplit(host)
        self._netloc, self._prefix = url.netloc, url.path.rstrip("/")
        self._trust_env = proxies_apply(host)
        proxied = self._trust_env and any(os.environ.get(v) or os.environ.get(v.upper()) for v in _PROXY_VARS)
        self._plain = url.scheme == "http" and not proxied
        self._idle: list[Any] = []  # kept-alive http.client connections (list.pop/append are atomic)
        self._httpx: Any = None

    def get(self, path: str, action: str, body: Any = None) -> Any:
        """GET `path` (POST with `body` as JSON when one is given) and the JSON answer."""
        if not self._plain:
            return self._get_httpx(path, body)
        import http.client

        for attempt in (0, 1):
            try:
                conn, reused = self._idle.pop(), True
            except IndexError:  # none idle (or another thread took the last one)
                conn, reused = self._connect(action), False
            try:
                if body is None:
                    conn.request("GET", self._prefix + path)
                else:
                    conn.request("POST", self._prefix + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
                response = conn.getresponse()
                body = response.read()
            except TimeoutError as exc:
                conn.close()
                raise EngineUnreachable(f"Ollama at {self.host} did not answer {action} within {self.timeout:g}s") \
                    from exc
            except (http.client.HTTPException, OSError) as exc:  # reset, broken pipe, a cut-off answer
                conn.close()
                if reused and attempt == 0:
                    continue  # the server closed a kept-alive connection meanwhile: a fresh one
                raise EngineUnreachable(f"connection to Ollama at {self.host} dropped during {action}") from exc
            except BaseException:
                conn.close()
                raise
            if response.will_close:
                conn.close()
            else:
                self._idle.append(conn)
            text = body.decode("utf-8", errors="replace")
            if response.status >= 400:
                raise _status_error(response.status, text)
            return json.loads(text)
        raise AssertionError("unreachable")

    def _connect(self, action: str) -> Any:
        import http.client

        conn = http.client.HTTPConnection(self._netloc, timeout=self.connect_timeout)
        try:
            conn.connect()
        except TimeoutError as exc:
            raise EngineUnreachable(
                f"Ollama at {self.host} did not accept a connection within {self.connect_timeout:g}s") from exc
        except OSError as exc:  # refused, no route, unknown host
            raise EngineUnreachable(f"cannot connect to Ollama at {self.host} (is it running?)") from exc
        conn.sock.settimeout(self.timeout)
        return conn

    def _get_httpx(self, path: str, body: Any = None) -> Any:
        if self._httpx is None:
            import httpx

            self._httpx = httpx.Client(base_url=self.host, timeout=httpx.Timeout(
                self.timeout, connect=self.connect_timeout), verify=_tls_context(self.host),
                trust_env=self._trust_env)
        response = self._httpx.get(path) if body is None else self._httpx.post(path, json=body)
        if response.status_code >= 400:
            raise _status_error(response.status_code, response.text)
        return response.json()

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()
        if self._httpx is not None:
            self._httpx.close()


def _details(details: Any) -> ModelDetails:
    """ModelDetails from the client's model object or from the API's JSON object."""
    if details is None:
        return ModelDetails()
    get = details.get if isinstance(details, Mapping) else (lambda key: getattr(details, key, None))
    return ModelDetails(
        family=get("family") or "",
        parameter_size=get("parameter_size") or "",
        quantization_level=get("quantization_level") or "",
        format=get("format") or "",
        parent_model=get("parent_model") or "",
        families=tuple(get("families") or ()),
    )


def _aware(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _resident(model: Mapping[str, Any]) -> ResidentModel:
    """One entry of /api/ps's "models" (api/types.go ProcessModelResponse)."""
    expires = model.get("expires_at")
    context = model.get("context_length")
    return ResidentModel(
        name=ModelName.served(model.get("name") or model.get("model") or ""),  # parsed here, keyed once
        size=int(model.get("size") or 0),
        size_vram=int(model.get("size_vram") or 0),
        digest=model.get("digest") or "",
        # RFC 3339 with nanoseconds: Python 3.11 reads it (to the microsecond)
        expires_at=_aware(datetime.fromisoformat(expires)) if expires else None,
        context_length=int(context) if context is not None else None,
        details=_details(model.get("details")),
    )


def _local(model: Any) -> LocalModel:
    return LocalModel(
        name=ModelName.served(model.model or ""),
        size=int(model.size or 0),
        digest=model.digest or "",
        modified_at=_aware(model.modified_at),
        details=_details(model.details),
    )


def modelfile_directive(modelfile: str, name: str) -> str:
    """The argument of a Modelfile directive (SYSTEM, DRAFT, ...) as `ollama show` writes it:
    on one line bare, or quoted (one double quote, or three when the text holds one) when it
    spans lines or starts or ends with a space (Ollama's parser.quote); "" when absent."""
    prefix = name.upper() + " "
    at = 0
    while True:
        at = modelfile.find(prefix, at)
        if at < 0:
            return ""
        if at == 0 or modelfile[at - 1] == "\n":
            break
        at += len(prefix)
    rest = modelfile[at + len(prefix):]
    for quote in ('"""', '"'):
        if rest.startswith(quote):
            end = rest.find(quote, len(quote))
            return rest[len(quote):end] if end >= 0 else rest[len(quote):]
    return rest.split("\n", 1)[0]


def _done(part: Any) -> DoneEvent:
    context = getattr(part, "context", None)
    return DoneEvent(
        done_reason=part.done_reason,
        total_duration_ns=part.total_duration or 0,
        load_duration_ns=part.load_duration or 0,
        prompt_eval_count=part.prompt_eval_count or 0,
        prompt_eval_duration_ns=part.prompt_eval_duration or 0,
        eval_count=part.eval_count or 0,
        eval_duration_ns=part.eval_duration or 0,
        raw=part.model_dump(exclude_none=True, exclude={"context", "message", "response", "thinking"}),
        context_ids=tuple(int(t) for t in context) if context else None,
    )
