"""Who may write an AdmissionPolicy, against a real apiserver over mutual TLS: only an admin creates, updates or
deletes one (a policy's hooks see and may change every write of the kinds it names); a viewer, a controller and a
node read them and are refused every write."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.errors import Forbidden
from caravanserai.process.tls import TLSFiles
from caravanserai.testing.apiserver import RunningApiServer


def policy(name: str) -> v1.AdmissionPolicy:
    obj = meta.with_type_meta(v1.AdmissionPolicy())
    obj.metadata.name = name
    obj.spec.resources.append("projects")
    obj.spec.hooks.add(name="h", type="Validating", url="https://hooks.example.com/check", failure_policy="Ignore")
    return obj


@pytest.mark.parametrize("identity", ["viewer", "controller:manager", "node:n1"])
async def test_only_an_admin_writes_policies_everyone_reads_them(
    secure_api: RunningApiServer, tls_of: Callable[[str], TLSFiles], identity: str
) -> None:
    async with Client(secure_api.address, tls=tls_of("admin")) as admin:
        stored = await admin.admissionpolicies.create(policy("kept"))
    async with Client(secure_api.address, tls=tls_of(identity)) as other:
        with pytest.raises(Forbidden, match=f"{identity} may not create admissionpolicies/mine"):
            await other.admissionpolicies.create(policy("mine"))
        changed = meta.copy(stored)
        changed.spec.resources.append("secrets")
        with pytest.raises(Forbidden, match=f"{identity} may not update admissionpolicies/kept"):
            await other.admissionpolicies.update(changed)
        with pytest.raises(Forbidden, match=f"{identity} may not delete admissionpolicies/kept"):
            await other.admissionpolicies.delete("kept")
        assert (await other.admissionpolicies.get("kept")).spec.resources == ["projects"]
        assert [p.metadata.name for p in (await other.admissionpolicies.list()).items] == ["kept"]
