"""caractrl's namespaces against a real etcd and apiserver: one manifest applied into two namespaces with -n,
`get -A` listing both, `get -n` one, delete in one leaving the other, apply's refusals in one line."""

from __future__ import annotations

from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)

from caravanserai import meta
from caravanserai.client import Client

MANIFEST = """\
apiVersion: caravanserai/v1
kind: Project
metadata:
  name: web
{namespace}spec:
  services:
  - name: app
    image: busybox
    command: [sleep, "3600"]
"""


async def test_one_manifest_in_two_namespaces(cli: Caractrl, client: Client) -> None:
    for namespace in ("team-a", "team-b"):
        created = await cli("create", "namespace", namespace)
        assert (created.exit_code, created.stdout) == (0, f"namespace/{namespace} created\n")
    listed = await cli("get", "ns")
    assert [line.split()[:2] for line in listed.stdout.splitlines()] == [
        ["NAME", "STATUS"],
        ["default", "Active"],
        ["team-a", "Active"],
        ["team-b", "Active"],
    ]

    text = MANIFEST.format(namespace="")
    for namespace in ("team-a", "team-b"):
        applied = await cli("apply", "-f", "-", "-n", namespace, input=text)
        assert (applied.exit_code, applied.stdout) == (0, "project/web created\n"), applied.stderr
    assert sorted(meta.key_of(p) for p in await client.projects.list()) == ["team-a/web", "team-b/web"]

    everywhere = await cli("get", "projects", "-A")
    lines = everywhere.stdout.splitlines()
    assert lines[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert [line.split()[:2] for line in lines[1:]] == [["team-a", "web"], ["team-b", "web"]]
    one = await cli("get", "projects", "-n", "team-a", "-o", "name")
    assert one.stdout == "project/web\n"
    nothing = await cli("get", "projects")  # "default" holds none
    assert (nothing.stdout, nothing.stderr) == ("", "No resources found in default namespace.\n")
    shown = await cli("-n", "team-b", "get", "project", "web", "-o", "jsonpath={.metadata.namespace}")
    assert shown.stdout == "team-b"
    described = await cli("describe", "project", "web", "-n", "team-a")
    assert any(line.split() == ["Namespace:", "team-a"] for line in described.stdout.splitlines())

    deleted = await cli("delete", "project", "web", "-n", "team-a", "--force", "--wait")
    assert deleted.exit_code == 0, deleted.stderr
    assert [meta.key_of(p) for p in await client.projects.list()] == ["team-b/web"]
    left = await cli("get", "projects", "-A", "-o", "name")
    assert left.stdout == "project/web\n"


async def test_apply_refusals_are_one_line(cli: Caractrl, client: Client) -> None:
    await cli("create", "namespace", "team-a")
    other = await cli("apply", "-f", "-", "-n", "team-a", input=MANIFEST.format(namespace="  namespace: team-b\n"))
    assert other.exit_code == 1 and len(other.stderr.splitlines()) == 1
    assert "does not match the namespace" in other.stderr and "metadata.namespace" in other.stderr
    missing = await cli("apply", "-f", "-", "-n", "nowhere", input=MANIFEST.format(namespace=""))
    assert missing.exit_code == 1 and len(missing.stderr.splitlines()) == 1, missing.stderr
    assert missing.stderr.startswith("Error from server (NotFound)") and "nowhere" in missing.stderr
    namespace = "apiVersion: caravanserai/v1\nkind: Namespace\nmetadata:\n  name: team-c\n"
    applied = await cli("apply", "-f", "-", input=namespace)
    assert (applied.exit_code, applied.stdout) == (0, "namespace/team-c created\n"), applied.stderr
    assert (await client.namespaces.get("team-c")).metadata.name == "team-c"
