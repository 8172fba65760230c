"""The caravanserai/v1 resource kinds: `from caravanserai import v1`, then `v1.Project`, `v1.Node` …

Message classes are re-exported from the generated code in `caravanserai.api.v1`; constants name the strings
the server accepts for phases, states and condition types.
"""

from __future__ import annotations

from caravanserai.api.v1.api_pb2 import (
    CreateRequest,
    DeleteRequest,
    DeleteResponse,
    GetRequest,
    ListRequest,
    ListResponse,
    LogLine,
    LogsRequest,
    Object,
    UpdateRequest,
    WatchEvent,
    WatchRequest,
)
from caravanserai.api.v1.definitions_pb2 import (
    CustomObject,
    PrinterColumn,
    ResourceDefinition,
    ResourceDefinitionSpec,
    ResourceDefinitionStatus,
)
from caravanserai.api.v1.resources_pb2 import (
    Condition,
    EnvVar,
    Event,
    EventSource,
    EventSpec,
    EventStatus,
    ExecCheck,
    HealthCheck,
    HttpCheck,
    Ingress,
    IngressAccess,
    IngressTarget,
    Lease,
    LeaseSpec,
    LeaseStatus,
    Node,
    NodeAddress,
    NodeInfo,
    NodeNetwork,
    NodeSpec,
    NodeStatus,
    ObjectMeta,
    ObjectReference,
    Project,
    ProjectSpec,
    ProjectStatus,
    ResourceRequirements,
    Service,
    ServiceDependency,
    ServicePort,
    ServiceStatus,
    Taint,
    TcpCheck,
    Throughput,
    Toleration,
    Volume,
    VolumeMount,
)

API_VERSION = "caravanserai/v1"

# Project phases (DESIGN §4).
PENDING = "Pending"
SCHEDULED = "Scheduled"
RUNNING = "Running"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
TERMINATING = "Terminating"
TERMINATED = "Terminated"
PHASES = (PENDING, SCHEDULED, RUNNING, SUCCEEDED, FAILED, TERMINATING, TERMINATED)
# Phases in which a project occupies its node's resources.
BOUND_PHASES = (SCHEDULED, RUNNING, TERMINATING)

# Node states.
NODE_READY = "Ready"
NODE_NOT_READY = "NotReady"
NODE_STATES = (NODE_READY, NODE_NOT_READY)

# Condition types and statuses.
CONDITION_READY = "Ready"
CONDITION_SCHEDULED = "Scheduled"
CONDITION_NOT_READY_AT = "NotReadyAt"
CONDITION_PHASE = "Phase"
CONDITION_DEGRADED = "Degraded"
CONDITION_MEMORY_PRESSURE = "MemoryPressure"
CONDITION_DISK_PRESSURE = "DiskPressure"
TRUE = "True"
FALSE = "False"
UNKNOWN = "Unknown"

# Watch event types.
ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
BOOKMARK = "BOOKMARK"

__all__ = [
    "ADDED",
    "API_VERSION",
    "BOOKMARK",
    "BOUND_PHASES",
    "CONDITION_DEGRADED",
    "CONDITION_DISK_PRESSURE",
    "CONDITION_MEMORY_PRESSURE",
    "CONDITION_NOT_READY_AT",
    "CONDITION_PHASE",
    "CONDITION_READY",
    "CONDITION_SCHEDULED",
    "Condition",
    "CreateRequest",
    "CustomObject",
    "DELETED",
    "DeleteRequest",
    "DeleteResponse",
    "EnvVar",
    "Event",
    "EventSource",
    "EventSpec",
    "EventStatus",
    "ExecCheck",
    "FAILED",
    "FALSE",
    "GetRequest",
    "HealthCheck",
    "HttpCheck",
    "Ingress",
    "IngressAccess",
    "IngressTarget",
    "Lease",
    "LeaseSpec",
    "LeaseStatus",
    "ListRequest",
    "ListResponse",
    "LogLine",
    "LogsRequest",
    "MODIFIED",
    "NODE_NOT_READY",
    "NODE_READY",
    "NODE_STATES",
    "Node",
    "NodeAddress",
    "NodeInfo",
    "NodeNetwork",
    "NodeSpec",
    "NodeStatus",
    "Object",
    "ObjectMeta",
    "ObjectReference",
    "PENDING",
    "PHASES",
    "PrinterColumn",
    "Project",
    "ProjectSpec",
    "ProjectStatus",
    "RUNNING",
    "ResourceDefinition",
    "ResourceDefinitionSpec",
    "ResourceDefinitionStatus",
    "ResourceRequirements",
    "SCHEDULED",
    "SUCCEEDED",
    "Service",
    "ServiceDependency",
    "ServicePort",
    "ServiceStatus",
    "TERMINATED",
    "TERMINATING",
    "TRUE",
    "Taint",
    "TcpCheck",
    "Throughput",
    "Toleration",
    "UNKNOWN",
    "UpdateRequest",
    "Volume",
    "VolumeMount",
    "WatchEvent",
    "WatchRequest",
]
