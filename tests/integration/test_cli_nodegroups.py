"""caractrl and NodeGroups: apply (a refusal names its field in one line), get, describe with the autoscaler's
decisions, delete."""

from __future__ import annotations

from pathlib import Path

from caractrl_runner import Caractrl, cli  # noqa: F401 (fixtures)

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock, timestamp

MANIFEST = """
apiVersion: caravanserai/v1
kind: NodeGroup
metadata: {name: gpu}
spec:
  minSize: 0
  maxSize: 3
  template:
    capacity: {cpu: "8", memory: 32Gi, gpu: "2"}
  provider:
    exec: {create: [/bin/true], delete: [/bin/true]}
  scaleDown: {idleTime: 5m, utilizationThreshold: 0.4}
"""


async def test_apply_get_describe_delete(cli: Caractrl, client: Client, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(MANIFEST.replace("minSize: 0", "minSize: 5"))
    refused = await cli("apply", "-f", str(bad))
    assert refused.exit_code == 1
    assert "spec.minSize: must not exceed spec.maxSize (3), not 5" in refused.stderr
    assert "Traceback" not in refused.stderr
    good = tmp_path / "gpu.yaml"
    good.write_text(MANIFEST)
    assert (await cli("apply", "-f", str(good))).exit_code == 0

    group = await client.nodegroups.get("gpu")
    decided = meta.copy(group)
    now = SystemClock().now()
    decided.status.desired = decided.status.current = 1
    decided.status.last_scale_up.CopyFrom(
        v1.ScalingDecision(
            time=timestamp(now),
            from_size=0,
            to_size=1,
            reason="2 Pending project(s) fit on 1 new node(s): a, b",
            nodes=["gpu-x1"],
            projects=["a", "b"],
        )
    )
    await client.nodegroups.update_status(decided)

    table = await cli("get", "nodegroups")
    assert table.exit_code == 0
    header, row = table.stdout.splitlines()[:2]
    assert header.split() == [
        "NAME",
        "MIN",
        "MAX",
        "DESIRED",
        "CURRENT",
        "PROVIDER",
        "LAST-SCALE-UP",
        "LAST-SCALE-DOWN",
        "AGE",
    ]
    assert row.split()[:6] == ["gpu", "0", "3", "1", "1", "exec"] and "0→1" in row

    text = (await cli("describe", "nodegroup", "gpu")).stdout
    assert "Last Scale Up:" in text and "2 Pending project(s) fit on 1 new node(s): a, b" in text
    assert "idle 5m under 0.4" in text and "gpu=2" in text
    assert (await cli("delete", "nodegroup", "gpu")).exit_code == 0
