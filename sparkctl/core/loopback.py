"""Which URLs stay on this machine, and so never go through a proxy.

Corporate networks set ``http_proxy``/``https_proxy`` and often no ``no_proxy``. Go's HTTP
client (Ollama's CLI, ``ollama ps``) never sends a request for ``localhost`` or a loopback
address to a proxy; httpx and requests do unless ``no_proxy`` names the host, and a proxy
cannot reach this machine's 127.0.0.1 anyway. sparkctl follows Go's rule for every client:
loopback is always direct, everything else (a remote engine, the registry, a suites mirror,
a tracking server) honours the proxy variables as the user set them.
"""

from __future__ import annotations

from urllib.parse import urlsplit

# httpx `mounts` keys that send the usual loopback names straight to the default transport,
# the way httpx itself implements a `no_proxy` entry, for clients that follow redirects to
# other hosts (the registry's blob storage, a mirror) and so cannot drop proxies altogether.
LOOPBACK_MOUNTS: dict[str, None] = {
    "all://localhost": None,
    "all://127.0.0.1": None,
    "all://[::1]": None,
}


def is_loopback_host(host: str | None) -> bool:
    """localhost, 127.0.0.0/8, ::1 (Go's rule), and the unspecified 0.0.0.0/:: (a connection
    to them reaches this machine too)."""
    if not host:
        return False
    name = host.strip().strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    import ipaddress  # here: the dashboard's first frame does not pay for it

    try:
        ip = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False
    return ip.is_loopback or ip.is_unspecified


def is_loopback_url(url: str) -> bool:
    """Whether a URL (scheme optional) names this machine."""
    text = url.strip()
    try:
        return is_loopback_host(urlsplit(text if "://" in text else f"http://{text}").hostname)
    except ValueError:  # a malformed port or bracket: not ours to judge, so not loopback
        return False


def proxies_apply(url: str) -> bool:
    """Whether a client for `url` should read the proxy variables (httpx's `trust_env`)."""
    return not is_loopback_url(url)
