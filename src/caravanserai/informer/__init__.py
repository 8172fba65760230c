"""Informers: a list+watch that never silently dies, feeding an indexed read-only cache and event handlers.

    factory = SharedInformerFactory(client)
    projects = factory.informer(v1.Project, indexers=NODE_REF_INDEXERS)
    projects.add_event_handler(on_add=..., on_update=..., on_delete=...)
    # run factory.run() in a TaskGroup; `await factory.wait_synced()` before trusting the cache
    projects.get("web"); projects.by_index(NODE_REF_INDEX, "node-1")

* `Reflector` (the resume protocol is written out in `caravanserai.informer.reflector`): list, watch from the
  list's version, resume from the last event or bookmark after any stream error with jittered backoff, relist on
  Expired (vanished objects become deletions), restart a watch silent for `WatchOptions.idle_timeout`. The watch
  knobs (backoff, idle timeout, watch lifetime, page size) are one `WatchOptions` record, given to the factory
  (or the Manager) and passed down whole.
* `Indexer`: objects by key (`meta.key_of`) plus indexes (labels by default; `status.nodeRef`, `status.phase` or
  your own).
  Cached objects are read-only; `CARA_CACHE_MUTATION_DETECTOR=1` (or `detect_mutations=True`) makes a change to
  one fail loudly with `CacheMutationError`.
* `Informer`: the cache plus handlers, called after the cache is updated, in order; periodic resync;
  `has_synced()` / `await wait_synced()`; `async def run()` returns only when cancelled.
* `SharedInformerFactory`: one informer (one watch) per (kind, selectors) for all controllers of a process.
"""

from caravanserai.backoff import Backoff
from caravanserai.informer.factory import SharedInformerFactory
from caravanserai.informer.indexer import (
    DEFAULT_INDEXERS,
    LABEL_INDEX,
    NODE_REF_INDEX,
    NODE_REF_INDEXERS,
    PHASE_INDEX,
    PHASE_INDEXERS,
    CacheReader,
    Indexer,
    IndexFunc,
    label_index,
    node_ref_index,
    phase_index,
)
from caravanserai.informer.informer import EventHandler, Informer, Registration
from caravanserai.informer.mutation import CacheMutationError, MutationDetector
from caravanserai.informer.reflector import Reflector, WatchIdle, WatchOptions

__all__ = [
    "Backoff",
    "CacheMutationError",
    "CacheReader",
    "DEFAULT_INDEXERS",
    "EventHandler",
    "IndexFunc",
    "Indexer",
    "Informer",
    "LABEL_INDEX",
    "MutationDetector",
    "NODE_REF_INDEX",
    "NODE_REF_INDEXERS",
    "PHASE_INDEX",
    "PHASE_INDEXERS",
    "Reflector",
    "Registration",
    "SharedInformerFactory",
    "WatchIdle",
    "WatchOptions",
    "label_index",
    "node_ref_index",
    "phase_index",
]
