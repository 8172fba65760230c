"""Server lists (`--server a:7420,b:7420`, $CARA_SERVER) and the gRPC target made from them."""

from __future__ import annotations

import json

import pytest

from caravanserai.client.targets import channel_target, server_address, split_servers


def test_one_server_is_passed_through() -> None:
    assert channel_target("api.example:7420").target == "api.example:7420"
    assert channel_target("api.example:7420").options == ()


def test_several_servers_become_one_balanced_target() -> None:
    target = channel_target("10.0.0.1:7420, 10.0.0.2:7421")
    assert target.target == "ipv4:10.0.0.1:7420,10.0.0.2:7421"
    options = dict(target.options)
    config = json.loads(options["grpc.service_config"])
    assert config == {"loadBalancingConfig": [{"round_robin": {}}], "healthCheckConfig": {"serviceName": ""}}
    assert options["grpc.ssl_target_name_override"] == "10.0.0.1"


def test_host_names_are_resolved_and_the_first_names_the_tls_authority() -> None:
    target = channel_target("localhost:7420,127.0.0.2:7420")
    assert target.target == "ipv4:127.0.0.1:7420,127.0.0.2:7420"
    assert dict(target.options)["grpc.default_authority"] == "localhost:7420"


def test_ipv6_lists() -> None:
    assert channel_target("[::1]:1,[::2]:2").target == "ipv6:[::1]:1,[::2]:2"


def test_schemes_and_slashes_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    assert split_servers("http://a:1/,grpc://b:2") == ["a:1", "b:2"]
    monkeypatch.setenv("CARA_SERVER", "https://a:1,b:2")
    assert server_address() == "a:1,b:2"
    assert server_address("c:3") == "c:3"


@pytest.mark.parametrize(
    ("address", "message"),
    [
        ("a:1,,b:2", "empty entry"),
        ("10.0.0.1:7420,10.0.0.2", "'10.0.0.2' is not host:port"),
        ("10.0.0.1:7420,10.0.0.2:99999", "is not host:port"),
        ("10.0.0.1:7420,[::1]:7420", "mixes IPv4 and IPv6"),
    ],
)
def test_bad_lists_name_the_entry(address: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        channel_target(address)
