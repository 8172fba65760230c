"""The typed records the Docker adapter returns, and the one place that reads Docker's JSON into them.

Everything above the adapter (`dockerapi.DockerRuntime`) sees only these frozen records: container, network and
volume summaries, a container's observed state, the daemon's facts and container events. The parsers below are
the only code in the agent that indexes Docker's JSON documents; they are pure (no I/O) and tolerate missing
fields (a field Docker leaves out reads as empty, zero or False).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from caravanserai.agent import naming


def _labels(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in (value or {}).items()}


@dataclass(frozen=True, slots=True)
class Labelled:
    """A Docker object carrying labels; `label(key)` is "" when the label is absent."""

    labels: Mapping[str, str] = field(default_factory=dict)

    def label(self, key: str) -> str:
        return self.labels.get(key, "")

    @property
    def project(self) -> str:
        """The project the object was made for ("" when unlabelled)."""
        return self.label(naming.LABEL_PROJECT)


@dataclass(frozen=True, slots=True)
class ContainerSummary(Labelled):
    """One entry of `GET /containers/json?all=1`."""

    id: str = ""
    names: tuple[str, ...] = ()  # as Docker lists them, with a leading "/"
    image: str = ""
    state: str = ""  # created, running, exited …
    status: str = ""  # human text, e.g. "Up 3 minutes"
    created: int = 0


@dataclass(frozen=True, slots=True)
class NetworkSummary(Labelled):
    """One entry of `GET /networks`."""

    id: str = ""
    name: str = ""


@dataclass(frozen=True, slots=True)
class VolumeSummary(Labelled):
    """One entry of `GET /volumes`."""

    name: str = ""


@dataclass(frozen=True, slots=True)
class Observed:
    """What Docker reports about one service's container (from `GET /containers/{id}/json`)."""

    service: str
    container_id: str
    status: str
    exit_code: int = 0
    restart_count: int = 0
    image: str = ""
    generation: int = 0
    spec_hash: str = ""
    project_uid: str = ""
    node: str = ""
    error: str = ""
    oom_killed: bool = False


@dataclass(frozen=True, slots=True)
class DaemonInfo:
    """The facts of `docker info` the agent reports (empty or zero when Docker did not say)."""

    server_version: str = ""
    operating_system: str = ""
    root_dir: str = ""  # DockerRootDir
    cpus: int = 0
    memory_bytes: int = 0


@dataclass(frozen=True, slots=True)
class ContainerEvent:
    """A container event: its action, the project labelled on the container (None: none) and Docker's
    `timeNano` (None when absent)."""

    action: str = ""
    project: str | None = None
    time_nano: int | None = None


def container_summary(item: Mapping[str, Any]) -> ContainerSummary:
    return ContainerSummary(
        id=str(item.get("Id", "")),
        names=tuple(str(n) for n in item.get("Names") or ()),
        image=str(item.get("Image", "")),
        labels=_labels(item.get("Labels")),
        state=str(item.get("State", "")),
        status=str(item.get("Status", "")),
        created=int(item.get("Created") or 0),
    )


def network_summary(item: Mapping[str, Any]) -> NetworkSummary:
    labels = _labels(item.get("Labels"))
    return NetworkSummary(id=str(item.get("Id", "")), name=str(item.get("Name", "")), labels=labels)


def volume_summary(item: Mapping[str, Any]) -> VolumeSummary:
    return VolumeSummary(name=str(item.get("Name", "")), labels=_labels(item.get("Labels")))


def observe(info: Mapping[str, Any]) -> Observed:
    """The `Observed` state of a container from its inspect document."""
    state = info.get("State") or {}
    config = info.get("Config") or {}
    labels = config.get("Labels") or {}
    generation = labels.get(naming.LABEL_GENERATION, "0")
    return Observed(
        service=labels.get(naming.LABEL_SERVICE, ""),
        container_id=str(info.get("Id", "")),
        status=str(state.get("Status", "")),
        exit_code=int(state.get("ExitCode") or 0),
        restart_count=int(info.get("RestartCount") or 0),
        image=str(config.get("Image", "")),
        generation=int(generation) if generation.isdigit() else 0,
        spec_hash=labels.get(naming.LABEL_SPEC_HASH, ""),
        project_uid=labels.get(naming.LABEL_PROJECT_UID, ""),
        node=labels.get(naming.LABEL_NODE, ""),
        error=str(state.get("Error") or ""),
        oom_killed=bool(state.get("OOMKilled")),
    )


def daemon_info(info: Mapping[str, Any]) -> DaemonInfo:
    """The `DaemonInfo` of a `docker info` document."""
    return DaemonInfo(
        server_version=str(info.get("ServerVersion") or ""),
        operating_system=str(info.get("OperatingSystem") or ""),
        root_dir=str(info.get("DockerRootDir") or ""),
        cpus=int(info.get("NCPU") or 0),
        memory_bytes=int(info.get("MemTotal") or 0),
    )


def container_event(event: Mapping[str, Any]) -> ContainerEvent:
    """The `ContainerEvent` of one document of Docker's events stream."""
    attributes = (event.get("Actor") or {}).get("Attributes") or {}
    project = attributes.get(naming.LABEL_PROJECT)
    time_nano = event.get("timeNano")
    return ContainerEvent(
        action=str(event.get("Action") or event.get("status") or ""),
        project=str(project) if project else None,
        time_nano=int(time_nano) if time_nano is not None else None,
    )


def since_text(time_nano: int) -> str:
    """Docker's `since` parameter (seconds.nanoseconds) for an event's timeNano."""
    return f"{time_nano // 1_000_000_000}.{time_nano % 1_000_000_000:09d}"


__all__ = [
    "ContainerEvent",
    "ContainerSummary",
    "DaemonInfo",
    "Labelled",
    "NetworkSummary",
    "Observed",
    "VolumeSummary",
    "container_event",
    "container_summary",
    "daemon_info",
    "network_summary",
    "observe",
    "since_text",
    "volume_summary",
]
