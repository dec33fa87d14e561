"""Which base URLs count as local, and that a remote one is refused without connecting."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from actors.llm.locality import check_base_url, is_local_address
from protocol.errors import ConfigError, ModelError


@pytest.mark.parametrize("address", [
    "127.0.0.1", "127.8.9.10", "10.1.2.3", "172.16.0.1", "172.31.255.254", "192.168.1.20", "169.254.1.1",
    "::1", "fd12:3456::1", "fe80::1%eth0", "::ffff:192.168.0.5", "0.0.0.0",
])
def test_loopback_private_and_link_local_addresses_are_local(address: str) -> None:
    assert is_local_address(address)


@pytest.mark.parametrize("address", [
    "203.0.113.5", "192.0.2.1", "198.51.100.7",  # documentation ranges, which ipaddress calls "private"
    "8.8.8.8", "172.32.0.1", "100.64.0.1", "2001:db8::1", "::ffff:203.0.113.5", "not-an-ip",
])
def test_public_and_documentation_addresses_are_not_local(address: str) -> None:
    assert not is_local_address(address)


def _never(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("an IP literal must not be resolved")


@pytest.mark.parametrize("url", ["http://127.0.0.1:11434", "http://[::1]:1234/v1", "http://192.168.1.20:11434",
                                 "https://10.0.0.2/v1"])
def test_local_ip_urls_pass_without_a_lookup(url: str) -> None:
    check_base_url(url, allow_remote=False, resolve=_never)


def test_localhost_passes_without_a_lookup() -> None:
    check_base_url("http://localhost:11434", allow_remote=False, resolve=_never)


def test_a_remote_ip_is_refused_with_the_url_and_the_switch() -> None:
    with pytest.raises(ModelError) as caught:
        check_base_url("http://203.0.113.5:11434", allow_remote=False, resolve=_never)
    assert caught.value.code == "ACODE-LLM-009"
    assert caught.value.message == (
        "base_url 'http://203.0.113.5:11434' points to 203.0.113.5, which is not this machine or a private "
        "network; acode sends prompts off the machine only when the provider sets allow_remote: true")


def test_allow_remote_lets_a_remote_url_through() -> None:
    check_base_url("http://203.0.113.5:11434", allow_remote=True, resolve=_never)


def _resolving_to(*addresses: str) -> Any:
    def resolve(host: str, port: int, **kwargs: Any) -> list[tuple[Any, ...]]:
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in addresses]
    return resolve


def test_a_hostname_must_resolve_only_to_local_addresses() -> None:
    check_base_url("http://gpu-box.lan:11434", allow_remote=False, resolve=_resolving_to("192.168.1.7", "fd00::7"))
    with pytest.raises(ModelError) as caught:
        check_base_url("http://gpu-box.lan:11434", allow_remote=False,
                       resolve=_resolving_to("192.168.1.7", "203.0.113.5"))
    assert caught.value.code == "ACODE-LLM-009"
    assert "points to gpu-box.lan (192.168.1.7, 203.0.113.5)" in caught.value.message


def test_a_hostname_that_does_not_resolve_is_unreachable() -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(ModelError) as caught:
        check_base_url("http://no-such-host.invalid:11434", allow_remote=False, resolve=fail)
    assert caught.value.code == "ACODE-LLM-005"
    assert "'no-such-host.invalid'" in caught.value.message


def test_the_real_resolver_accepts_localhost_names() -> None:
    check_base_url("http://LocalHost:1234/v1", allow_remote=False)


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/", "127.0.0.1:11434", "http://"])
def test_a_url_that_is_not_http_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_base_url(url, allow_remote=False, resolve=_never)
    assert caught.value.code == "ACODE-CFG-001"
    assert repr(url) in caught.value.message
