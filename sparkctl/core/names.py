"""Model names, checked the way Ollama checks them, before any request is sent.

Rules follow Ollama's `types/model/name.go` (ParseNameBare / isValidPart):

    [host/][namespace/]model[:tag]

- The tag is split off at the last ':' only when it comes after the last '/', so a
  host may carry a port ("localhost:5000/ns/model").
- A host may start with a scheme ("https://"), which Ollama drops.
- Every part starts with a letter, digit or '_' and goes on with letters, digits,
  '_', '-' or '.'; a namespace may not contain '.'; only the host may contain ':'.
- Lengths: host 1-350, namespace, model and tag 1-80.
- A separator with nothing on one side ("model:", "/model", "a//b") is an empty part.
- Newer servers also accept `[host/]namespace/{skill|agent|mcp}/name` for things that
  are not language models; sparkctl manages models, so it refuses those with a clear
  message rather than sending them on.

Names compare case-insensitively in Ollama ("Mistral" and "mistral" are one model), and
a missing tag means ":latest", a missing namespace "library", a missing host
"registry.ollama.ai". `same_model` applies those rules so a lane's "qwen3" matches the
"qwen3:latest" that /api/ps reports.

A name is parsed once, where it enters (a CLI argument, a TUI field, the config), into a
`ModelName` that every layer passes on as it is: a str (what the engine is sent, what a
record says) that also holds its parts and its comparison `key`. Parsing a ModelName again
returns it unchanged, and `model_key` of one reads its key: no layer below the edge parses
the name again.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

DEFAULT_HOST = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"
DEFAULT_TAG = "latest"

MAX_HOST_LEN = 350
MAX_PART_LEN = 80

# Ollama's reserved "kind" segment (namespace/kind/name) for skills, agents, MCP servers.
_NON_MODEL_KINDS = frozenset({"skill", "agent", "mcp"})


class InvalidModelName(ValueError):
    """A model name Ollama would reject; the message is one line and names the input."""


def _joined(host: str, namespace: str, model: str, tag: str) -> str:
    out = ""
    if host:
        out += host + "/"
    if namespace:
        out += namespace + "/"
    out += model
    if tag:
        out += ":" + tag
    return out


class ModelName(str):
    """A model name, parsed: the text the engine is sent (a str, so it goes anywhere a name
    goes, unchanged), its parts (empty strings for parts the user left out) and `key`, the
    comparison key under which equal names collide. Immutable.

    `checked` says whether Ollama's rules were applied (parse_model_name): a name an
    OpenAI-compatible server serves (a file name, a Hugging Face path) is that server's own
    and only kept (`ModelName.served`)."""

    host: str
    namespace: str
    model: str
    tag: str
    key: str
    checked: bool

    def __new__(cls, host: str = "", namespace: str = "", model: str = "", tag: str = "") -> "ModelName":
        """From parts that already follow Ollama's rules (parse_model_name checks them)."""
        self = super().__new__(cls, _joined(host, namespace, model, tag))
        for name, value in (("host", host), ("namespace", namespace), ("model", model), ("tag", tag),
                            ("checked", True)):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "key", _joined(host or DEFAULT_HOST, namespace or DEFAULT_NAMESPACE, model,
                                                tag or DEFAULT_TAG).lower())
        return self

    @classmethod
    def served(cls, text: str) -> "ModelName":
        """A name as an engine knows it, without Ollama's rules (an OpenAI-compatible server's
        model, or a name an engine reported): kept exactly; its key is `model_key`'s."""
        if isinstance(text, ModelName):
            return text
        self = str.__new__(cls, text)
        for name, value in (("host", ""), ("namespace", ""), ("model", str(text)), ("tag", ""),
                            ("checked", False), ("key", _key_of(str(text)))):
            object.__setattr__(self, name, value)
        return self

    @classmethod
    def of(cls, text: str) -> "ModelName":
        """`text` as a ModelName that is sent exactly as given: parsed by Ollama's rules when
        they leave it unchanged, else kept as served (for callers that hand over a plain str)."""
        if isinstance(text, ModelName):
            return text
        try:
            parsed = parse_model_name(text)
        except InvalidModelName:
            return cls.served(text)
        return parsed if parsed == text else cls.served(text)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"ModelName is immutable (cannot set {name})")

    def __getnewargs__(self) -> tuple[str, str, str, str]:  # copy and pickle; the state restores the rest
        return (self.host, self.namespace, self.model, self.tag)

    def __str__(self) -> str:
        return str.__str__(self)

    def qualified(self) -> ModelName:
        """With Ollama's defaults filled in for missing host, namespace and tag."""
        return ModelName(
            host=self.host or DEFAULT_HOST,
            namespace=self.namespace or DEFAULT_NAMESPACE,
            model=self.model,
            tag=self.tag or DEFAULT_TAG,
        )


def _is_start_char(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "_")


def _check_part(kind: str, value: str, original: str) -> None:
    """Raise InvalidModelName when `value` is not a valid `kind` part."""
    limit = MAX_HOST_LEN if kind == "host" else MAX_PART_LEN
    if value == "":
        raise InvalidModelName(f"invalid model name {original!r}: the {kind} is empty")
    if len(value) > limit:
        raise InvalidModelName(
            f"invalid model name {original!r}: the {kind} is {len(value)} characters long "
            f"(at most {limit})"
        )
    if not _is_start_char(value[0]):
        raise InvalidModelName(
            f"invalid model name {original!r}: the {kind} {value!r} must start with a "
            f"letter, digit or '_'"
        )
    for c in value[1:]:
        if _is_start_char(c) or c in "-_":
            continue
        if c == "." and kind != "namespace":
            continue
        if c == ":" and kind == "host":
            continue
        if c == "." and kind == "namespace":
            raise InvalidModelName(
                f"invalid model name {original!r}: the namespace {value!r} may not contain '.'"
            )
        raise InvalidModelName(
            f"invalid model name {original!r}: {c!r} is not allowed in the {kind} {value!r}"
        )


def parse_model_name(s: str) -> ModelName:
    """Split and check a name; raise InvalidModelName with the reason when Ollama would refuse it.

    Surrounding whitespace is ignored (names come from forms and config files); the
    parts keep their case. A ModelName already parsed is returned as it is.
    """
    if isinstance(s, ModelName) and s.checked:
        return s
    if not isinstance(s, str):
        raise InvalidModelName(f"invalid model name {s!r}: not a string")
    original = s = str(s)
    s = s.strip()
    if s == "":
        raise InvalidModelName(f"invalid model name {original!r}: the name is empty")
    if any(c.isspace() for c in s):
        raise InvalidModelName(f"invalid model name {original!r}: it contains whitespace")

    tag = ""
    if s.rfind(":") > s.rfind("/"):
        s, _, tag = s.rpartition(":")
        if tag == "":
            raise InvalidModelName(f"invalid model name {original!r}: the tag after ':' is empty")

    host = namespace = ""
    # Split the path on '/', keeping a scheme's "//" inside the host.
    scheme = ""
    if "://" in s:
        scheme, _, s = s.partition("://")
        if scheme.lower() not in ("http", "https"):
            raise InvalidModelName(
                f"invalid model name {original!r}: unsupported scheme {scheme + '://'!r}"
            )
    pieces = s.split("/")
    if len(pieces) in (3, 4) and pieces[-2] in _NON_MODEL_KINDS:
        # Ollama matches the kind case-sensitively: "ns/skill/x" is a skill, "ns/Skill/x"
        # is host "ns", namespace "Skill".
        raise InvalidModelName(
            f"invalid model name {original!r}: it names an Ollama {pieces[-2]}, not a model"
        )
    if len(pieces) == 1:
        (model,) = pieces
        if scheme:
            raise InvalidModelName(
                f"invalid model name {original!r}: a scheme needs host/namespace/model"
            )
    elif len(pieces) == 2:
        namespace, model = pieces
        if scheme:
            raise InvalidModelName(
                f"invalid model name {original!r}: a scheme needs host/namespace/model"
            )
    elif len(pieces) == 3:
        host, namespace, model = pieces
    else:
        raise InvalidModelName(
            f"invalid model name {original!r}: too many '/' parts "
            f"(expected [host/][namespace/]model[:tag])"
        )

    if host or len(pieces) == 3:
        _check_part("host", host, original)
    if namespace or len(pieces) >= 2:
        _check_part("namespace", namespace, original)
    _check_part("model", model, original)
    if tag:
        _check_part("tag", tag, original)
    return ModelName(host=host, namespace=namespace, model=model, tag=tag)


def validate_model_name(s: str) -> ModelName:
    """The name as it should be sent to the engine (a ModelName), or InvalidModelName.

    Normalisation is limited to what Ollama itself ignores: surrounding whitespace and
    an http(s):// scheme in front of the host. The tag is not added; see
    `with_default_tag`.
    """
    return parse_model_name(s)


def with_default_tag(name: str) -> str:
    """`name` with ":latest" added when it has no tag (how Ollama reports it in /api/ps)."""
    parsed = parse_model_name(name)
    if parsed.tag:
        return str(parsed)
    return str(ModelName(parsed.host, parsed.namespace, parsed.model, DEFAULT_TAG))


def canonical_model_name(name: str) -> str:
    """Fully qualified and lower-cased: a key under which equal names collide."""
    return parse_model_name(name).key


def same_model(a: str, b: str) -> bool:
    """Whether two names refer to one model by Ollama's rules; False if either is invalid."""
    try:
        return canonical_model_name(a) == canonical_model_name(b)
    except InvalidModelName:
        return False


def model_key(name: str) -> str:
    """A comparison key for a model name that never raises: the canonical name when it
    parses, else the name lower-cased (an engine may report names Ollama's rules reject).
    A ModelName carries its key already."""
    if isinstance(name, ModelName):
        return name.key
    return _key_of(name)


@lru_cache(maxsize=1024)
def _key_of(name: str) -> str:
    # Cached: the dashboard matches every resident model against every lane each refresh.
    try:
        return canonical_model_name(name)
    except InvalidModelName:
        return name.strip().lower()


def unique_by_name(items):
    """The first of each model name by Ollama's rules ("Qwen3" is "qwen3:latest"), in order.
    An engine that lists one model twice must not break a table keyed by name."""
    seen: set[str] = set()
    out = []
    for m in items:
        key = model_key(m.name)
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out
