"""Fixtures users can import for their own tests: an in-memory `FakeClient` for unit tests, a real etcd process,
an in-process apiserver over it, a fake clock, object builders, `wait_for`, `running(manager)`, free ports, the
Docker test image and real restic repositories (a REST server on loopback, local paths)."""

from caravanserai.testing import builders
from caravanserai.testing.apiserver import RunningApiServer, apiserver, start_apiserver
from caravanserai.testing.clock import FakeClock
from caravanserai.testing.docker import DEFAULT_IMAGE, ensure_test_image
from caravanserai.testing.etcd import EtcdServer, EtcdStartError
from caravanserai.testing.fakeclient import FakeClient, FakeResourceClient
from caravanserai.testing.manager import running
from caravanserai.testing.ports import free_port, free_ports
from caravanserai.testing.restic import ResticError, ResticRepository, RestServer, local_repository_url
from caravanserai.testing.wait import wait_for

__all__ = [
    "DEFAULT_IMAGE",
    "EtcdServer",
    "EtcdStartError",
    "FakeClient",
    "FakeClock",
    "FakeResourceClient",
    "RestServer",
    "ResticError",
    "ResticRepository",
    "RunningApiServer",
    "apiserver",
    "builders",
    "ensure_test_image",
    "free_port",
    "free_ports",
    "local_repository_url",
    "running",
    "start_apiserver",
    "wait_for",
]
