"""The BackupRepository kind on the server: its rules (restic repository forms, the Secret's name), its place in
the kind table and who may read it."""

from __future__ import annotations

import pytest

from caravanserai import meta, v1
from caravanserai.apiserver.auth import Authorizer
from caravanserai.apiserver.kinds import builtin_kinds, validate_object, validate_status
from caravanserai.apiserver.kinds.backuprepository import STRATEGY
from caravanserai.apiserver.kinds.nodegraph import NodeGraph
from caravanserai.errors import Forbidden, Invalid
from caravanserai.process.identity import Identity


def repository(
    name: str = "offsite", *, url: str = "rest:http://127.0.0.1:8000/wiki", secret: str = "restic"
) -> v1.BackupRepository:
    obj = meta.with_type_meta(v1.BackupRepository())
    obj.metadata.name = name
    obj.spec.url = url
    obj.spec.secret = secret
    obj.spec.initialize = True
    return obj


def violations(obj: v1.BackupRepository) -> list[tuple[str, str]]:
    with pytest.raises(Invalid) as info:
        validate_object("backuprepositories", obj)
    return [(v.field, v.description) for v in info.value.violations]


@pytest.mark.parametrize(
    "url",
    [
        "/srv/backups",
        "/srv/backups with space",
        "local:/srv/backups",
        "rest:http://127.0.0.1:8000/",
        "rest:https://backup.example.com/wiki",
        "rest:http://user@[::1]:8000/",
        "sftp:user@host:/srv/restic-repo",
        "sftp://user@host:2222//srv/restic-repo",
        "s3:s3.amazonaws.com/bucket/path",
        "s3:https://s3.example.com/bucket",
        "b2:bucket:path/to/repo",
        "azure:container:/path",
        "gs:bucket:/path",
        "swift:container:/path",
        "rclone:remote:path",
    ],
)
def test_restic_repository_forms_are_accepted(url: str) -> None:
    validate_object("backuprepositories", repository(url=url))


URL_REFUSALS = [
    (
        "http://127.0.0.1:8000/",
        "must be a restic repository: a local absolute path (/srv/backups), rest:http(s)://host/path, "
        "sftp:user@host:/path, s3:host/bucket/path, b2:bucket:path, azure:container:path, gs:bucket:path, "
        'swift:container:path or rclone:remote:path; not "http://127.0.0.1:8000/"',
    ),
    ("srv/backups", "must be a restic repository: a local absolute path"),
    ("ftp:host/path", 'not "ftp:host/path"'),
    ("local:srv", 'a local repository needs an absolute path, not "local:srv"'),
    ("s3:", 'names the s3 backend but no location: "s3:"'),
    ("rclone:  ", "names the rclone backend but no location"),
    ("rest:", "names the rest backend but no location"),
    (
        "rest:ftp://host/",
        'a rest: repository is rest:http://HOST[:PORT]/[PATH] or rest:https://…, not "rest:ftp://host/"',
    ),
    ("rest:http:///path", "a rest: repository is rest:http://HOST[:PORT]/[PATH]"),
    ("rest:http://host:99999/", "a rest: repository is rest:http://HOST[:PORT]/[PATH]"),
    ("rest:http://[::1/", "a rest: repository is rest:http://HOST[:PORT]/[PATH]"),
    (
        "rest:https://user:hunter2@host/",
        "must not carry a password (user:password@): put the credentials in the Secret",
    ),
    ("/srv/backups\n--password-file=/x", "must not contain control characters"),
]


@pytest.mark.parametrize(("url", "message"), URL_REFUSALS)
def test_other_urls_are_refused_naming_the_field(url: str, message: str) -> None:
    [(field, description)] = violations(repository(url=url))
    assert field == "spec.url"
    assert message in description


def test_url_and_secret_are_required_and_the_secret_is_a_name() -> None:
    assert violations(repository(url="", secret="")) == [("spec.url", "is required"), ("spec.secret", "is required")]
    [(field, description)] = violations(repository(secret="Restic Password"))
    assert field == "spec.secret" and "must be a lowercase DNS subdomain" in description
    [(field, _)] = violations(repository(name="Off Site"))
    assert field == "metadata.name"


def test_the_kind_is_served_readable_and_not_confidential() -> None:
    kind = meta.kind_for("brepo")
    assert kind is meta.kind_for("backuprepo") is meta.KINDS["backuprepositories"]
    assert (kind.kind, kind.field, kind.confidential) == ("BackupRepository", "backup_repository", False)
    assert meta.unwrap(meta.wrap(repository())) == repository()
    assert builtin_kinds().get("backuprepositories") is STRATEGY
    assert STRATEGY.node_reads_referenced


def _bound(name: str, node: str, repositories: list[str]) -> v1.Project:
    p = v1.Project(metadata=v1.ObjectMeta(name=name))
    p.status.node_ref = node
    p.spec.services.add(name="s", image="i")
    for i, repo in enumerate(repositories):
        volume = p.spec.volumes.add(name=f"v{i}", type=v1.VOLUME_PERSISTENT)
        volume.backup.repository = repo
    return p


def test_a_node_reads_only_the_repositories_its_projects_use() -> None:
    projects = [_bound("wiki", "n1", ["offsite"])]
    authz = Authorizer(builtin_kinds(), graph=NodeGraph(lambda: projects))
    n1, n2, viewer = Identity("node:n1"), Identity("node:n2"), Identity("viewer")
    authz.check(n1, "get", "backuprepositories", name="offsite")
    authz.check(n1, "list", "backuprepositories")
    authz.check(n1, "watch", "backuprepositories")
    for who, verb, name in ((n1, "get", "elsewhere"), (n2, "get", "offsite"), (n1, "update", "offsite")):
        with pytest.raises(Forbidden):
            authz.check(who, verb, "backuprepositories", name=name)
    with pytest.raises(Forbidden):
        authz.check(n1, "create", "backuprepositories", name="new")
    visible = authz.visible(n1, STRATEGY)
    assert visible is not None and visible(repository("offsite")) and not visible(repository("elsewhere"))
    authz.check(viewer, "get", "backuprepositories", name="elsewhere")  # not confidential: read-only identities read
    assert authz.visible(viewer, STRATEGY) is None


def test_a_nodes_restore_rates_are_quantities_per_repository_name() -> None:
    node = v1.Node(metadata=v1.ObjectMeta(name="n1"))
    node.status.state = v1.NODE_READY
    node.status.network.restore_rates.update({"offsite": "11.5Mi", "local": "900000000"})
    node.status.images.add(names=["busybox:test"], size_bytes=4_000_000)
    validate_status("nodes", node)
    node.status.network.restore_rates.update({"Off Site": "1Mi", "fast": "lots"})
    node.status.images.add(names=["x"], size_bytes=-1)
    with pytest.raises(Invalid) as info:
        validate_status("nodes", node)
    found = sorted((v.field, v.description.split(":")[0]) for v in info.value.violations)  # map order is unspecified
    assert found == [
        ("status.images[1].sizeBytes", "must not be negative, not -1"),
        ('status.network.restoreRates["Off Site"]', "invalid BackupRepository name"),
        ('status.network.restoreRates["fast"]', "invalid quantity 'lots'"),
    ]
