"""apply carries `metadata.ownerReferences` of a manifest and merges them by uid (`client.apply.merged`)."""

from __future__ import annotations

from caravanserai import v1
from caravanserai.client.apply import applied_form, configuration, merged, removed_fields, same
from caravanserai.text.manifest import load_manifests

MANIFEST = """
apiVersion: caravanserai/v1
kind: Config
metadata:
  name: settings
  ownerReferences:
  - {apiVersion: caravanserai/v1, kind: Project, name: web, uid: u-web, controller: true, blockOwnerDeletion: true}
spec:
  data: {k: v}
"""


def test_a_manifest_declares_owner_references() -> None:
    (config,) = load_manifests(MANIFEST)
    assert isinstance(config, v1.Config)
    ref = applied_form(config).metadata.owner_references[0]
    assert (ref.kind, ref.name, ref.uid, ref.controller, ref.block_owner_deletion) == (
        "Project",
        "web",
        "u-web",
        True,
        True,
    )


def test_apply_keeps_references_set_by_others_and_drops_those_it_set_before() -> None:
    (declared,) = load_manifests(MANIFEST)
    declared = applied_form(declared)
    live = v1.Config()
    live.CopyFrom(declared)
    live.metadata.annotations["caravanserai.io/last-applied-configuration"] = configuration(declared)
    live.metadata.owner_references.add(kind="Backup", name="nightly", uid="u-backup")  # a controller's
    assert same(merged(live, declared), live)
    without = applied_form(declared)
    del without.metadata.owner_references[:]
    wanted = merged(live, without)
    assert [ref.uid for ref in wanted.metadata.owner_references] == ["u-backup"]
    assert removed_fields(live, wanted) == ("metadata.ownerReferences[Project/web]",)
