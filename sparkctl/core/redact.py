"""Credentials never reach the screen, a log line or a run tag.

A tracking URI may name a team MLflow server with credentials
(``http://user:token@host:5000``), an engine URL may carry ``?api_key=...``, and MLflow's
and requests' exceptions quote the full request URL. Everything sparkctl shows or records
about such a URI goes through here first.

Policy (decided, not configurable):

- The whole userinfo becomes ``***``: ``http://alice:s3cret@host:5000`` ->
  ``http://***@host:5000``. The user name goes too: a token is often passed as the user
  (``http://TOKEN@host``, ``TOKEN:x-oauth-basic``), and which half is secret cannot be told
  from the text. Host, port, path and the other query parameters stay, so the user can
  still see where sparkctl is pointed.
- A query (or fragment) parameter whose name looks secret has its value replaced:
  ``?api_key=abc&x=1`` -> ``?api_key=***&x=1``. Names compare case-insensitively with
  ``-``, ``_`` and ``.`` ignored: token, key, apikey, access_token, password, passwd, pwd,
  secret, sig, signature, auth, authorization, credential(s), and any name *ending* in
  token, key, secret, password, passwd, signature or credential(s) (``refresh_token``,
  ``X-Amz-Signature``, ``client_secret``).
- Anything else is left exactly as it was: ``sqlite:///`` paths, plain URLs, host names.
- Pure and total: no I/O, never raises. Should redaction itself fail on some input, the
  answer is ``***`` (all of it hidden), never the input.

Redacting is idempotent: a redacted text redacts to itself.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

REDACTED = "***"

_EXACT_NAMES = frozenset({
    "token", "key", "apikey", "accesstoken", "password", "passwd", "pwd", "secret", "sig",
    "signature", "auth", "authorization", "credential", "credentials",
})
_SUFFIXES = ("token", "key", "secret", "password", "passwd", "signature", "credential", "credentials")

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
# A URL inside free text: a scheme, then everything up to whitespace, a quote or an angle
# bracket (exception messages quote URLs with '...' or "...", reprs with '...').
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]+")
# Characters that end a sentence or close a bracket right after a URL, not part of it.
_TRAILING = ".,;:!?)]}"
# user:password@host without a scheme, standing on its own in the text (after the start,
# whitespace, a quote, a bracket, '=', ',' or ';').
_BARE_USERINFO = re.compile(
    r"(?<![^\s'\"<>(\[{,;=])[^\s/@:'\"<>()\[\]{},;=]+:[^\s/@'\"<>]*@(?=[A-Za-z0-9\[])"
)
# name=value in free text (a relative URL in an urllib3 message, a bare "token=...").
_PARAM_IN_TEXT = re.compile(r"(?<![A-Za-z0-9_.\-])([A-Za-z][A-Za-z0-9_.\-]*)=([^\s&;'\"#,)]+)")
# Authorization header values and bearer tokens quoted in a message.
_AUTH_HEADER = re.compile(
    r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)((?:bearer|basic|token)\s+)?([^\s'\",;]+)"
)
_BEARER = re.compile(r"\b(Bearer\s+)([A-Za-z0-9._~+/\-]{8,}=*)")


def is_secret_name(name: str) -> bool:
    """Whether a query parameter (or config key) called ``name`` holds a secret."""
    try:
        norm = re.sub(r"[^a-z0-9]", "", unquote(str(name)).lower())
    except Exception:
        return True
    return bool(norm) and (norm in _EXACT_NAMES or norm.endswith(_SUFFIXES))


def redact_uri(uri: str) -> str:
    """``uri`` with its userinfo and secret query values replaced by ``***``.

    ``http://u:p@h:5000/x?token=t&a=1`` -> ``http://***@h:5000/x?token=***&a=1``;
    ``u:p@h:5000`` (no scheme) -> ``***@h:5000``; ``sqlite:////abs/mlflow.db`` unchanged.
    Never raises: junk comes back as it was (nothing to redact) or as ``***``."""
    try:
        if uri is None:
            return ""
        if not isinstance(uri, str):
            uri = str(uri)
        core = uri.strip()
        if not core:
            return uri
        start = uri.index(core)
        return uri[:start] + _redact_uri(core) + uri[start + len(core):]
    except Exception:
        return REDACTED


def redact_text(text: str) -> str:
    """Free text (an exception message, a log line) with every credential-bearing URI in it
    redacted as by ``redact_uri``, plus bare ``user:pass@host``, ``token=...``-style
    parameters and ``Authorization``/``Bearer`` values. Never raises."""
    try:
        if text is None:
            return ""
        if not isinstance(text, str):
            text = str(text)
        if not text:
            return text
        out = _URL_IN_TEXT.sub(_redact_url_match, text)
        out = _BARE_USERINFO.sub(REDACTED + "@", out)
        out = _PARAM_IN_TEXT.sub(_redact_param_match, out)
        out = _AUTH_HEADER.sub(lambda m: m.group(1) + (m.group(2) or "") + REDACTED, out)
        out = _BEARER.sub(lambda m: m.group(1) + REDACTED, out)
        return out
    except Exception:
        return REDACTED


def redact_config_dict(data: Any) -> Any:
    """A copy of a config mapping (``config.to_toml_dict``) fit to print: values of keys
    named like a location (``uri``, ``url``, ``host``, ``*_uri``, ``*_url``) go through
    ``redact_uri``; values of keys named like a secret (``api_key``, ``token``...) become
    ``***``; a URL inside any other text (``[hosts.NAME] engine``, a hook's command line)
    is redacted where it stands. Nested tables are walked; other values are kept as they are."""
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            k = str(key).lower()
            if isinstance(value, (dict, list)):
                out[key] = redact_config_dict(value)
            elif isinstance(value, str) and is_secret_name(k):
                out[key] = REDACTED if value else value
            elif isinstance(value, str) and (k in ("uri", "url", "host") or k.endswith(("_uri", "_url", "_host"))):
                out[key] = redact_uri(value)
            else:
                out[key] = redact_config_dict(value)
        return out
    if isinstance(data, list):
        return [redact_config_dict(v) for v in data]
    if isinstance(data, str):
        return _redact_urls_in(data)
    return data


# ---- internals ----------------------------------------------------------------------------


def _redact_uri(s: str) -> str:
    m = _SCHEME.match(s)
    prefix, rest = (s[: m.end()], s[m.end():]) if m else ("", s)
    auth, tail = _split_authority(rest)
    if "@" in auth:
        userinfo, _, hostport = auth.rpartition("@")
        if userinfo:
            auth = REDACTED + "@" + hostport
    elif m and "@" in tail and _looks_like_broken_userinfo(auth):
        # An unencoded '/', '?' or '#' in the password ended the authority early:
        # "http://u:pa/ss@host" puts "ss@host" in the path. Hide up to that '@'.
        at = tail.index("@")
        auth, tail = _split_authority(tail[at + 1 :])
        auth = REDACTED + "@" + auth
    path_query, hsep, frag = tail.partition("#")
    path, qsep, query = path_query.partition("?")
    if qsep:
        query = _redact_query(query)
    if hsep and "=" in frag:
        frag = _redact_query(frag)
    return prefix + auth + path + qsep + query + hsep + frag


def _split_authority(rest: str) -> tuple[str, str]:
    for i, ch in enumerate(rest):
        if ch in "/?#":
            return rest[:i], rest[i:]
    return rest, ""


def _looks_like_broken_userinfo(auth: str) -> bool:
    """``user:pa`` (a port that is not a number) rather than ``host`` or ``host:5000``."""
    if not auth or auth.startswith("[") or ":" not in auth:
        return False
    port = auth.split(":", 1)[1]
    return not port.isdigit()


def _redact_query(query: str) -> str:
    parts = re.split(r"([&;])", query)
    for i, part in enumerate(parts):
        if part in ("&", ";"):
            continue
        name, eq, value = part.partition("=")
        if eq and value and value != REDACTED and is_secret_name(name):
            parts[i] = name + "=" + REDACTED
    return "".join(parts)


def _redact_urls_in(text: str) -> str:
    """Only the URLs in `text` redacted (a config value is the user's own words otherwise)."""
    try:
        return _URL_IN_TEXT.sub(_redact_url_match, text)
    except Exception:
        return REDACTED


def _redact_url_match(m: re.Match) -> str:
    url = m.group(0)
    core = url.rstrip(_TRAILING)
    # a closing bracket that belongs to an IPv6 host ("http://[::1]") stays in the URL
    while core.count("[") > core.count("]") and len(core) < len(url) and url[len(core)] == "]":
        core += "]"
    return redact_uri(core) + url[len(core):]


def _redact_param_match(m: re.Match) -> str:
    name, value = m.group(1), m.group(2)
    if value == REDACTED or value.startswith(REDACTED) or not is_secret_name(name):
        return m.group(0)
    return f"{name}={REDACTED}"
