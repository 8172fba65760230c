"""What a handler is given: the object, what changed, a status to fill in, and helpers.

async def on_create(ctx: Context[Backup]) -> None:
    ctx.status.phase = "Scheduled"            # written through the status subresource after the handlers
    run = BackupRun(...); ctx.own(run)          # ownerReference to ctx.obj (controller: true)
    await ctx.client.resource(BackupRun).create(run)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from caravanserai import meta
from caravanserai.operator.essence import Essence, touches

T = TypeVar("T")

CREATE = "create"
UPDATE = "update"
RESUME = "resume"
DELETE = "delete"
TIMER = "timer"
DAEMON = "daemon"
RECONCILE = "reconcile"


@dataclass(slots=True)
class Context(Generic[T]):
    """One call of a handler. `obj` is a copy of the object as read from the server at the start of the reconcile
    (the handler may read it freely); `status` is a copy of its status that the handlers of one reconcile share and
    that is written after them when it changed; `old` is the essence handled last (None on create, and for the
    first reconcile of an object not yet handled), `diff` the field paths changed since then."""

    reason: str
    obj: T
    status: Any
    client: Any  # the operator's client: a caravanserai Client, or caravanserai.testing.FakeClient in unit tests
    now: float  # the clock's wall time at the start of the reconcile
    old: Essence | None = None
    new: Essence = field(default_factory=dict)
    diff: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return str(getattr(self.obj, "metadata").name)

    @property
    def key(self) -> str:
        """The object's key (`meta.key_of`: "namespace/name", or the name of a cluster-wide object)."""
        return meta.key_of(self.obj)

    def changed(self, path: str) -> bool:
        """Whether the field `path` (e.g. `spec.interval`, `metadata.labels.team`) changed since last handled."""
        return touches(self.diff, path)

    def own(self, child: Any, *, controller: bool = True, block_owner_deletion: bool = True) -> Any:
        """Make `child` a dependent of the handled object (an ownerReference naming its uid; added once); the
        garbage collector deletes it when the object goes. Returns `child`."""
        return own(child, self.obj, controller=controller, block_owner_deletion=block_owner_deletion)


def own(child: Any, owner: Any, *, controller: bool = True, block_owner_deletion: bool = True) -> Any:
    """Make `owner` an owner of `child` (`caravanserai.meta.set_owner`: a reference to the same uid is replaced);
    returns `child`. ValueError when `controller` and `child` has another controller already."""
    meta.set_owner(child, owner, controller=controller, block_owner_deletion=block_owner_deletion)
    return child


__all__ = ["CREATE", "DAEMON", "DELETE", "RECONCILE", "RESUME", "TIMER", "UPDATE", "Context", "own"]
