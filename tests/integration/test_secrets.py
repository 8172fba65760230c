"""Secrets and Configs through the apiserver: encryption at rest (checked with etcdctl) and key rotation, what
caractrl shows of them, and the rules of the places a project names them."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import pytest
from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.errors import Invalid
from caravanserai.testing import builders
from caravanserai.testing.apiserver import apiserver
from caravanserai.testing.etcd import EtcdServer

MARKER = b"plaintext-marker-7f3a"
SECRET_YAML = f"""\
apiVersion: caravanserai/v1
kind: Secret
metadata: {{name: db}}
spec:
  data:
    password: {base64.b64encode(MARKER).decode()}
    user: YWRtaW4=
"""


def _key_file(path: Path, *names: str) -> str:
    path.write_text("# test keys\n" + "".join(f"{n} {base64.b64encode(os.urandom(32)).decode()}\n" for n in names))
    return str(path)


def _raw(etcd: EtcdServer, key: str) -> bytes:
    done = subprocess.run(
        ["etcdctl", f"--endpoints={etcd.endpoint}", "get", key, "--print-value-only"],
        capture_output=True,
        check=True,
        timeout=30,
    )
    return done.stdout


def secret(name: str, **data: bytes) -> v1.Secret:
    s = meta.with_type_meta(v1.Secret())
    s.metadata.name = name
    s.spec.data.update(data)
    return s


async def test_secrets_are_ciphertext_in_etcd_and_keys_rotate(etcd: EtcdServer, tmp_path: Path) -> None:
    k1 = _key_file(tmp_path / "k1", "k1")
    lines = Path(k1).read_text().splitlines()
    async with apiserver(etcd.endpoint, encryption_key_file=k1) as api, Client(api.address) as c:
        prefix = api.prefix
        await c.secrets.create(secret("db", password=MARKER))
        await c.configs.create(
            v1.Config(metadata=v1.ObjectMeta(name="plain"), spec=v1.ConfigSpec(data={"k": "visible"}))
        )
        stored = _raw(etcd, f"{prefix}/secrets/default/db")
        assert MARKER not in stored and stored.startswith(b"cara:enc:aesgcm:v1:k1:")
        assert b"visible" in _raw(etcd, f"{prefix}/configs/default/plain")  # only Secrets are encrypted
        assert (await c.secrets.get("db")).spec.data["password"] == MARKER
    # Rotation: a new key first, the old one still listed; a write re-encrypts with the new key.
    both = tmp_path / "both"
    both.write_text(f"k2 {base64.b64encode(os.urandom(32)).decode()}\n" + "\n".join(lines) + "\n")
    async with apiserver(etcd.endpoint, prefix=prefix, encryption_key_file=str(both)) as api, Client(api.address) as c:
        current = await c.secrets.get("db")
        assert current.spec.data["password"] == MARKER  # old key still reads
        current.metadata.annotations["caravanserai.io/rewritten"] = "1"  # what the documented command does
        await c.secrets.update(current)
        assert _raw(etcd, f"{prefix}/secrets/default/db").startswith(b"cara:enc:aesgcm:v1:k2:")
    only_new = tmp_path / "new"
    only_new.write_text(both.read_text().splitlines()[0] + "\n")
    async with (
        apiserver(etcd.endpoint, prefix=prefix, encryption_key_file=str(only_new)) as api,
        Client(api.address, retry_timeout=1) as c,
    ):
        assert (await c.secrets.get("db")).spec.data["password"] == MARKER


async def test_rotation_with_caractrl_annotate(etcd: EtcdServer, tmp_path: Path) -> None:
    k1 = _key_file(tmp_path / "k1", "k1")
    async with apiserver(etcd.endpoint) as plain, Client(plain.address) as c:  # written before encryption was on
        await c.secrets.create(secret("old", v=b"1"))
        prefix = plain.prefix
    assert _raw(etcd, f"{prefix}/secrets/default/old").find(b"cara:enc") == -1
    async with apiserver(etcd.endpoint, prefix=prefix, encryption_key_file=k1) as api:
        from caractrl_runner import Caractrl as Runner

        home = tmp_path / "home"
        home.mkdir()
        result = await Runner(api.address, home)(
            "annotate", "secret", "old", "caravanserai.io/rewritten=2", "--overwrite"
        )
        assert result.exit_code == 0, result.output
        assert _raw(etcd, f"{prefix}/secrets/default/old").startswith(b"cara:enc:aesgcm:v1:k1:")


async def test_caractrl_shows_keys_and_sizes_never_values(cli: Caractrl, client: Client, tmp_path: Path) -> None:
    manifest = tmp_path / "db.yaml"
    manifest.write_text(SECRET_YAML)
    assert (await cli("apply", "-f", str(manifest))).exit_code == 0
    table = await cli("get", "secrets")
    assert "db" in table.output and "Opaque" in table.output and MARKER.decode() not in table.output
    described = await cli("describe", "secret", "db")
    assert "password" in described.output and f"{len(MARKER)} bytes" in described.output
    assert MARKER.decode() not in described.output and base64.b64encode(MARKER).decode() not in described.output
    as_yaml = await cli("get", "secret", "db", "-o", "yaml")
    assert base64.b64encode(MARKER).decode() in as_yaml.output  # admin may read it: base64, as in the manifest
    p = builders.project("app")
    p.spec.services[0].env.add(name="PASSWORD", value_from=v1.KeyRef(secret="db", key="password"))
    p.spec.services[0].resources.requests["cpu"] = "250m"
    p.spec.services[0].resources.limits.update({"memory": "64Mi", "gpu": "1"})
    await client.projects.create(p)
    described = await cli("describe", "project", "app")
    assert "PASSWORD from secret db key password" in described.output
    granted = next(line for line in described.output.splitlines() if line.strip().startswith("Granted:"))
    assert granted.split(":", 1)[1].strip() == (  # requests, limits (a limit alone requests itself), granted
        f"CARA_CPU_REQUEST=250, CARA_MEMORY_LIMIT={64 * 2**20}, CARA_MEMORY_REQUEST={64 * 2**20}, CARA_RESOURCE_GPU=1"
    )
    assert MARKER.decode() not in described.output


async def test_refusals_name_the_field(client: Client) -> None:
    p = builders.project("bad")
    service = p.spec.services[0]
    service.env.add(name="A", value_from=v1.KeyRef(secret="s", config="c", key="k"))
    service.env_from.add()
    service.image_pull_policy = "Sometimes"
    service.resources.requests["gpu"] = "1"
    service.resources.limits["gpu"] = "2"
    service.resources.limits["example.com/fpga"] = "0.5"
    p.spec.volumes.add(name="creds", type="Secret", mode=0o1000)
    with pytest.raises(Invalid) as info:
        await client.projects.create(p)
    fields = {v.field for v in info.value.violations}
    assert fields == {
        "spec.volumes[0].secret",
        "spec.volumes[0].mode",
        "spec.services[0].env[0].valueFrom",
        "spec.services[0].envFrom[0]",
        "spec.services[0].imagePullPolicy",
        'spec.services[0].resources.requests["gpu"]',
        'spec.services[0].resources.limits["example.com/fpga"]',
        'spec.services[0].resources.requests["example.com/fpga"]',  # defaulted from the limit, refused as well
    }, info.value.violations
    bad = secret("reg", registry=b"127.0.0.1:5000", username=b"u")
    bad.spec.type = v1.SECRET_REGISTRY_AUTH
    with pytest.raises(Invalid, match=r'spec.data\["password"\]: is required'):
        await client.secrets.create(bad)


async def test_a_limit_without_a_request_requests_its_limit(client: Client) -> None:
    p = builders.project("lim")
    p.spec.services[0].resources.limits.update({"cpu": "1", "gpu": "2"})
    stored = await client.projects.create(p)
    assert dict(stored.spec.services[0].resources.requests) == {"cpu": "1", "gpu": "2"}
    stored.spec.services[0].resources.limits["memory"] = "64Mi"
    updated = await client.projects.update(stored)
    assert updated.spec.services[0].resources.requests["memory"] == "64Mi"


def config(name: str, **data: str) -> v1.Config:
    c = meta.with_type_meta(v1.Config())
    c.metadata.name = name
    c.spec.data.update(data)
    return c


async def test_delete_refuses_a_secret_or_config_a_project_reads_naming_the_projects(
    cli: Caractrl, client: Client, tmp_path: Path
) -> None:
    await client.secrets.create(secret("db-creds", password=b"x"))
    await client.secrets.create(secret("repo-key", RESTIC_PASSWORD=b"y"))
    await client.secrets.create(secret("leaked", token=b"z"))
    await client.configs.create(config("app-settings", mode="fast"))
    web = builders.project("web")
    web.spec.services[0].env.add(name="PASSWORD").value_from.CopyFrom(v1.KeyRef(secret="db-creds", key="password"))
    api = builders.project("api")
    api.spec.services[0].env_from.add(config="app-settings")
    api.spec.services[0].env_from.add(secret="db-creds")
    for project in (web, api):
        await client.projects.create(project)
    repository = meta.with_type_meta(v1.BackupRepository())
    repository.metadata.name = "offsite"
    repository.spec.url, repository.spec.secret = "/srv/backups", "repo-key"
    await client.backuprepositories.create(repository)

    used = await cli("delete", "secret", "db-creds")
    assert used.exit_code == 1 and used.stdout == ""
    assert used.stderr == (
        "error: secret/db-creds is used by project/api, project/web; change or delete them first, or use --force "
        "to delete it anyway\n"
    )
    assert (await client.secrets.get("db-creds")).metadata.name == "db-creds"
    by_repository = await cli("delete", "secret", "repo-key")
    assert "secret/repo-key is used by backuprepository/offsite;" in by_repository.stderr
    manifest = tmp_path / "settings.yaml"
    manifest.write_text("apiVersion: caravanserai/v1\nkind: Config\nmetadata: {name: app-settings}\nspec: {}\n")
    from_file = await cli("delete", "-f", str(manifest))
    assert from_file.exit_code == 1 and "config/app-settings is used by project/api;" in from_file.stderr

    unused = await cli("delete", "secret", "leaked")
    assert (unused.exit_code, unused.stdout) == (0, "secret/leaked deleted\n")
    forced = await cli("delete", "secret", "db-creds", "--force")
    assert (forced.exit_code, forced.stdout) == (0, "secret/db-creds deleted\n")
    await client.projects.delete("api")
    freed = await cli("delete", "config", "app-settings")
    assert (freed.exit_code, freed.stdout) == (0, "config/app-settings deleted\n")
    assert [s.metadata.name for s in await client.secrets.list()] == ["repo-key"]
