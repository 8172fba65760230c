"""The caravanserai/v1 resource kinds: `from caravanserai import v1`, then `v1.Project`, `v1.Node` …

Message classes are re-exported from the generated code in `caravanserai.api.v1`; constants name the strings
the server accepts for phases, states and condition types.
"""

from __future__ import annotations

from caravanserai.api.v1.api_pb2 import (
    AccessRequest,
    AccessResponse,
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
from caravanserai.api.v1.autoscaling_pb2 import (
    DeleteNodesRequest,
    DeleteNodesResponse,
    ExecProvider,
    GrpcProvider,
    IncreaseSizeRequest,
    IncreaseSizeResponse,
    ListNodesRequest,
    ListNodesResponse,
    NodeGroup,
    NodeGroupProvider,
    NodeGroupSpec,
    NodeGroupStatus,
    NodeRemoval,
    NodeTemplate,
    ProviderNode,
    ProvisioningNode,
    ScaleDown,
    ScalingDecision,
)
from caravanserai.api.v1.backups_pb2 import BackupRepository, BackupRepositorySpec, BackupRepositoryStatus
from caravanserai.api.v1.configdata_pb2 import Config, ConfigSpec, ConfigStatus, Secret, SecretSpec, SecretStatus
from caravanserai.api.v1.definitions_pb2 import (
    AdmissionHook,
    AdmissionPolicy,
    AdmissionPolicySpec,
    AdmissionPolicyStatus,
    ConversionHook,
    CustomObject,
    DefinitionVersion,
    FieldRule,
    PrinterColumn,
    ResourceDefinition,
    ResourceDefinitionSpec,
    ResourceDefinitionStatus,
    ValidationRule,
)
from caravanserai.api.v1.quotas_pb2 import ResourceQuota, ResourceQuotaSpec, ResourceQuotaStatus
from caravanserai.api.v1.rbac_pb2 import (
    ClusterRole,
    ClusterRoleBinding,
    PolicyRule,
    Role,
    RoleBinding,
    RoleBindingSpec,
    RoleBindingStatus,
    RoleRef,
    RoleSpec,
    RoleStatus,
    Subject,
)
from caravanserai.api.v1.replicas_pb2 import (
    DisruptionBudget,
    ProjectSet,
    ProjectSetRevision,
    ProjectSetSpec,
    ProjectSetStatus,
    ProjectSetStrategy,
    ProjectTemplate,
    RollingUpdateStrategy,
)
from caravanserai.api.v1.resources_pb2 import (
    Affinity,
    BackupHook,
    BackupRetention,
    Condition,
    DeviceMapping,
    EnvFromSource,
    EnvVar,
    Event,
    EventSource,
    EventSpec,
    EventStatus,
    ExecCheck,
    HealthCheck,
    HostAlias,
    HttpCheck,
    Ingress,
    IngressAccess,
    IngressTarget,
    KeyRef,
    LabelSelector,
    LabelSelectorRequirement,
    Lease,
    LeaseSpec,
    LeaseStatus,
    Logging,
    Namespace,
    NamespaceSpec,
    NamespaceStatus,
    Node,
    NodeAddress,
    NodeAffinity,
    NodeEstimate,
    NodeImage,
    NodeInfo,
    NodeNetwork,
    NodeScores,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    NodeSpec,
    NodeStatus,
    ObjectMeta,
    ObjectReference,
    OwnerReference,
    PlacementEstimates,
    PlacementScores,
    PluginScore,
    PreferredSchedulingTerm,
    Project,
    ProjectAffinity,
    ProjectAffinityTerm,
    ProjectMove,
    ProjectSpec,
    ProjectStatus,
    ResourceRequirements,
    Service,
    ServiceDependency,
    ServicePort,
    ServiceStatus,
    SnapshotRecord,
    Taint,
    TcpCheck,
    Throughput,
    TmpfsMount,
    Toleration,
    TopologySpreadConstraint,
    Ulimit,
    UpdateConfig,
    Volume,
    VolumeBackup,
    VolumeMount,
    VolumeRestore,
    VolumeRestoreRequest,
    VolumeStatus,
    WeightedProjectAffinityTerm,
)
from caravanserai.api.v1.routes_pb2 import Route, RouteEndpoint, RouteHost, RouteSpec, RouteStatus

API_VERSION = "caravanserai/v1"

# ResourceQuota policies.
QUOTA_QUEUE = "Queue"
QUOTA_REJECT = "Reject"

# Namespace phases.
NAMESPACE_ACTIVE = "Active"
NAMESPACE_TERMINATING = "Terminating"

# Project phases (DESIGN §4).
QUEUED = "Queued"  # held back by its namespace's quota until it fits (before Pending; the scheduler never sees it)
PENDING = "Pending"
SCHEDULED = "Scheduled"
RUNNING = "Running"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
TERMINATING = "Terminating"
TERMINATED = "Terminated"
PHASES = (QUEUED, PENDING, SCHEDULED, RUNNING, SUCCEEDED, FAILED, TERMINATING, TERMINATED)
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
CONDITION_FENCE_UNRECORDED = "FenceUnrecorded"  # a node's: its agent cannot write the fence deadline for the watchdog
# Conditions of a project with backed-up volumes.
CONDITION_BACKUP_OVERDUE = "BackupOverdue"
CONDITION_RESTORING = "Restoring"
CONDITION_RESTORE_FAILED = "RestoreFailed"
# Condition of a project evicted from its node to make room for a higher-priority one (names the preemptor).
CONDITION_PREEMPTED = "Preempted"
# Conditions of a ProjectSet (as a Deployment's) and the reason of a failed rollout.
CONDITION_PROGRESSING = "Progressing"
CONDITION_AVAILABLE = "Available"
REASON_PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
TRUE = "True"
FALSE = "False"
UNKNOWN = "Unknown"

# Node groups (cara-autoscaler): the label every node of a group carries (value: the group's name), and the
# annotation by which a project keeps its node from being removed ("false": never moved by a scale-down).
LABEL_NODE_GROUP = "caravanserai.io/nodegroup"
ANNOTATION_SAFE_TO_EVICT = "caravanserai.io/safe-to-evict"
# ProjectSet strategies, and the label naming the template revision a replica was made from (pod-template-hash).
ROLLING_UPDATE = "RollingUpdate"
RECREATE = "Recreate"
SET_STRATEGIES = (ROLLING_UPDATE, RECREATE)
TEMPLATE_HASH_LABEL = "caravanserai.io/template-hash"

# Secret types.
SECRET_OPAQUE = "Opaque"
SECRET_REGISTRY_AUTH = "RegistryAuth"
SECRET_TYPES = (SECRET_OPAQUE, SECRET_REGISTRY_AUTH)

# Volume types.
VOLUME_EPHEMERAL = "Ephemeral"
VOLUME_PERSISTENT = "Persistent"
VOLUME_SECRET = "Secret"
VOLUME_CONFIG = "Config"
VOLUME_HOST_PATH = "HostPath"
VOLUME_TYPES = (VOLUME_EPHEMERAL, VOLUME_PERSISTENT, VOLUME_SECRET, VOLUME_CONFIG, VOLUME_HOST_PATH)

# Service.network_mode: the project network (default) or the node's own network stack.
NETWORK_MODE_PROJECT = ""
NETWORK_MODE_HOST = "host"
NETWORK_MODES = (NETWORK_MODE_PROJECT, NETWORK_MODE_HOST)

# What a node without a volume's current data does before the services start (Volume.restore).
RESTORE_LATEST = "Latest"
RESTORE_NEVER = "Never"
RESTORE_POLICIES = (RESTORE_LATEST, RESTORE_NEVER)

# ProjectSpec.preemption_policy: may a Pending project that fits nowhere evict lower-priority projects?
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"  # the default (empty)
PREEMPT_NEVER = "Never"
PREEMPTION_POLICIES = (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER)

# UpdateConfig.order: how a changed service is replaced on its node.
UPDATE_STOP_FIRST = "stop-first"  # the default (empty)
UPDATE_START_FIRST = "start-first"
UPDATE_ORDERS = (UPDATE_STOP_FIRST, UPDATE_START_FIRST)

# Image pull policies.
PULL_IF_NOT_PRESENT = "IfNotPresent"
PULL_ALWAYS = "Always"
PULL_NEVER = "Never"
PULL_POLICIES = (PULL_IF_NOT_PRESENT, PULL_ALWAYS, PULL_NEVER)

# Watch event types.
ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
BOOKMARK = "BOOKMARK"

__all__ = [
    "ADDED",
    "ANNOTATION_SAFE_TO_EVICT",
    "API_VERSION",
    "BOOKMARK",
    "BOUND_PHASES",
    "BackupHook",
    "BackupRepository",
    "BackupRepositorySpec",
    "BackupRepositoryStatus",
    "BackupRetention",
    "CONDITION_BACKUP_OVERDUE",
    "CONDITION_DEGRADED",
    "CONDITION_DISK_PRESSURE",
    "CONDITION_FENCE_UNRECORDED",
    "CONDITION_MEMORY_PRESSURE",
    "CONDITION_NOT_READY_AT",
    "CONDITION_PHASE",
    "CONDITION_PREEMPTED",
    "CONDITION_READY",
    "CONDITION_RESTORE_FAILED",
    "CONDITION_RESTORING",
    "CONDITION_SCHEDULED",
    "Condition",
    "Config",
    "ConfigSpec",
    "ConfigStatus",
    "CreateRequest",
    "CustomObject",
    "DELETED",
    "DeleteRequest",
    "DeleteResponse",
    "DeviceMapping",
    "EnvFromSource",
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
    "HostAlias",
    "HttpCheck",
    "Ingress",
    "IngressAccess",
    "IngressTarget",
    "KeyRef",
    "Lease",
    "LeaseSpec",
    "LeaseStatus",
    "ListRequest",
    "ListResponse",
    "LogLine",
    "Logging",
    "LogsRequest",
    "MODIFIED",
    "LABEL_NODE_GROUP",
    "NETWORK_MODES",
    "NETWORK_MODE_HOST",
    "NETWORK_MODE_PROJECT",
    "NODE_NOT_READY",
    "NODE_READY",
    "NODE_STATES",
    "Node",
    "NodeAddress",
    "NodeEstimate",
    "NodeImage",
    "NodeInfo",
    "NodeNetwork",
    "NodeSpec",
    "NodeStatus",
    "Object",
    "ObjectMeta",
    "ObjectReference",
    "OwnerReference",
    "PENDING",
    "PHASES",
    "PREEMPTION_POLICIES",
    "PREEMPT_LOWER_PRIORITY",
    "PREEMPT_NEVER",
    "PULL_ALWAYS",
    "PULL_IF_NOT_PRESENT",
    "PULL_NEVER",
    "PULL_POLICIES",
    "PlacementEstimates",
    "Affinity",
    "LabelSelector",
    "LabelSelectorRequirement",
    "NodeAffinity",
    "NodeScores",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PlacementScores",
    "PluginScore",
    "PreferredSchedulingTerm",
    "ProjectAffinity",
    "ProjectAffinityTerm",
    "TopologySpreadConstraint",
    "UPDATE_ORDERS",
    "UPDATE_START_FIRST",
    "UPDATE_STOP_FIRST",
    "UpdateConfig",
    "WeightedProjectAffinityTerm",
    "PrinterColumn",
    "FieldRule",
    "ValidationRule",
    "AdmissionHook",
    "AdmissionPolicy",
    "ProjectSet",
    "Namespace",
    "NamespaceSpec",
    "AccessRequest",
    "AccessResponse",
    "ClusterRole",
    "ResourceQuota",
    "ResourceQuotaSpec",
    "ResourceQuotaStatus",
    "Route",
    "RouteEndpoint",
    "RouteHost",
    "RouteSpec",
    "RouteStatus",
    "QUEUED",
    "QUOTA_QUEUE",
    "QUOTA_REJECT",
    "ClusterRoleBinding",
    "PolicyRule",
    "Role",
    "RoleBinding",
    "RoleBindingSpec",
    "RoleBindingStatus",
    "RoleRef",
    "RoleSpec",
    "RoleStatus",
    "Subject",
    "NamespaceStatus",
    "NAMESPACE_ACTIVE",
    "NAMESPACE_TERMINATING",
    "ProjectSetSpec",
    "ProjectSetStatus",
    "ProjectSetStrategy",
    "ProjectSetRevision",
    "ProjectTemplate",
    "RollingUpdateStrategy",
    "DisruptionBudget",
    "CONDITION_PROGRESSING",
    "CONDITION_AVAILABLE",
    "REASON_PROGRESS_DEADLINE_EXCEEDED",
    "ROLLING_UPDATE",
    "RECREATE",
    "SET_STRATEGIES",
    "TEMPLATE_HASH_LABEL",
    "AdmissionPolicySpec",
    "AdmissionPolicyStatus",
    "DeleteNodesRequest",
    "DeleteNodesResponse",
    "ExecProvider",
    "GrpcProvider",
    "IncreaseSizeRequest",
    "IncreaseSizeResponse",
    "ListNodesRequest",
    "ListNodesResponse",
    "NodeGroup",
    "NodeGroupProvider",
    "NodeGroupSpec",
    "NodeGroupStatus",
    "NodeRemoval",
    "NodeTemplate",
    "ProviderNode",
    "ProvisioningNode",
    "ScaleDown",
    "ScalingDecision",
    "ConversionHook",
    "DefinitionVersion",
    "Project",
    "ProjectMove",
    "ProjectSpec",
    "ProjectStatus",
    "RESTORE_LATEST",
    "RESTORE_NEVER",
    "RESTORE_POLICIES",
    "RUNNING",
    "ResourceDefinition",
    "ResourceDefinitionSpec",
    "ResourceDefinitionStatus",
    "ResourceRequirements",
    "SCHEDULED",
    "SECRET_OPAQUE",
    "SECRET_REGISTRY_AUTH",
    "SECRET_TYPES",
    "SUCCEEDED",
    "Secret",
    "SecretSpec",
    "SecretStatus",
    "Service",
    "ServiceDependency",
    "ServicePort",
    "ServiceStatus",
    "SnapshotRecord",
    "TERMINATED",
    "TERMINATING",
    "TRUE",
    "Taint",
    "TcpCheck",
    "Throughput",
    "TmpfsMount",
    "Toleration",
    "UNKNOWN",
    "Ulimit",
    "UpdateRequest",
    "VOLUME_CONFIG",
    "VOLUME_EPHEMERAL",
    "VOLUME_HOST_PATH",
    "VOLUME_PERSISTENT",
    "VOLUME_SECRET",
    "VOLUME_TYPES",
    "Volume",
    "VolumeBackup",
    "VolumeMount",
    "VolumeRestore",
    "VolumeRestoreRequest",
    "VolumeStatus",
    "WatchEvent",
    "WatchRequest",
]
