"""The Compose keys a Project has no equivalent for, and the line said for each (never a silent guess).

`SERVICE_KEYS` holds the service keys that are converted; any other service key gets the line of `SERVICE_NOTES`,
or `NO_EQUIVALENT`. Top-level keys are in `TOP_LEVEL_NOTES`.
"""

from __future__ import annotations

NO_EQUIVALENT = "has no equivalent in a Project: left out"

SERVICE_KEYS = frozenset(
    {
        "build", "cap_add", "cap_drop", "command", "configs", "cpus", "depends_on", "deploy", "devices",
        "entrypoint", "env_file", "environment", "expose", "extra_hosts", "healthcheck", "image", "init", "labels",
        "logging", "mem_limit", "mem_reservation", "network_mode", "networks", "ports", "privileged", "pull_policy",
        "restart", "secrets", "shm_size", "stop_grace_period", "stop_signal", "sysctls", "tmpfs", "ulimits", "user",
        "volumes", "working_dir", "scale", "container_name", "hostname",
    }
)  # fmt: skip
"""Service keys read by the conversion (some of them only partly, with a line for the rest)."""

SERVICE_NOTES = {
    "profiles": "profiles are not read: every service of the file is converted",
    "links": "services reach each other by service name on the project network; link aliases are not made",
    "external_links": "a project reaches only its own services by name; containers of other projects are not linked",
    "read_only": "a read-only root file system has no equivalent yet: the container's file system is writable",
    "security_opt": "security options have no equivalent: Docker's defaults apply",
    "tty": "containers run without a terminal (logs come through `caractrl logs`)",
    "stdin_open": "containers run without standard input (use `caractrl exec -it`)",
    "develop": "watch mode is a development tool: left out",
    "dns": "DNS servers cannot be set: the container uses Docker's resolver (services by name, then the node's)",
    "dns_search": "DNS search domains cannot be set",
    "dns_opt": "DNS options cannot be set",
    "pid": "PID namespace sharing has no equivalent",
    "ipc": "IPC namespace sharing has no equivalent",
    "uts": "UTS namespace sharing has no equivalent",
    "userns_mode": "user namespace modes have no equivalent",
    "cgroup": "cgroup namespace modes have no equivalent",
    "cgroup_parent": "a parent cgroup cannot be set",
    "volumes_from": "mount the same named volume in both services instead (spec.volumes)",
    "platform": "the node's platform is used; a node selector on a label such as arch chooses the node",
    "runtime": "the engine's default runtime is used",
    "gpus": "ask for GPUs as extended resources (resources.requests, e.g. nvidia.com/gpu: 1), see docs/agent.md",
    "post_start": "lifecycle hooks have no equivalent",
    "pre_stop": "lifecycle hooks have no equivalent (stop_signal and stop_grace_period are converted)",
    "blkio_config": "block IO limits have no equivalent",
    "pids_limit": "a PID limit has no equivalent",
    "oom_kill_disable": "OOM settings have no equivalent",
    "oom_score_adj": "OOM settings have no equivalent",
    "mem_swappiness": "swap settings have no equivalent",
    "memswap_limit": "swap settings have no equivalent",
    "group_add": "supplementary groups have no equivalent (user takes uid:gid)",
    "mac_address": "MAC addresses are Docker's choice",
    "domainname": "the domain name cannot be set",
    "annotations": "container annotations have no equivalent (labels are converted)",
    "attach": "logs of every service are kept; `caractrl logs` reads them",
    "label_file": "write the labels under labels: instead",
    "storage_opt": "storage driver options have no equivalent",
    "use_api_socket": "the Docker API socket is never given to a service",
    "provider": "services managed by an external provider have no equivalent",
    "models": "AI models have no equivalent",
}
"""The line for a service key that is not converted, when there is more to say than `NO_EQUIVALENT`."""

TOP_LEVEL_NOTES = {
    "version": "is obsolete in Compose and ignored",
    "models": "AI models have no equivalent: left out",
}
"""Top-level keys left out, with their line (`services`, `volumes`, `secrets`, `configs`, `networks` and `name`
are converted)."""


__all__ = ["NO_EQUIVALENT", "SERVICE_KEYS", "SERVICE_NOTES", "TOP_LEVEL_NOTES"]
