"""Fixtures users can import: a real etcd process (and, as they are added, an in-process apiserver, a fake
clock and wait_for helpers)."""

from caravanserai.testing.clock import FakeClock
from caravanserai.testing.docker import DEFAULT_IMAGE, ensure_test_image
from caravanserai.testing.etcd import EtcdServer, EtcdStartError

__all__ = ["DEFAULT_IMAGE", "EtcdServer", "EtcdStartError", "FakeClock", "ensure_test_image"]
