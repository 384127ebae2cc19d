import pytest

from sparkctl.core.names import (
    InvalidModelName,
    ModelName,
    canonical_model_name,
    model_key,
    parse_model_name,
    same_model,
    validate_model_name,
    with_default_tag,
)


@pytest.mark.parametrize(
    "raw, normalised",
    [
        ("qwen3", "qwen3"),
        ("qwen3:8b", "qwen3:8b"),
        ("  qwen3:8b\n", "qwen3:8b"),
        ("gpt-oss:20b", "gpt-oss:20b"),
        ("qwen3.5:35b-a3b", "qwen3.5:35b-a3b"),
        ("Mistral:Latest", "Mistral:Latest"),  # case is kept
        ("_private:v1", "_private:v1"),
        ("library/llama3.2:3b-instruct-q8_0", "library/llama3.2:3b-instruct-q8_0"),
        ("hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M", "hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M"),
        ("registry.ollama.ai/library/qwen3:latest", "registry.ollama.ai/library/qwen3:latest"),
        ("localhost:5000/team/model", "localhost:5000/team/model"),  # port in host, no tag
        ("localhost:5000/team/model:v2", "localhost:5000/team/model:v2"),
        ("https://registry.ollama.ai/library/qwen3:8b", "registry.ollama.ai/library/qwen3:8b"),
        ("m" * 80, "m" * 80),
        ("h" * 350 + "/ns/m", "h" * 350 + "/ns/m"),
    ],
)
def test_valid_names(raw, normalised):
    assert validate_model_name(raw) == normalised


@pytest.mark.parametrize(
    "raw, says",
    [
        ("", "the name is empty"),
        ("   ", "the name is empty"),
        ("qwen3:", "tag after ':' is empty"),
        ("/qwen3", "namespace is empty"),
        ("a//b", "namespace is empty"),
        ("qwen3 8b", "whitespace"),
        ("-qwen3", "must start with a letter, digit or '_'"),
        ("qwen3:.8b", "must start with a letter, digit or '_'"),
        ("qwen3@sha256", "'@' is not allowed in the model"),
        ("qwen3:8b+q4", "'+' is not allowed in the tag"),
        ("hf.co/model", "namespace 'hf.co' may not contain '.'"),
        ("ns:1/model", "':' is not allowed in the namespace"),
        ("a/b/c/d", "too many '/' parts"),
        ("team/skill/review", "names an Ollama skill, not a model"),
        ("host/team/agent/helper", "names an Ollama agent, not a model"),
        ("m" * 81, "the model is 81 characters long (at most 80)"),
        ("qwen3:" + "t" * 81, "the tag is 81 characters long (at most 80)"),
        ("h" * 351 + "/ns/m", "the host is 351 characters long (at most 350)"),
        ("ftp://host/ns/m", "unsupported scheme"),
        ("https://qwen3", "a scheme needs host/namespace/model"),
        ("qwén3", "'é' is not allowed in the model"),
    ],
)
def test_invalid_names_say_what_is_wrong(raw, says):
    with pytest.raises(InvalidModelName) as err:
        validate_model_name(raw)
    msg = str(err.value)
    assert says in msg
    assert "\n" not in msg
    assert repr(raw) in msg  # the message names the bad name


def test_invalid_model_name_is_a_value_error():
    assert issubclass(InvalidModelName, ValueError)


@pytest.mark.parametrize(
    "raw, tagged",
    [
        ("qwen3", "qwen3:latest"),
        ("qwen3:8b", "qwen3:8b"),
        ("library/qwen3", "library/qwen3:latest"),
        ("localhost:5000/team/model", "localhost:5000/team/model:latest"),
    ],
)
def test_with_default_tag(raw, tagged):
    assert with_default_tag(raw) == tagged


def test_with_default_tag_rejects_invalid():
    with pytest.raises(InvalidModelName):
        with_default_tag("bad name")


def test_parse_parts():
    n = parse_model_name("example.com/team/model:v1")
    assert (n.host, n.namespace, n.model, n.tag) == ("example.com", "team", "model", "v1")
    assert str(n.qualified()) == "example.com/team/model:v1"
    assert str(parse_model_name("qwen3").qualified()) == "registry.ollama.ai/library/qwen3:latest"


@pytest.mark.parametrize(
    "a, b, same",
    [
        ("qwen3", "qwen3:latest", True),
        ("Qwen3:8B", "qwen3:8b", True),
        ("qwen3", "library/qwen3:latest", True),
        ("qwen3", "registry.ollama.ai/library/qwen3", True),
        ("qwen3:8b", "qwen3:32b", False),
        ("team/qwen3", "qwen3", False),
        ("bad name", "bad name", False),
    ],
)
def test_same_model(a, b, same):
    assert same_model(a, b) is same


def test_canonical_name():
    assert canonical_model_name("Qwen3") == "registry.ollama.ai/library/qwen3:latest"


def test_a_name_is_parsed_once_and_passed_on_as_it_is():
    """Issue 33: the edge (CLI argument, TUI field, config) parses a name into a ModelName and
    every layer passes that value on: it is the str the engine is sent, it carries its key, and
    parsing or keying it again below the edge returns what the edge made, without parsing."""
    import copy
    import json
    import pickle

    n = parse_model_name("  https://Example.com/team/Model:v1 ")
    assert isinstance(n, str) and n == "Example.com/team/Model:v1"
    assert n.key == "example.com/team/model:v1" == model_key(n) == canonical_model_name(n)
    assert parse_model_name(n) is n and validate_model_name(n) is n
    assert json.dumps({"model": n}) == '{"model": "Example.com/team/Model:v1"}'
    for again in (copy.deepcopy(n), pickle.loads(pickle.dumps(n))):
        assert again == n and again.key == n.key and again.tag == "v1" and again.checked
    with pytest.raises(AttributeError):
        n.key = "other"


def test_a_servers_own_name_is_kept_as_given():
    """An OpenAI-compatible server's model (a file name, a Hugging Face path) is not held to
    Ollama's rules: it is sent exactly as typed, and keyed as any name is."""
    served = ModelName.served("SmolLM2-135M-Instruct.Q8_0.gguf")
    assert served == "SmolLM2-135M-Instruct.Q8_0.gguf" and not served.checked
    assert served.key == model_key("SmolLM2-135M-Instruct.Q8_0.gguf")
    assert ModelName.of(" qwen3") == " qwen3"  # a plain str handed to a service is sent as given
    assert ModelName.of("qwen3:8b").checked and ModelName.of(served) is served
