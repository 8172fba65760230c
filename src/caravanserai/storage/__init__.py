"""Server-side storage: the etcd client and the generic object store over it.

This is the only package that talks to etcd (`caravanserai.api.etcd`); the apiserver uses the `Store`.
"""

from caravanserai.storage.etcd import EtcdClient
from caravanserai.storage.store import ListPage, Store, StoredObject, StoreEvent, WatchBatch

__all__ = ["EtcdClient", "ListPage", "Store", "StoreEvent", "StoredObject", "WatchBatch"]
