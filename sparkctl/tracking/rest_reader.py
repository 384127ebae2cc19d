"""Runs read from an MLflow tracking server over its documented REST API, with httpx.

MLflow's client speaks this same API to a server (``runs/search``,
``experiments/get-by-name``, ``metrics/get-history``, the ``mlflow-artifacts`` proxy), but
importing it costs seconds; a plain HTTP client answers `sparkctl runs` and the
dashboard's engine-change note without it. Filters and orders pass through unchanged: the
server parses them, so the answers are the client's.

Credentials are taken where MLflow takes them: user:password in the URI,
``MLFLOW_TRACKING_USERNAME``/``PASSWORD`` (or ``~/.mlflow/credentials``),
``MLFLOW_TRACKING_TOKEN``, ``MLFLOW_TRACKING_INSECURE_TLS``,
``MLFLOW_TRACKING_SERVER_CERT_PATH`` and ``MLFLOW_TRACKING_CLIENT_CERT_PATH``. Where MLflow
would sign or decorate requests some other way (AWS SigV4, an auth plugin, request-header
plugins, a workspace named in ``MLFLOW_WORKSPACE``) this reader raises ``Unsupported`` and
the client is used. Nothing here depends on the server's schema: the REST API is the same
across the MLflow releases pyproject admits (scripts/mlflow_store_fixtures.py checks this
reader against each release's own server).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

from sparkctl.tracking.search_filter import Unsupported

API = "/api/2.0/mlflow"
ARTIFACTS_API = "/api/2.0/mlflow-artifacts/artifacts"
_HISTORY_PAGE = 25_000
# settings that make MLflow's client sign or extend requests in ways this reader does not
_EXOTIC_ENV = ("MLFLOW_TRACKING_AWS_SIGV4", "MLFLOW_TRACKING_AUTH")
_PLUGIN_GROUPS = ("mlflow.request_header_provider", "mlflow.request_auth_provider")


class RestError(Exception):
    """The server answered with an error (``str``: its code and message, one line)."""


class RestRunReader:
    """Searches of one tracking server. ``http_error(exc, action)`` turns a transport
    failure into the caller's error (MlflowStore's: unreachable or not)."""

    def __init__(self, uri: str, timeout_s: float) -> None:
        self.base = uri.rstrip("/")
        self.timeout_s = timeout_s
        self._client: Any = None

    def _http(self):
        if self._client is None:
            if any(_truthy(os.environ.get(k)) for k in _EXOTIC_ENV) or _plugins_installed():
                raise Unsupported("MLflow request plugins or signing are configured")
            if (os.environ.get("MLFLOW_WORKSPACE") or "").strip():
                # MLflow's client (3.10+) names it in a header the server scopes every answer by
                raise Unsupported("MLFLOW_WORKSPACE names an MLflow workspace")
            import httpx

            auth = None
            token = os.environ.get("MLFLOW_TRACKING_TOKEN")
            user, password = _credentials()
            if token:
                auth = _Bearer(token)
            elif user and password:
                auth = httpx.BasicAuth(user, password)
            verify: Any = True
            if _truthy(os.environ.get("MLFLOW_TRACKING_INSECURE_TLS")):
                verify = False
            elif os.environ.get("MLFLOW_TRACKING_SERVER_CERT_PATH"):
                verify = os.environ["MLFLOW_TRACKING_SERVER_CERT_PATH"]
            timeout = float(os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT") or self.timeout_s)
            from sparkctl.core.loopback import proxies_apply

            # a remote server honours http(s)_proxy/no_proxy; one on this machine is asked directly
            self._client = httpx.Client(auth=auth, verify=verify, timeout=timeout,
                                        cert=os.environ.get("MLFLOW_TRACKING_CLIENT_CERT_PATH") or None,
                                        trust_env=proxies_apply(self.base))
        return self._client

    def _call(self, method: str, path: str, **kw) -> dict[str, Any]:
        response = self._http().request(method, self.base + path, **kw)
        if response.status_code >= 400:
            try:
                body = response.json()
                what = f"{body.get('error_code', 'HTTP ' + str(response.status_code))}: {body.get('message', '')}"
            except ValueError:
                what = f"HTTP {response.status_code}: {response.text[:200]}"
            raise RestError(" ".join(what.split()))
        return response.json() if response.content else {}

    def experiment(self, name: str) -> tuple[str, str] | None:
        try:
            body = self._call("GET", API + "/experiments/get-by-name", params={"experiment_name": name})
        except RestError as exc:
            if str(exc).startswith("RESOURCE_DOES_NOT_EXIST"):
                return None
            raise
        exp = body.get("experiment") or {}
        return str(exp["experiment_id"]), exp.get("lifecycle_stage", "active")

    def search_page(self, experiment_id: str, filter_string: str = "", order_by: list[str] | None = None,
                    max_results: int = 100, page_token: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
        payload: dict[str, Any] = {"experiment_ids": [experiment_id], "filter": filter_string,
                                   "run_view_type": "ACTIVE_ONLY", "max_results": max_results}
        if order_by:
            payload["order_by"] = list(order_by)
        if page_token:
            payload["page_token"] = page_token
        body = self._call("POST", API + "/runs/search", json=payload)
        return [_run_dict(r) for r in body.get("runs") or []], (body.get("next_page_token") or None)

    def metric_points(self, run_id: str, key: str) -> list[tuple[int, int, float]]:
        """(step, timestamp, value) of every value of one metric of one run, as the server
        orders them."""
        points: list[dict] = []
        token = None
        while True:
            params = {"run_id": run_id, "metric_key": key, "max_results": _HISTORY_PAGE}
            if token:
                params["page_token"] = token
            body = self._call("GET", API + "/metrics/get-history", params=params)
            points += body.get("metrics") or []
            token = body.get("next_page_token")
            if not token:
                break
        return [(int(m.get("step", 0)), int(m.get("timestamp", 0)), float(m["value"])) for m in points]

    def read_artifact(self, run_id: str, path: str) -> str:
        """A text artifact stored behind the server's artifact proxy (``mlflow-artifacts:``)."""
        info = (self._call("GET", API + "/runs/get", params={"run_id": run_id}).get("run") or {}).get("info") or {}
        uri = urlparse(info.get("artifact_uri") or "")
        if uri.scheme != "mlflow-artifacts" or uri.netloc or ".." in Path(path).parts:
            raise Unsupported(f"artifacts of {run_id} are not behind this server's proxy")
        where = "/".join(p for p in (uri.path.strip("/"), path.strip("/")) if p)
        response = self._http().get(self.base + ARTIFACTS_API + "/" + quote(where))
        if response.status_code >= 400:
            raise Unsupported(f"artifact {path!r} of {run_id}: HTTP {response.status_code}")
        return response.content.decode("utf-8")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


class _Bearer:
    """httpx auth flow adding MLflow's bearer token."""

    def __init__(self, token: str) -> None:
        self.token = token

    def auth_flow(self, request):
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _credentials() -> tuple[str | None, str | None]:
    """Username and password as MLflow reads them: the environment first, then the
    ``[mlflow]`` section of ~/.mlflow/credentials."""
    user, password = os.environ.get("MLFLOW_TRACKING_USERNAME"), os.environ.get("MLFLOW_TRACKING_PASSWORD")
    path = Path("~/.mlflow/credentials").expanduser()
    if (not user or not password) and path.is_file():
        import configparser

        cfg = configparser.ConfigParser()
        cfg.read(path)
        if "mlflow" in cfg:
            user = user or cfg["mlflow"].get("mlflow_tracking_username")
            password = password or cfg["mlflow"].get("mlflow_tracking_password")
    return user, password


def _plugins_installed() -> bool:
    from importlib.metadata import entry_points

    return any(entry_points(group=g) for g in _PLUGIN_GROUPS)


def _run_dict(run: dict[str, Any]) -> dict[str, Any]:
    """A run of the REST API's JSON as ``MlflowStore`` returns runs."""
    info, data = run.get("info") or {}, run.get("data") or {}

    def num(x):
        return None if x is None else int(x)

    return {
        "run_id": info.get("run_id") or info.get("run_uuid"),
        "run_name": info.get("run_name"),
        "experiment_id": str(info.get("experiment_id")),
        "status": info.get("status"),
        "start_time": num(info.get("start_time")),
        "end_time": num(info.get("end_time")),
        "artifact_uri": info.get("artifact_uri"),
        "params": {p["key"]: p.get("value", "") for p in data.get("params") or []},
        "tags": {t["key"]: t.get("value", "") for t in data.get("tags") or []},
        "metrics": {m["key"]: float(m["value"]) for m in data.get("metrics") or []},
    }
