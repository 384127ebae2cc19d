"""sparkctl.core.redact: credentials in URIs and free text become ***; nothing else moves."""

from __future__ import annotations

import pytest

from sparkctl.core.redact import REDACTED, is_secret_name, redact_config_dict, redact_text, redact_uri


@pytest.mark.parametrize("uri, expected", [
    # userinfo: the whole of it goes, user name included
    ("http://alice:s3cret@127.0.0.1:9", "http://***@127.0.0.1:9"),
    ("https://user:token@mlflow.team:5000/api/2.0", "https://***@mlflow.team:5000/api/2.0"),
    ("http://TOKEN@host:5000", "http://***@host:5000"),  # token-only userinfo
    ("http://alice:p%40ss@host", "http://***@host"),  # encoded '@' in the password
    ("http://alice:p@ss@host:1/x", "http://***@host:1/x"),  # raw '@' in the password
    ("http://u:pa/ss@host:5000/api", "http://***@host:5000/api"),  # raw '/' in the password
    ("postgresql+psycopg2://ml:pw@db:5432/mlflow", "postgresql+psycopg2://***@db:5432/mlflow"),
    # IPv6 hosts
    ("http://u:p@[::1]:5000/x", "http://***@[::1]:5000/x"),
    ("http://[fe80::1%25eth0]:8080", "http://[fe80::1%25eth0]:8080"),
    # no scheme
    ("alice:s3cret@host:5000", "***@host:5000"),
    ("host:5000", "host:5000"),
    ("127.0.0.1:11434", "127.0.0.1:11434"),
    # secret query parameters, any case and spelling; others kept
    ("http://h:8080/v1?api_key=abc&model=x", "http://h:8080/v1?api_key=***&model=x"),
    ("http://h/?TOKEN=abc", "http://h/?TOKEN=***"),
    ("http://h/?apikey=1&ApiKey=2&access_token=3&password=4&secret=5&sig=6&signature=7&key=8",
     "http://h/?apikey=***&ApiKey=***&access_token=***&password=***&secret=***&sig=***&signature=***&key=***"),
    ("https://b.s3/o?X-Amz-Credential=c&X-Amz-Signature=s&X-Amz-Date=d",
     "https://b.s3/o?X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Date=d"),
    ("http://h/#access_token=abc&state=1", "http://h/#access_token=***&state=1"),
    ("h:8080?token=abc", "h:8080?token=***"),
    ("http://h/?token=", "http://h/?token="),  # nothing to hide
    ("http://u:p@h/?token=t#frag", "http://***@h/?token=***#frag"),
    # left alone
    ("sqlite:////home/me/.local/share/sparkctl/mlflow.db", "sqlite:////home/me/.local/share/sparkctl/mlflow.db"),
    ("sqlite:///relative/mlflow.db?mode=ro", "sqlite:///relative/mlflow.db?mode=ro"),
    ("sqlite:///:memory:", "sqlite:///:memory:"),
    ("file:///srv/mlruns/a@b", "file:///srv/mlruns/a@b"),
    ("http://127.0.0.1:11434", "http://127.0.0.1:11434"),
    ("http://host/path/user@example.com", "http://host/path/user@example.com"),
    ("databricks://profile:prefix", "databricks://profile:prefix"),
    ("http://@host", "http://@host"),
    ("  http://u:p@h  ", "  http://***@h  "),
])
def test_redact_uri(uri, expected):
    assert redact_uri(uri) == expected
    assert redact_uri(expected) == expected  # idempotent


@pytest.mark.parametrize("junk", [
    "", "   ", "http://", "://", "://@", "@", "[[[", "http://[::1", "http://u:p@[::1", "%zz%",
    "http://h/?&&==&", "\x00\xff", "a" * 10_000, "?token", "#", "http://:@:/?#",
])
def test_redact_uri_never_raises_on_junk(junk):
    out = redact_uri(junk)
    assert isinstance(out, str)


@pytest.mark.parametrize("value, expected", [(None, ""), (123, "123"), (b"x", "b'x'")])
def test_redact_uri_non_strings(value, expected):
    assert redact_uri(value) == expected
    assert isinstance(redact_text(value), str)


def test_redact_text_mlflow_exception_message():
    # What MLflow 3 raises for an unreachable server (captured verbatim, port 9).
    msg = ("API request to http://alice:s3cret@127.0.0.1:9?token=abc/api/2.0/mlflow/experiments/"
           "get-by-name failed with exception HTTPConnectionPool(host='127.0.0.1', port=9): Max retries "
           "exceeded with url: /?token=abc/api/2.0/mlflow/experiments/get-by-name&experiment_name=x "
           "(Caused by NewConnectionError(\"HTTPConnection(host='127.0.0.1', port=9): Failed to "
           "establish a new connection: [Errno 111] Connection refused\"))")
    out = redact_text(msg)
    assert "s3cret" not in out and "alice" not in out and "abc" not in out
    assert "http://***@127.0.0.1:9?token=***" in out
    assert "HTTPConnectionPool(host='127.0.0.1', port=9)" in out
    assert "experiment_name=x" in out and "Connection refused" in out
    assert redact_text(out) == out


@pytest.mark.parametrize("text, expected", [
    ("MlflowStore('http://u:p@h:1', experiment='x')", "MlflowStore('http://***@h:1', experiment='x')"),
    ('cannot reach "https://u:p@h/x".', 'cannot reach "https://***@h/x".'),
    ("see (http://u:p@h:1/x).", "see (http://***@h:1/x)."),
    ("bad port in Ollama host 'http://alice:pw@box:11434'", "bad port in Ollama host 'http://***@box:11434'"),
    ("at [http://[::1]:80] and http://u:p@[::1]:80,", "at [http://[::1]:80] and http://***@[::1]:80,"),
    ("HTTPConnectionPool(host='u:p@h', port=9)", "HTTPConnectionPool(host='***@h', port=9)"),
    ("proxy alice:s3cret@proxy.lan:3128 refused", "proxy ***@proxy.lan:3128 refused"),
    ("GET /v1/models?api_key=abc HTTP/1.1", "GET /v1/models?api_key=*** HTTP/1.1"),
    ("header Authorization: Bearer abcdefghijkl", "header Authorization: Bearer ***"),
    ("sent Bearer eyJhbGciOiJIUzI1NiJ9.x.y", "sent Bearer ***"),
    # nothing secret: unchanged
    ("MLflow server sqlite:////tmp/x/mlflow.db is fine", "MLflow server sqlite:////tmp/x/mlflow.db is fine"),
    ("connection refused at 12:30 on http://127.0.0.1:5000/api", "connection refused at 12:30 on http://127.0.0.1:5000/api"),
    ("HTTP Basic authentication failed", "HTTP Basic authentication failed"),
    ("num_ctx=8192, cache_prompt=false", "num_ctx=8192, cache_prompt=false"),
    ("", ""),
])
def test_redact_text(text, expected):
    assert redact_text(text) == expected
    assert redact_text(expected) == expected


def test_redact_text_many_urls_and_long_text():
    text = " ".join(f"http://u{i}:pw{i}x@h{i}:1/p" for i in range(200))
    out = redact_text(text)
    assert "pw" not in out and out.count("***@") == 200


@pytest.mark.parametrize("name, secret", [
    ("token", True), ("api_key", True), ("API-KEY", True), ("apiKey", True), ("access_token", True),
    ("refresh_token", True), ("client_secret", True), ("X-Amz-Signature", True), ("sig", True),
    ("password", True), ("passwd", True), ("credentials", True), ("auth", True),
    ("model", False), ("experiment_name", False), ("num_ctx", False), ("mode", False), ("", False),
    ("signal", False), ("design", False),
])
def test_is_secret_name(name, secret):
    assert is_secret_name(name) is secret


def test_redact_config_dict():
    data = {
        "engine": {"kind": "ollama", "host": "http://u:p@box:11434", "timeout_s": 5.0},
        "tracking": {"uri": "http://alice:s3cret@127.0.0.1:9", "experiment": "sparkctl-bench"},
        "engines": {"llama": {"kind": "openai", "url": "http://h:8080?api_key=k", "api_key": "sk-1", "model": ""}},
        "bench": {"prompt": "token=not-a-url key: value", "reps": 5},
        "lanes": {},
    }
    out = redact_config_dict(data)
    assert out["engine"] == {"kind": "ollama", "host": "http://***@box:11434", "timeout_s": 5.0}
    assert out["tracking"] == {"uri": "http://***@127.0.0.1:9", "experiment": "sparkctl-bench"}
    assert out["engines"]["llama"] == {"kind": "openai", "url": "http://h:8080?api_key=***", "api_key": REDACTED,
                                       "model": ""}
    assert out["bench"] == data["bench"]  # free text is not a location
    assert data["tracking"]["uri"] == "http://alice:s3cret@127.0.0.1:9"  # the input is not modified
