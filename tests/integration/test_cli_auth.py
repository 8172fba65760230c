"""caractrl auth can-i against a real etcd and apiserver (authentication off: the caller is admin, who may ask for
others)."""

from __future__ import annotations

from caractrl_runner import Caractrl, cli, server_logs_to_stderr  # noqa: F401 (fixtures)

from caravanserai import v1
from caravanserai.client import Client


async def test_can_i_answers_from_the_apiservers_authorizer(cli: Caractrl, client: Client) -> None:
    mine = await cli("auth", "can-i", "delete", "nodes")
    assert (mine.exit_code, mine.stdout) == (0, "yes\n")
    theirs = await cli("auth", "can-i", "delete", "projects", "-n", "team-a", "--as", "alice")
    assert (theirs.exit_code, theirs.stdout) == (
        1,
        "no (no role bound to alice allows delete projects in namespace team-a)\n",
    )
    binding = v1.RoleBinding(metadata=v1.ObjectMeta(name="devs", namespace="team-a"))
    binding.spec.role_ref.CopyFrom(v1.RoleRef(kind="ClusterRole", name="edit"))
    binding.spec.subjects.add(kind="Group", name="devs")
    await client.namespaces.create(v1.Namespace(metadata=v1.ObjectMeta(name="team-a")))
    await client.resource(v1.RoleBinding).create(binding)
    for _ in range(100):
        allowed = await cli("auth", "can-i", "delete", "p", "-n", "team-a", "--as", "alice", "--as-group", "devs")
        if allowed.exit_code == 0:
            break
    assert allowed.stdout == "yes (allowed by rolebinding team-a/devs (clusterrole edit))\n"
    everywhere = await cli("auth", "can-i", "list", "secrets", "-A", "--as", "alice", "--as-group", "devs")
    assert everywhere.exit_code == 1 and "in every namespace" in everywhere.stdout
    bad = await cli("auth", "can-i", "delete", "pods")
    assert bad.exit_code == 2 and "unknown resource 'pods'" in bad.stderr
    logs = await cli("auth", "can-i", "get", "p/log", "-n", "team-a", "--as", "alice", "--as-group", "devs")
    assert logs.stdout == "yes (allowed by rolebinding team-a/devs (clusterrole edit))\n"
    viewer = await cli("auth", "can-i", "create", "projects/exec", "-n", "team-a", "--as", "vic", "--as-group", "v")
    assert (viewer.exit_code, viewer.stdout) == (
        1,
        "no (no role bound to vic allows create projects/exec in namespace team-a)\n",
    )
    typo = await cli("auth", "can-i", "get", "projects/logs")
    assert typo.exit_code == 2 and "unknown subresource 'projects/logs'" in typo.stderr
