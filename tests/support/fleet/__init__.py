"""The fleet harness: several hosts on one machine (network namespaces on a bridge, each with its own Docker
Engine and agent), a three-member etcd cluster, two apiservers and two controller managers, all over mutual TLS,
with real faults (links cut, processes killed). See `fleet.Fleet`; needs root."""

from support.fleet.cleanup import remove_leftovers
from support.fleet.dockerd import EngineContainer, HostDocker, engine_time
from support.fleet.etcdcluster import EtcdCluster, EtcdMember
from support.fleet.fleet import AGENT_PORT, API_PORT, Fleet, FleetConfig
from support.fleet.netns import Host, NamespacesUnavailable, Network, check_available
from support.fleet.process import HostProcess

__all__ = [
    "engine_time",
    "AGENT_PORT",
    "API_PORT",
    "EngineContainer",
    "EtcdCluster",
    "EtcdMember",
    "Fleet",
    "FleetConfig",
    "Host",
    "HostDocker",
    "HostProcess",
    "NamespacesUnavailable",
    "Network",
    "check_available",
    "remove_leftovers",
]
