"""The compactor outlives an etcd outage: a round that fails is logged and the next interval tries again (before,
an unreachable etcd at a tick ended the apiserver)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from caravanserai.errors import Unavailable
from caravanserai.storage.compaction import Compactor
from caravanserai.storage.etcd_types import PutOp, TxnResult
from caravanserai.testing.clock import FakeClock


class FlakyEtcd:
    """Answers the compaction round's transaction as an empty etcd would, except while `down`."""

    def __init__(self) -> None:
        self.down = False
        self.version = 0
        self.revision = 100

    async def txn(self, compare: Sequence[Any], success: Sequence[Any], failure: Sequence[Any] = ()) -> TxnResult:
        if self.down:
            raise Unavailable("etcd at http://127.0.0.1:2379 unavailable")
        assert compare[0].value == self.version and isinstance(success[0], PutOp)  # one apiserver: it always wins
        self.version += 1
        self.revision += 10
        return TxnResult(succeeded=True, revision=self.revision, responses=[])


async def test_a_round_that_fails_is_retried_at_the_next_interval() -> None:
    clock, etcd, compacted = FakeClock(), FlakyEtcd(), []

    async def compact(revision: int) -> None:
        compacted.append(revision)

    compactor = Compactor(etcd, compact=compact, prefix="/p", interval=60, clock=clock)  # type: ignore[arg-type]  # the rounds need only txn
    task = asyncio.create_task(compactor.run())

    async def tick(*, down: bool) -> None:
        etcd.down = down
        while clock.sleepers == 0:
            await asyncio.sleep(0)
        clock.advance(60)
        for _ in range(5):
            await asyncio.sleep(0)

    await tick(down=False)  # records revision 110
    await tick(down=True)  # fails: logged, the task goes on
    await tick(down=True)
    await tick(down=False)  # compacts to what the last good round saw
    await tick(down=False)
    assert not task.done()
    assert compacted == [110, 120]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
