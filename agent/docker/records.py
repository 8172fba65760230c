"""The typed records the Docker adapter returns, and the one place that reads Docker's JSON into them.

Everything above the adapter (`engine.DockerRuntime`, `execapi`) sees only these frozen records: container, network
and volume summaries, a container's observed state, an exec'd command's state, the daemon's facts, container events
and pull progress. The parsers below are the only code in the agent that indexes Docker's JSON documents; they are
pure (no I/O) and tolerate missing fields (a field Docker leaves out reads as empty, zero or False).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from caravanserai.agent.docker import naming

# The keys of a container list entry that `ContainerSummary` reads (aiodocker lists containers as objects).
SUMMARY_KEYS = ("Id", "Names", "Image", "Labels", "State", "Status", "Created", "NetworkSettings")


class Indexable(Protocol):
    """A document aiodocker wraps in an object that is indexed by Docker's keys (a listed container)."""

    def __getitem__(self, key: str) -> Any: ...

    def __contains__(self, key: str, /) -> bool: ...


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
        """The key of the project the object was made for ("" when unlabelled; `default` when it has no namespace
        label, as objects made before namespaces existed)."""
        return naming.labelled_project(self.labels)


@dataclass(frozen=True, slots=True)
class ContainerSummary(Labelled):
    """One entry of `GET /containers/json?all=1`."""

    id: str = ""
    names: tuple[str, ...] = ()  # as Docker lists them, with a leading "/"
    image: str = ""
    state: str = ""  # created, running, exited …
    status: str = ""  # human text, e.g. "Up 3 minutes"
    created: int = 0
    networks: tuple[str, ...] = ()  # names of the networks it is configured on (also when not running), sorted


@dataclass(frozen=True, slots=True)
class NetworkSummary(Labelled):
    """One entry of `GET /networks`."""

    id: str = ""
    name: str = ""
    subnets: tuple[str, ...] = ()  # its IPAM subnets (`10.188.0.16/28`), as Docker lists them


@dataclass(frozen=True, slots=True)
class VolumeSummary(Labelled):
    """One entry of `GET /volumes`."""

    name: str = ""


@dataclass(frozen=True, slots=True)
class VolumeInfo(Labelled):
    """What `GET /volumes/{name}` says of a volume: where its data lives on the host and when it was made."""

    name: str = ""
    mountpoint: str = ""
    created: float = 0.0  # seconds since the epoch (0: Docker did not say)


@dataclass(frozen=True, slots=True)
class ImageSummary:
    """One entry of `GET /images/json`: its references (repository:tag, then digests) and size in bytes."""

    names: tuple[str, ...] = ()
    size: int = 0


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
    health: str = ""  # Docker's health status for a HEALTHCHECK: starting, healthy, unhealthy ("" without one)
    started_at: float = 0.0  # seconds since the epoch of the current (or last) start; 0 when never started
    finished_at: float = 0.0  # seconds since the epoch of the last exit; 0 when it never exited
    ip: str = ""  # the container's address on its (project) network; 127.0.0.1 on the host network
    stop_timeout: int | None = None  # its service's grace period in seconds (None: the agent's --stop-timeout)

    @property
    def running(self) -> bool:
        return self.status == "running"


@dataclass(frozen=True, slots=True)
class ExecOptions:
    """A command to run in a container (Docker exec): arguments, KEY=VALUE environment, working directory ("" for
    the image's), whether stdin is attached, whether a TTY is allocated and its initial size."""

    command: tuple[str, ...]
    env: tuple[str, ...] = ()
    workdir: str = ""
    stdin: bool = False
    tty: bool = False
    width: int = 0
    height: int = 0


@dataclass(frozen=True, slots=True)
class ExecChunk:
    """Output of an exec'd command: "stdout" or "stderr", and the bytes."""

    stream: str
    data: bytes


@dataclass(frozen=True, slots=True)
class ExecState:
    """What `GET /exec/{id}/json` says about an exec'd command: whether it still runs, and its exit code (None
    when Docker does not say)."""

    running: bool = False
    exit_code: int | None = None


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
    `timeNano` (None when absent); the container's id and service label, and for a `die` its exit code (None:
    another action, or Docker did not say)."""

    action: str = ""
    project: str | None = None
    time_nano: int | None = None
    container_id: str = ""
    service: str = ""
    exit_code: int | None = None


def container_summary(item: Mapping[str, Any]) -> ContainerSummary:
    return ContainerSummary(
        id=str(item.get("Id", "")),
        names=tuple(str(n) for n in item.get("Names") or ()),
        image=str(item.get("Image", "")),
        labels=_labels(item.get("Labels")),
        state=str(item.get("State", "")),
        status=str(item.get("Status", "")),
        created=int(item.get("Created") or 0),
        networks=tuple(sorted(((item.get("NetworkSettings") or {}).get("Networks")) or {})),
    )


def listed_container(item: Indexable) -> ContainerSummary:
    """The `ContainerSummary` of one container as aiodocker lists it."""
    return container_summary({key: item[key] for key in SUMMARY_KEYS if key in item})


def network_summary(item: Mapping[str, Any]) -> NetworkSummary:
    labels = _labels(item.get("Labels"))
    ipam = item.get("IPAM") or {}
    subnets = tuple(str(c["Subnet"]) for c in ipam.get("Config") or () if isinstance(c, Mapping) and c.get("Subnet"))
    return NetworkSummary(id=str(item.get("Id", "")), name=str(item.get("Name", "")), labels=labels, subnets=subnets)


def volume_summary(item: Mapping[str, Any]) -> VolumeSummary:
    return VolumeSummary(name=str(item.get("Name", "")), labels=_labels(item.get("Labels")))


def volume_summaries(listing: Mapping[str, Any]) -> list[VolumeSummary]:
    """The volumes of a `GET /volumes` answer."""
    return [volume_summary(v) for v in listing.get("Volumes") or []]


def volume_info(item: Mapping[str, Any]) -> VolumeInfo:
    """The `VolumeInfo` of a volume's inspect document."""
    return VolumeInfo(
        name=str(item.get("Name", "")),
        mountpoint=str(item.get("Mountpoint", "")),
        created=docker_time(item.get("CreatedAt")),
        labels=_labels(item.get("Labels")),
    )


def image_summaries(listing: Any) -> list[ImageSummary]:
    """The images of a `GET /images/json` answer; the `<none>` references of untagged images are left out."""
    found = []
    for item in listing or []:
        names = [str(n) for n in (item.get("RepoTags") or []) + (item.get("RepoDigests") or [])]
        found.append(ImageSummary(tuple(n for n in names if "<none>" not in n), int(item.get("Size") or 0)))
    return found


def image_size(info: Mapping[str, Any]) -> int:
    """The size in bytes of an image from its inspect document (0 when Docker does not say)."""
    return int(info.get("Size") or 0)


def exec_state(info: Mapping[str, Any]) -> ExecState:
    """The `ExecState` of an exec instance's inspect document."""
    code = info.get("ExitCode")
    return ExecState(running=bool(info.get("Running")), exit_code=int(code) if code is not None else None)


def docker_time(text: Any) -> float:
    """Seconds since the epoch of one of Docker's RFC 3339 times (nanosecond precision); 0 for the zero time
    ("0001-01-01T00:00:00Z") or anything unreadable."""
    value = str(text or "")
    if not value or value.startswith("0001-"):
        return 0.0
    head, _, rest = value.partition(".")
    fraction, zone = "0", "Z"
    if rest:
        digits = "".join(itertools.takewhile(str.isdigit, rest))
        fraction, zone = digits or "0", rest[len(digits) :] or "Z"
    elif head.endswith("Z"):
        head = head[:-1]
    try:
        moment = datetime.fromisoformat(head + (zone if zone != "Z" else "+00:00"))
    except ValueError:
        return 0.0
    return moment.timestamp() + float("0." + fraction)


def _first_ip(info: Mapping[str, Any]) -> str:
    networks = ((info.get("NetworkSettings") or {}).get("Networks")) or {}
    if "host" in networks:  # the node's own network stack: the agent reaches it on loopback
        return "127.0.0.1"
    for network in networks.values():
        address = (network or {}).get("IPAddress")
        if address:
            return str(address)
    return ""


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
        health=str((state.get("Health") or {}).get("Status") or ""),
        started_at=docker_time(state.get("StartedAt")),
        finished_at=docker_time(state.get("FinishedAt")),
        ip=_first_ip(info),
        stop_timeout=int(grace) if (grace := labels.get(naming.LABEL_STOP_TIMEOUT, "")).isdigit() else None,
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
    actor = event.get("Actor") or {}
    attributes = actor.get("Attributes") or {}
    project = naming.labelled_project({str(k): str(v) for k, v in attributes.items()})
    time_nano = event.get("timeNano")
    exit_code = str(attributes.get("exitCode") or "")
    return ContainerEvent(
        action=str(event.get("Action") or event.get("status") or ""),
        project=str(project) if project else None,
        time_nano=int(time_nano) if time_nano is not None else None,
        container_id=str(actor.get("ID") or event.get("id") or ""),
        service=str(attributes.get(naming.LABEL_SERVICE) or ""),
        exit_code=int(exit_code) if exit_code.lstrip("-").isdigit() else None,
    )


@dataclass(frozen=True, slots=True)
class PullProgress:
    """Where an image pull stands: bytes downloaded of the layers whose size is known so far, and how many layers."""

    downloaded: int
    total: int
    layers: int
    done_layers: int


class PullTally:
    """Adds up the messages of Docker's pull stream (`{"id": layer, "status": …, "progressDetail": {current,
    total}}`) into a `PullProgress`; `error(doc)` is the stream's error message, if it carries one."""

    _DONE = ("Download complete", "Pull complete", "Already exists")

    def __init__(self) -> None:
        self._sizes: dict[str, tuple[int, int]] = {}  # layer → (downloaded, total)
        self._done: set[str] = set()

    def add(self, doc: Mapping[str, Any]) -> PullProgress:
        layer, status = str(doc.get("id") or ""), str(doc.get("status") or "")
        detail = doc.get("progressDetail") or {}
        if layer and status == "Downloading" and isinstance(detail, Mapping):
            total = int(detail.get("total") or 0)
            self._sizes[layer] = (min(int(detail.get("current") or 0), total or 2**62), total)
        elif layer and status in self._DONE:
            self._done.add(layer)
            size = self._sizes.get(layer)
            if size is not None:
                self._sizes[layer] = (size[1], size[1])
        return self.progress

    @property
    def progress(self) -> PullProgress:
        downloaded = sum(d for d, _ in self._sizes.values())
        total = sum(t for _, t in self._sizes.values())
        return PullProgress(downloaded, total, len(set(self._sizes) | self._done), len(self._done))

    @staticmethod
    def error(doc: Mapping[str, Any]) -> str | None:
        message = doc.get("error") or (doc.get("errorDetail") or {}).get("message")
        return str(message) if message else None


def since_text(time_nano: int) -> str:
    """Docker's `since` parameter (seconds.nanoseconds) for an event's timeNano."""
    return f"{time_nano // 1_000_000_000}.{time_nano % 1_000_000_000:09d}"


__all__ = [
    "ContainerEvent",
    "ContainerSummary",
    "DaemonInfo",
    "ExecChunk",
    "ExecOptions",
    "ExecState",
    "ImageSummary",
    "Indexable",
    "Labelled",
    "NetworkSummary",
    "Observed",
    "PullProgress",
    "PullTally",
    "SUMMARY_KEYS",
    "VolumeInfo",
    "VolumeSummary",
    "container_event",
    "container_summary",
    "daemon_info",
    "docker_time",
    "exec_state",
    "image_size",
    "image_summaries",
    "listed_container",
    "network_summary",
    "observe",
    "since_text",
    "volume_info",
    "volume_summaries",
    "volume_summary",
]
