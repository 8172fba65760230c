"""Mutations that make a valid manifest (see `strategies`) invalid, each for a known reason, and `manifest_cases()`.

A mutation breaks the data in place and returns the field path a refusal must name
(`spec.services[1].ports[0].containerPort`, `metadata.labels["Bad Key"]` …), or None when it does not apply to
this data (an earlier mutation replaced the part it works on). Kind-specific mutations cover names, labels,
quantities, enums, duplicates, dangling references, ports and sizes; generic ones, guided by the message
descriptor, add unknown fields and values of the wrong type. The generator is the oracle: a case without
mutations must be stored, a case with any must be refused naming one of their paths.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import strategies as st
from strategies import (
    BAD_LABEL_KEYS,
    BAD_LABEL_VALUES,
    BAD_QUANTITIES,
    JUNK,
    JUNK_KEYS,
    LABEL_KEYS,
    LABEL_VALUES,
    TEXT,
    TIMESTAMPS,
    Data,
    Draw,
    bad_dns_labels,
    bad_dns_subdomains,
    dns_labels,
    valid_nodes,
    valid_projects,
)

from caravanserai import v1
from caravanserai.text.violations import key_path

Mutation = Callable[[Draw, Data, type[Message]], "str | None"]

# ---- helpers --------------------------------------------------------------------------------------------------


def _mapping(parent: Any, key: str) -> Data | None:
    """parent[key] as a dict (created empty when missing), or None when parent or the value is no dict."""
    if not isinstance(parent, dict):
        return None
    value = parent.setdefault(key, {})
    return value if isinstance(value, dict) else None


def _listed(parent: Any, key: str) -> list[Any] | None:
    if not isinstance(parent, dict):
        return None
    value = parent.setdefault(key, [])
    return value if isinstance(value, list) else None


def _service_of(draw: Draw, data: Data) -> tuple[str, Data] | None:
    spec = data.get("spec")
    services = spec.get("services") if isinstance(spec, dict) else None
    services = services if isinstance(services, list) else []
    choices = [(f"spec.services[{i}]", s) for i, s in enumerate(services) if isinstance(s, dict)]
    return draw(st.sampled_from(choices)) if choices else None


def _append(items: list[Any] | None, path: str, item: Any, attribute: str = "") -> str | None:
    """Append `item` to `items` (None: not applicable); the path of the new item, or of its `attribute`."""
    if items is None:
        return None
    items.append(item)
    return f"{path}[{len(items) - 1}]" + (f".{attribute}" if attribute else "")


def _set_in(draw: Draw, data: Data, where: tuple[str, ...], values: st.SearchStrategy[Any], name: str) -> str | None:
    """data[where...][name] = drawn value; the path of that field."""
    parent: Any = data
    for key in where:
        parent = _mapping(parent, key)
    if parent is None:
        return None
    parent[name] = draw(values)
    return ".".join((*where, name))


def bad_label(draw: Draw, data: Data, cls: type[Message]) -> str | None:
    where = draw(
        st.sampled_from(
            [("metadata", "labels"), ("spec", "nodeSelector")] if cls is v1.Project else [("metadata", "labels")]
        )
    )
    labels = _mapping(_mapping(data, where[0]), where[1])
    if labels is None:
        return None
    key, value = draw(st.one_of(st.tuples(BAD_LABEL_KEYS, LABEL_VALUES), st.tuples(LABEL_KEYS, BAD_LABEL_VALUES)))
    labels[key] = value
    return key_path(".".join(where), key)


def huge_input(draw: Draw, data: Data, cls: type[Message]) -> str | None:
    """Beyond a size limit: a map of more than 256 entries, a list of more than 1000, a string over 64 KiB, or
    annotations over 256 KiB in all (the costliest cases to parse, so they share one slot among the mutations)."""
    metadata = _mapping(data, "metadata")
    picked = _service_of(draw, data)
    choice = draw(st.sampled_from(["labels", "annotations"] + (["image", "command", "args"] if picked else [])))
    if choice in ("labels", "annotations"):
        entries = _mapping(metadata, choice)
        if entries is None:
            return None
        if choice == "labels":
            entries.update({f"fuzz-{i}": "v" for i in range(draw(st.integers(257, 300)))})
        else:
            entries["fuzz/big"] = "x" * draw(st.integers(256 * 1024 + 1, 260 * 1024))
        return f"metadata.{choice}"
    assert picked is not None
    path, service = picked
    if choice == "image":
        return _put(service, "image", "x" * draw(st.integers(64 * 1024 + 1, 66 * 1024)), f"{path}.image")
    if choice == "command":
        return _append(_listed(service, "command"), f"{path}.command", "é" * draw(st.integers(32 * 1024 + 1, 33_000)))
    return _put(service, "args", ["a"] * draw(st.integers(1001, 1010)), f"{path}.args")


def bad_metadata(draw: Draw, data: Data, cls: type[Message]) -> str | None:
    metadata = _mapping(data, "metadata")
    if metadata is None:
        return None
    choice = draw(st.sampled_from(["annotation key", "finalizer", "version", "deletion"]))
    if choice == "annotation key":
        annotations, key = _mapping(metadata, "annotations"), draw(BAD_LABEL_KEYS)
        return None if annotations is None else _put(annotations, key, "v", key_path("metadata.annotations", key))
    if choice == "finalizer":
        return _append(_listed(metadata, "finalizers"), "metadata.finalizers", draw(BAD_LABEL_KEYS))
    if choice == "version":
        return _put(metadata, "resourceVersion", draw(st.integers(1, 10**9).map(str)), "metadata.resourceVersion")
    return _put(metadata, "deletionTimestamp", draw(TIMESTAMPS), "metadata.deletionTimestamp")


def _put(container: Data, key: str, value: Any, path: str) -> str:
    container[key] = value
    return path


def client_status(draw: Draw, data: Data, cls: type[Message]) -> str:
    status = {"phase": draw(TEXT.filter(bool))} if cls is v1.Project else {"state": draw(TEXT.filter(bool))}
    return _put(data, "status", status, "status")


def bad_type_meta(draw: Draw, data: Data, cls: type[Message]) -> str:
    if draw(st.booleans()):
        return _put(
            data, "apiVersion", draw(st.sampled_from(["v1", "caravanserai/v2", "Caravanserai/v1", ""])), "apiVersion"
        )
    return _put(data, "kind", draw(st.sampled_from(["project", "Pod", "Projects", "", "node", "Nodes"])), "kind")


def bad_project_name(draw: Draw, data: Data, cls: type[Message]) -> str | None:
    return _set_in(draw, data, ("metadata",), bad_dns_labels(), "name")


def bad_node_name(draw: Draw, data: Data, cls: type[Message]) -> str | None:
    return _set_in(draw, data, ("metadata",), bad_dns_subdomains(), "name")


def bad_service(draw: Draw, data: Data, cls: type[Message]) -> str | None:
    picked = _service_of(draw, data)
    choice = draw(st.sampled_from(["no services", "name", "duplicate", "image", "restart", "workdir", "env"]))
    if choice == "no services" or picked is None:
        spec = _mapping(data, "spec")
        return None if spec is None else _put(spec, "services", [], "spec.services")
    path, service = picked
    if choice == "name":
        return _put(service, "name", draw(bad_dns_labels()), f"{path}.name")
    if choice == "duplicate":
        services = data["spec"]["services"]
        return _append(services, "spec.services", copy.deepcopy(service), "name")
    if choice == "image":
        return _put(
            service, "image", draw(st.sampled_from(["", " ", "a b", "busybox\t", "x\u3000y", "\n"])), f"{path}.image"
        )
    if choice == "restart":
        return _put(
            service,
            "restartPolicy",
            draw(st.sampled_from(["always", "Sometimes", " Never", "OnFail"])),
            f"{path}.restartPolicy",
        )
    if choice == "workdir":
        return _put(service, "workingDir", draw(st.sampled_from(["data", "./x", "~/x", " /x"])), f"{path}.workingDir")
    env = _listed(service, "env")
    taken = [e["name"] for e in env or [] if isinstance(e, dict) and isinstance(e.get("name"), str)]
    name = draw(st.sampled_from(["", "A=B", "=", *taken]))
    return _append(env, f"{path}.env", {"name": name, "value": "v"}, "name")


def bad_port(draw: Draw, data: Data, cls: type[Message]) -> str | None:
    picked = _service_of(draw, data)
    if picked is None:
        return None
    path, service = picked
    attribute, value = draw(
        st.sampled_from(
            [
                ("containerPort", 0),
                ("containerPort", -1),
                ("containerPort", 65536),
                ("containerPort", 2**31 - 1),
                ("containerPort", -(2**31)),
                ("containerPort", 2**31),
                ("containerPort", 10**20),
                ("hostPort", -1),
                ("hostPort", 65536),
                ("protocol", "tcp"),
                ("protocol", "SCTP"),
                ("hostIp", "localhost"),
                ("hostIp", "1.2.3"),
                ("hostIp", "::g"),
                ("hostIp", "256.1.1.1"),
                ("name", "Http"),
                ("name", "-x"),
            ]
        )
    )
    port = {"containerPort": 80, attribute: value}
    return _append(_listed(service, "ports"), f"{path}.ports", port, attribute)


def bad_mount(draw: Draw, data: Data, cls: type[Message]) -> str | None:
    picked = _service_of(draw, data)
    if picked is None:
        return None
    path, service = picked
    mounts = _listed(service, "volumeMounts")
    choice = draw(st.sampled_from(["undeclared", "relative", "duplicate"]))
    if choice == "undeclared":
        mount = {"name": "undeclared-" + draw(dns_labels(max_size=10)), "mountPath": "/fuzz/undeclared"}
        return _append(mounts, f"{path}.volumeMounts", mount, "name")
    if choice == "relative":
        mount = {"name": "undeclared-x", "mountPath": draw(st.sampled_from(["data", "", "./x", "mnt/"]))}
        return _append(mounts, f"{path}.volumeMounts", mount, "mountPath")
    taken = [m["mountPath"] for m in mounts or [] if isinstance(m, dict) and isinstance(m.get("mountPath"), str)]
    if not taken:
        return None
    mount = {"name": "undeclared-y", "mountPath": draw(st.sampled_from(taken))}
    return _append(mounts, f"{path}.volumeMounts", mount, "mountPath")


def bad_resources(draw: Draw, data: Data, cls: type[Message]) -> str | None:
    picked = _service_of(draw, data)
    if picked is None:
        return None
    path, service = picked
    resources = _mapping(service, "resources")
    requests, limits = _mapping(resources, "requests"), _mapping(resources, "limits")
    if requests is None or limits is None:
        return None
    choice = draw(st.sampled_from(["quantity", "name", "below request"]))
    name = draw(st.sampled_from(["cpu", "memory", "example.com/gpu", "disk"]))
    if choice == "quantity":
        which = draw(st.sampled_from(["requests", "limits"]))
        return _put(
            requests if which == "requests" else limits,
            name,
            draw(BAD_QUANTITIES),
            key_path(f"{path}.resources.{which}", name),
        )
    if choice == "name":
        bad = draw(BAD_LABEL_KEYS)
        return _put(requests, bad, "1", key_path(f"{path}.resources.requests", bad))
    request = draw(st.integers(2, 10_000))
    requests[name], limits[name] = f"{request}", f"{request - 1}"
    return key_path(f"{path}.resources.limits", name)


def bad_volume(draw: Draw, data: Data, cls: type[Message]) -> str | None:
    volumes = _listed(data.get("spec"), "volumes")
    if volumes is None:
        return None
    named = [v["name"] for v in volumes if isinstance(v, dict) and isinstance(v.get("name"), str)]
    choice = draw(st.sampled_from(["name", "type", "duplicate"] if named else ["name", "type"]))
    if choice == "type":
        volume = {"name": f"extra-{len(volumes)}", "type": draw(st.sampled_from(["tmp", "persistent", "Host"]))}
        return _append(volumes, "spec.volumes", volume, "type")
    name = draw(st.sampled_from(named)) if choice == "duplicate" else draw(bad_dns_labels())
    return _append(volumes, "spec.volumes", {"name": name}, "name")


def bad_ingress(draw: Draw, data: Data, cls: type[Message]) -> str | None:
    routes = _listed(data.get("spec"), "ingress")
    services = _listed(data.get("spec"), "services") or []
    target = next((s["name"] for s in services if isinstance(s, dict) and isinstance(s.get("name"), str)), "")
    route: Data = {"name": f"fuzz-route-{len(routes or [])}", "target": {"service": target, "port": 80}}
    attribute, value = draw(
        st.sampled_from(
            [
                ("target.service", "undeclared-service"),
                ("target.port", 0),
                ("target.port", 65536),
                ("name", ""),
                ("access.scope", "Everyone"),
                ("host", "Bad_Host"),
                ("host", "a..b"),
            ]
        )
    )
    first, _, second = attribute.partition(".")
    if second:
        route.setdefault(first, {})[second] = value
    else:
        route[first] = value
    return _append(routes, "spec.ingress", route, attribute)


def bad_toleration(draw: Draw, data: Data, cls: type[Message]) -> str | None:
    attribute, toleration = draw(
        st.sampled_from(
            [
                ("operator", {"key": "k", "operator": "In"}),
                ("value", {"operator": "Exists", "value": "v"}),
                ("key", {"operator": "Equal", "value": "v"}),
                ("effect", {"key": "k", "effect": "NoRun"}),
                ("key", {"key": "bad key"}),
                ("value", {"key": "k", "value": "bad value"}),
            ]
        )
    )
    return _append(_listed(data.get("spec"), "tolerations"), "spec.tolerations", dict(toleration), attribute)


def bad_taint(draw: Draw, data: Data, cls: type[Message]) -> str | None:
    taints = _listed(data.get("spec"), "taints")
    if taints is None:
        return None
    attribute, taint = draw(
        st.sampled_from(
            [
                ("key", {"effect": "NoSchedule"}),
                ("key", {"key": "bad key", "effect": "NoSchedule"}),
                ("value", {"key": "k", "value": "-v", "effect": "NoSchedule"}),
                ("effect", {"key": "k"}),
                ("effect", {"key": "k", "effect": "noschedule"}),
            ]
        )
    )
    existing = [t for t in taints if isinstance(t, dict)]
    if existing and draw(st.booleans()):
        return _append(taints, "spec.taints", dict(draw(st.sampled_from(existing))))  # a duplicate
    return _append(taints, "spec.taints", dict(taint), attribute)


# ---- generic mutations, guided by the message descriptor: unknown fields and values of the wrong type ----------

_INTEGER_TEXT = re.compile(r"[-+]?[0-9]{1,40}", re.ASCII)  # what protojson accepts as an integer in a string
_NON_INTEGRAL = st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer())
_CONTAINERS = st.one_of(st.lists(JUNK, max_size=3), st.dictionaries(JUNK_KEYS, JUNK, max_size=3))
_INT_RANGES = {FieldDescriptor.TYPE_INT32: 2**31, FieldDescriptor.TYPE_INT64: 2**63}


@dataclass(frozen=True)
class _Slot:
    container: Any  # the dict or list holding the value
    key: Any
    path: str
    field: FieldDescriptor
    role: str  # "field" (the whole field), "item" (one list element) or "entry" (one map value)


def _is_map(fd: FieldDescriptor) -> bool:
    return fd.message_type is not None and fd.message_type.GetOptions().map_entry


def _is_timestamp(fd: FieldDescriptor) -> bool:
    return fd.message_type is not None and fd.message_type.full_name == "google.protobuf.Timestamp"


def _is_message(fd: FieldDescriptor) -> bool:
    return fd.message_type is not None and not _is_map(fd) and not _is_timestamp(fd)


def _slots(data: Data, descriptor: Any, path: str) -> Iterator[_Slot]:
    """Every known field of `data` (and inside it) that still has the shape the schema gives it."""
    fields = {f.json_name: f for f in descriptor.fields}
    for key, value in list(data.items()):
        fd = fields.get(key)
        if fd is None:
            continue
        here = f"{path}.{key}" if path else key
        yield _Slot(data, key, here, fd, "field")
        if _is_map(fd) and isinstance(value, dict):
            yield from (_Slot(value, k, key_path(here, k), fd, "entry") for k in value)
        elif fd.is_repeated and isinstance(value, list):
            for i, item in enumerate(value):
                yield _Slot(value, i, f"{here}[{i}]", fd, "item")
                if _is_message(fd) and isinstance(item, dict):
                    yield from _slots(item, fd.message_type, f"{here}[{i}]")
        elif _is_message(fd) and isinstance(value, dict):
            yield from _slots(value, fd.message_type, here)


def _not_a_time(text: str) -> bool:
    try:
        Timestamp().FromJsonString(text)
    except ValueError:
        return True
    return False


def _wrong_value(slot: _Slot) -> st.SearchStrategy[Any]:
    """Values protojson must refuse for this slot (never null, which leaves a field unset)."""
    fd = slot.field
    if slot.role == "entry":  # string map values: scalars are coerced to text, containers are not
        return _CONTAINERS
    if slot.role == "field" and _is_map(fd):
        return st.one_of(TEXT, st.integers(), st.booleans(), st.lists(JUNK, max_size=3))
    if slot.role == "field" and fd.is_repeated:
        return st.one_of(TEXT, st.integers(), st.booleans(), st.dictionaries(JUNK_KEYS, JUNK, max_size=3))
    if _is_message(fd):
        return st.one_of(TEXT, st.integers(), st.booleans(), st.lists(JUNK, max_size=3))
    if _is_timestamp(fd):
        return st.one_of(TEXT.filter(_not_a_time), st.integers(), st.booleans(), _CONTAINERS)
    if fd.type == FieldDescriptor.TYPE_STRING:
        return st.one_of(st.integers(), st.booleans(), _NON_INTEGRAL, _CONTAINERS)
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return st.one_of(TEXT, st.integers(), _NON_INTEGRAL, _CONTAINERS)
    bound = _INT_RANGES[fd.type]
    return st.one_of(
        TEXT.filter(lambda t: not _INTEGER_TEXT.fullmatch(t)),
        st.booleans(),
        _NON_INTEGRAL,
        _CONTAINERS,
        st.sampled_from([bound, -bound - 1, 10**30]),
    )


def wrong_type(draw: Draw, data: Data, cls: type[Message]) -> str | None:
    slots = list(_slots(data, cls.DESCRIPTOR, ""))
    if not slots:
        return None
    slot = draw(st.sampled_from(slots))
    slot.container[slot.key] = draw(_wrong_value(slot))
    return slot.path


def unknown_field(draw: Draw, data: Data, cls: type[Message]) -> str:
    places: list[tuple[Data, str, Any]] = [(data, "", cls.DESCRIPTOR)]  # (mapping, path, its descriptor)
    for slot in _slots(data, cls.DESCRIPTOR, ""):
        value = slot.container[slot.key]
        nested = slot.role in ("field", "item") and _is_message(slot.field) and isinstance(value, dict)
        if nested and not (slot.role == "field" and slot.field.is_repeated):
            places.append((value, slot.path, slot.field.message_type))
    container, path, descriptor = draw(st.sampled_from(places))
    known = {f.name for f in descriptor.fields} | {f.json_name for f in descriptor.fields}
    key = draw(JUNK_KEYS.filter(lambda k: k not in known))
    container[key] = draw(JUNK)
    return f"{path}.{key}" if path else key


def unpaired_surrogate(draw: Draw, data: Data, cls: type[Message]) -> str | None:
    """A string holding an unpaired surrogate, which only JSON can carry (as an escape such as "\\ud800")."""
    slots = [
        s
        for s in _slots(data, cls.DESCRIPTOR, "")
        if isinstance(s.container[s.key], str) and (s.role == "entry" or s.field.type == FieldDescriptor.TYPE_STRING)
    ]
    if not slots:
        return None
    slot = draw(st.sampled_from(slots))
    slot.container[slot.key] += draw(st.sampled_from(["\ud800", "\udfff", "\udc00x"]))
    return slot.path


GENERIC_MUTATIONS: list[Mutation] = [
    unknown_field,
    wrong_type,
    client_status,
    bad_type_meta,
    bad_label,
    bad_metadata,
    huge_input,
]
PROJECT_MUTATIONS: list[Mutation] = [
    bad_project_name,
    bad_service,
    bad_port,
    bad_mount,
    bad_resources,
    bad_volume,
    bad_ingress,
    bad_toleration,
]
NODE_MUTATIONS: list[Mutation] = [bad_node_name, bad_taint]


@dataclass
class ManifestCase:
    """A manifest as data, how to write it, and the paths its mutations broke (none: the manifest is valid)."""

    data: Data
    cls: type[Message]
    format: str  # "yaml" or "json"
    paths: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.paths

    def key(self) -> str:
        """Equal for equal cases: lists of cases are drawn unique by it (hypothesis repeats list items a lot)."""
        return json.dumps([self.data, self.format, self.paths], sort_keys=True, default=str)


@st.composite
def manifest_cases(draw: Draw) -> ManifestCase:
    cls = draw(st.sampled_from([v1.Project, v1.Node]))
    data = draw(valid_projects() if cls is v1.Project else valid_nodes())
    case = ManifestCase(data, cls, draw(st.sampled_from(["yaml", "json"])))
    if draw(st.integers(0, 9)) >= 5:  # small values are drawn more often: about 2 in 3 are mutated
        return case
    choices = (PROJECT_MUTATIONS if cls is v1.Project else NODE_MUTATIONS) + GENERIC_MUTATIONS
    if case.format == "json":
        choices.append(unpaired_surrogate)
    rnd = draw(st.randoms(use_true_random=True))  # evenly: hypothesis favours the first of sampled_from's choices
    for _ in range(rnd.choice([1, 1, 1, 2, 3])):
        mutate = rnd.choice(choices)
        case.paths.append(mutate(draw, case.data, cls) or unknown_field(draw, case.data, cls))
    return case
