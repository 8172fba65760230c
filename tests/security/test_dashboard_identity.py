"""cara-dashboard acts with its own identity (mutual TLS to the API) and serves HTTPS off loopback."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path

from caravanserai.process.tls import TLSFiles
from caravanserai.testing.apiserver import RunningApiServer
from support.dashboard import RunningDashboard, dashboard

MANIFEST = (
    "apiVersion: caravanserai/v1\nkind: Project\nmetadata: {name: dash-id}\n"
    "spec:\n  services: [{name: a, image: busybox:test}]\n"
)


def flags(tls: TLSFiles) -> list[str]:
    return ["--tls-cert", tls.cert, "--tls-key", tls.key, "--tls-ca", tls.ca]


async def apply(d: RunningDashboard, **kwargs: object) -> tuple[int, dict[str, object]]:
    async with d.session() as s, s.post(d.url + "api/v1/apply", json={"manifest": MANIFEST}, **kwargs) as r:  # type: ignore[arg-type]  # kwargs are ClientSession.post options, typed object here
        return r.status, await r.json()


async def test_actions_are_refused_with_the_apis_error_for_a_read_only_identity(
    secure_api: RunningApiServer, tls_of: Callable[[str], TLSFiles]
) -> None:
    async with dashboard(secure_api.address, *flags(tls_of("viewer"))) as viewer:
        async with viewer.session() as s, s.get(viewer.url + "api/v1/cluster") as r:
            assert r.status == 200  # reads are allowed to a viewer
        status, body = await apply(viewer)
        assert status == 403
        error = str(body["error"])
        assert "project/dash-id:" in error and "viewer" in error and "\n" not in error
    async with dashboard(secure_api.address, *flags(tls_of("admin"))) as admin:
        assert await apply(admin) == (200, {"applied": [{"object": "project/dash-id", "action": "created"}]})


async def test_https_off_loopback(secure_api: RunningApiServer, certs: Path, tls_of: Callable[[str], TLSFiles]) -> None:
    server = tls_of("apiserver")  # its certificate names 127.0.0.1
    async with dashboard(
        secure_api.address,
        *flags(tls_of("viewer")),
        "--listen",
        "0.0.0.0:0",
        "--https-cert",
        server.cert,
        "--https-key",
        server.key,
    ) as d:
        context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        url = f"https://127.0.0.1:{d.process.port}/api/v1/config"
        async with d.session() as s, s.get(url, ssl=context) as r:
            assert r.status == 200
            assert (await r.json())["readOnly"] is False
