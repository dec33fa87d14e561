"""Is a model server on this machine or its private network?

The seeds forbid external API calls: a prompt holds the user's code. So a provider's
``base_url`` must name a loopback, private (RFC 1918, IPv6 ULA) or link-local address,
or ``localhost``; a hostname is resolved and every address it resolves to must be local.
Anything else is refused before a connection is made, unless the provider sets
``allow_remote: true``. The HTTP layer checks the connected peer again (a name may
resolve differently a moment later), with :func:`is_local_address`.

The networks are listed here rather than taken from ``ipaddress.is_private``, which also
counts the documentation ranges (192.0.2.0/24, 203.0.113.0/24, ...) as private.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from protocol.errors import ConfigError, ModelError

__all__ = ["check_base_url", "is_local_address"]

_LOCAL_NETWORKS = tuple(ipaddress.ip_network(n) for n in (
    "127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16",
    "::1/128", "fc00::/7", "fe80::/10",
))

Resolver = Callable[..., list[tuple[Any, ...]]]


def is_local_address(address: str) -> bool:
    """True for loopback, private and link-local addresses (and 0.0.0.0/::, which reach this host)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone id ("fe80::1%eth0") is not part of it
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_unspecified or any(ip in network for network in _LOCAL_NETWORKS)


def check_base_url(base_url: str, *, allow_remote: bool, resolve: Resolver = socket.getaddrinfo) -> None:
    """Raise unless ``base_url`` is an http(s) URL of a local server (or ``allow_remote``).

    ConfigError ACODE-CFG-001 for a URL that is not http(s); ModelError ACODE-LLM-009 for a
    remote server; ModelError ACODE-LLM-005 when the host name does not resolve.
    """
    # urllib, not httpx: `acode run` checks the URL before it submits, and importing httpx
    # would add some 30 ms to every such command (README "Performance")
    try:
        url = urlsplit(base_url)
        host, port = url.hostname, url.port  # .port raises for a port that is not a number in range
    except ValueError as exc:
        raise ConfigError(f"base_url {base_url!r} is not a valid URL ({exc}); write it like "
                          "http://127.0.0.1:11434") from exc
    if url.scheme not in ("http", "https") or not host:
        raise ConfigError(f"base_url {base_url!r} is not an http(s) URL with a host; write it like "
                          "http://127.0.0.1:11434")
    if allow_remote:
        return
    if host == "localhost":  # hostname is lower case
        return
    if _is_ip(host):
        addresses = [host]
    else:
        try:
            infos = resolve(host, port or (443 if url.scheme == "https" else 80), type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise ModelError(f"the model server's host {host!r} (base_url {base_url!r}) does not resolve ({exc}); "
                             "fix base_url", code="ACODE-LLM-005") from exc
        addresses = sorted({str(info[4][0]) for info in infos})
    remote = [a for a in addresses if not is_local_address(a)]
    if remote or not addresses:
        where = host if addresses == [host] else f"{host} ({', '.join(addresses)})"
        raise ModelError(f"base_url {base_url!r} points to {where}, which is not this machine or a private "
                         "network; acode sends prompts off the machine only when the provider sets "
                         "allow_remote: true", code="ACODE-LLM-009")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True
