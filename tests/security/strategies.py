"""Hypothesis strategies for the security fuzz tests: names, values and valid manifests.

* Values valid and invalid for the server's rules: DNS labels and subdomains (sometimes at their length limits),
  label keys and values, quantities, timestamps across years 1-9999, odd text (any valid Unicode, NUL included)
  and nested junk.
* `valid_projects()` and `valid_nodes()`: manifests as plain data (camelCase keys) that the server must accept and
  store exactly: unique service, volume, port and ingress names, declared volume mounts, limits at least their
  requests (extended resources: whole numbers, limits equal to requests), host ports unique, health checks with one
  probe, dependsOn only on earlier services (no cycles)
  with a condition the target allows, tolerationSeconds only with NoExecute.

`mutations` breaks these; `request_strategies` builds raw requests from them. Nothing here calls the code under
test.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from caravanserai import v1

Data = dict[str, Any]  # a manifest (or part of one) as parsed from YAML or JSON
Draw = Callable[..., Any]  # the `draw` of a composite strategy

# ---- names and small values -----------------------------------------------------------------------------------

_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"
EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
TEXT = st.text(st.characters(codec="utf-8"), max_size=24)  # any valid Unicode (no surrogates), NUL and controls too
NO_SPACE_TEXT = st.text(st.characters(codec="utf-8").filter(lambda c: not c.isspace()), min_size=1, max_size=24)
JUNK_KEYS = st.text(st.characters(codec="utf-8"), min_size=1, max_size=20).filter(
    lambda k: k not in ("<<", "=")  # YAML's merge and value keys
)
JUNK = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(JUNK_KEYS, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def dns_labels(draw: Draw, *, max_size: int = 63) -> str:
    """A DNS-1123 label (lowercase alphanumerics and '-', alphanumeric at both ends); sometimes the longest."""
    size = draw(st.one_of(st.integers(1, 12), st.just(max_size)))
    if size == 1:
        return str(draw(st.sampled_from(_ALNUM)))
    middle = draw(st.text(_ALNUM + "-", min_size=size - 2, max_size=size - 2))
    return str(draw(st.sampled_from(_ALNUM)) + middle + draw(st.sampled_from(_ALNUM)))


@st.composite
def dns_subdomains(draw: Draw) -> str:
    """Dot-separated DNS labels, at most 253 characters; sometimes exactly 253 with 63-character labels."""
    if draw(st.integers(0, 9)) == 0:
        return ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])
    return ".".join(draw(st.lists(dns_labels(), min_size=1, max_size=4)))[:253].rstrip("-.")


_NAME_PART = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?", fullmatch=True)
LABEL_KEYS = st.one_of(_NAME_PART, st.builds(lambda p, n: f"{p}/{n}", dns_subdomains(), _NAME_PART))
LABEL_VALUES = st.one_of(st.just(""), _NAME_PART)
LABELS = st.dictionaries(LABEL_KEYS, LABEL_VALUES, max_size=4)
TIMESTAMPS = st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)).map(
    lambda d: f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}Z"
)

BAD_QUANTITIES = st.sampled_from(
    [
        "",
        "abc",
        "1.2.3",
        "-1",
        "-0.5",
        "1Zi",
        "1e65",
        "1" * 65,
        " 1",
        "1 ",
        "0x10",
        "1,5",
        "½",
        "１",
        "NaN",
        "Infinity",
        "1KiB",
        "m",
        "e3",
        "1e",
        "+-1",
        "1ee3",
        "٣",
        "1m1",
    ]
)
BAD_LABEL_KEYS = st.sampled_from(["", "a b", "-a", "a-", "a/b/c", "Bad_Prefix/x", "x" * 64, "/a", "a/", "é", "a:b"])
BAD_LABEL_VALUES = st.sampled_from(["x" * 64, "a b", "-a", "a-", "é", "a/b", "a:b", "\x00"])


@st.composite
def bad_dns_labels(draw: Draw) -> str:
    base = draw(dns_labels(max_size=20))
    return str(
        draw(
            st.sampled_from(
                [
                    "",
                    base + "a" * (64 - len(base)) + "b" * draw(st.integers(0, 40)),
                    "A" + base,
                    "-" + base,
                    base + "-",
                    base + "_x",
                    base + ".x",
                    base + "é",
                    base + " x",
                    base + "/x",
                    "..",
                    base + "\x00",
                ]
            )
        )
    )


@st.composite
def bad_dns_subdomains(draw: Draw) -> str:
    base = draw(dns_labels(max_size=20))
    return str(
        draw(
            st.sampled_from(
                [
                    "",
                    ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 62]),
                    "a" * 64,
                    f"{base}.{'x' * 64}",
                    "A" + base,
                    "." + base,
                    base + ".",
                    "-" + base,
                    f"{base}..x",
                    base + "_x",
                    base + "é",
                    base + " x",
                    base + "/x",
                ]
            )
        )
    )


# ---- valid manifests ------------------------------------------------------------------------------------------


def _maybe(draw: Draw, data: Data, key: str, strategy: st.SearchStrategy[Any]) -> None:
    """Half of the time, set data[key] to a drawn value (empty ones are left out, as a person would)."""
    if draw(st.booleans()):
        value = draw(strategy)
        if value not in ("", [], {}, 0, False):
            data[key] = value


@st.composite
def _service(draw: Draw, name: str, volumes: list[str], host_ports: list[int]) -> Data:
    service: Data = {"name": name, "image": draw(st.one_of(st.just("busybox:test"), NO_SPACE_TEXT))}
    _maybe(draw, service, "command", st.lists(TEXT, max_size=2))
    _maybe(draw, service, "args", st.lists(TEXT, max_size=2))
    env_name = st.text(st.characters(codec="utf-8", exclude_characters="="), min_size=1, max_size=12)
    service["env"] = [{"name": n, "value": draw(TEXT)} for n in draw(st.lists(env_name, max_size=2, unique=True))]
    service["ports"] = []
    for port_name in draw(st.lists(dns_labels(max_size=15), max_size=2, unique=True)):
        port: Data = {"containerPort": draw(st.integers(1, 65535)), "name": port_name}
        if host_ports:
            port["hostPort"] = host_ports.pop()
        _maybe(draw, port, "protocol", st.sampled_from(["TCP", "UDP"]))
        _maybe(draw, port, "hostIp", st.ip_addresses().map(str))
        service["ports"].append(port)
    mounts = draw(st.lists(st.sampled_from(volumes), max_size=2)) if volumes else []
    service["volumeMounts"] = [
        {"name": m, "mountPath": f"/mnt/{i}", "readOnly": draw(st.booleans())} for i, m in enumerate(mounts)
    ]
    resources: Data = {"requests": {}, "limits": {}}
    for resource in draw(st.lists(st.sampled_from(["cpu", "memory", "example.com/gpu"]), max_size=2, unique=True)):
        counted = resource == "example.com/gpu"  # extended: whole numbers, the limit equal to the request
        number, extra, suffix = (
            draw(st.integers(0, 4096)),
            draw(st.integers(0, 4096)),
            draw(
                st.sampled_from(
                    ["", "k", "M", "G", "Ki", "Mi", "Gi"] if counted else ["", "m", "k", "M", "G", "Ki", "Mi", "Gi"]
                )
            ),
        )
        if resource == "memory":  # Docker's minimum is 6Mi (a smaller request is refused)
            number, suffix = draw(st.integers(6, 4096)), draw(st.sampled_from(["Mi", "Gi"]))
        resources["requests"][resource] = f"{number}{suffix}"
        if draw(st.booleans()):
            resources["limits"][resource] = f"{number + (0 if counted else extra)}{suffix}"
    service["resources"] = resources
    _maybe(draw, service, "restartPolicy", st.sampled_from(["Always", "OnFailure", "Never"]))
    _maybe(draw, service, "workingDir", TEXT.map(lambda t: "/" + t))
    _maybe(draw, service, "healthcheck", _healthchecks())
    return {key: value for key, value in service.items() if value not in ([], {"requests": {}, "limits": {}})}


DURATIONS = st.sampled_from(["1s", "500ms", "2m", "1h30m", "10"])


@st.composite
def _healthchecks(draw: Draw) -> Data:
    """One of exec, http and tcp, with some of the timing fields."""
    kind = draw(st.sampled_from(["exec", "http", "tcp"]))
    check: Data
    if kind == "exec":
        check = {"exec": {"command": draw(st.lists(TEXT.filter(bool), min_size=1, max_size=2))}}
    elif kind == "http":
        check = {"http": {"port": draw(st.integers(1, 65535))}}
        _maybe(draw, check["http"], "path", TEXT.map(lambda t: "/" + t))
        _maybe(draw, check["http"], "expectedStatus", st.sampled_from(["200", "200-399", "204-204", "100-599"]))
    else:
        check = {"tcp": {"port": draw(st.integers(1, 65535))}}
    for key in ("interval", "timeout", "startPeriod"):
        _maybe(draw, check, key, DURATIONS)
    _maybe(draw, check, "retries", st.integers(0, 10))
    return check


def _depends_on(draw: Draw, services: list[Data]) -> None:
    """Give some services dependencies on earlier ones (never a cycle), with a condition each target allows."""
    for i, service in enumerate(services[1:], start=1):
        targets = draw(st.lists(st.sampled_from(services[:i]), max_size=2, unique_by=lambda t: t["name"]))
        deps = []
        for target in targets:
            allowed = ["", "started"] + (["healthy"] if "healthcheck" in target else [])
            if target.get("restartPolicy") in ("OnFailure", "Never"):
                allowed.append("completed")
            dep: Data = {"service": target["name"]}
            _maybe(draw, dep, "condition", st.sampled_from(allowed))
            deps.append(dep)
        if deps:
            service["dependsOn"] = deps


@st.composite
def _tolerations(draw: Draw) -> Data:
    if draw(st.booleans()):
        toleration: Data = {"operator": "Exists"}
        _maybe(draw, toleration, "key", LABEL_KEYS)
    else:
        toleration = {"key": draw(LABEL_KEYS), "value": draw(LABEL_VALUES)}
    _maybe(draw, toleration, "effect", st.sampled_from(EFFECTS))
    if toleration.get("effect") == "NoExecute":
        _maybe(draw, toleration, "tolerationSeconds", st.integers(0, 86400))
    return toleration


@st.composite
def _metadata(draw: Draw, names: st.SearchStrategy[str]) -> Data:
    metadata: Data = {"name": draw(names)}
    _maybe(draw, metadata, "labels", LABELS)
    _maybe(draw, metadata, "annotations", st.dictionaries(LABEL_KEYS, TEXT, max_size=3))
    _maybe(draw, metadata, "finalizers", st.lists(LABEL_KEYS, max_size=2))
    return metadata


@st.composite
def valid_projects(draw: Draw) -> Data:
    volumes = draw(st.lists(dns_labels(max_size=20), max_size=3, unique=True))
    names = draw(st.lists(dns_labels(), min_size=1, max_size=3, unique=True))
    host_ports = draw(st.lists(st.integers(1, 65535), max_size=6, unique=True))
    spec: Data = {"services": [draw(_service(n, volumes, host_ports)) for n in names]}
    _depends_on(draw, spec["services"])
    if volumes:
        types = st.sampled_from([{}, {"type": "Ephemeral"}, {"type": "Persistent"}])
        spec["volumes"] = [{"name": v, **draw(types)} for v in volumes]
    routes = draw(st.lists(TEXT.filter(bool), max_size=2, unique=True))
    if routes:
        spec["ingress"] = [
            {"name": r, "target": {"service": draw(st.sampled_from(names)), "port": draw(st.integers(1, 65535))}}
            for r in routes
        ]
        for route in spec["ingress"]:
            _maybe(draw, route, "host", dns_subdomains())
            _maybe(draw, route, "access", st.sampled_from([{"scope": "Internal"}, {"scope": "Public"}]))
    _maybe(draw, spec, "nodeSelector", LABELS)
    _maybe(draw, spec, "tolerations", st.lists(_tolerations(), max_size=2))
    _maybe(draw, spec, "priority", st.integers(-(2**31), 2**31 - 1))
    _maybe(draw, spec, "expireAt", TIMESTAMPS)
    return {"apiVersion": v1.API_VERSION, "kind": "Project", "metadata": draw(_metadata(dns_labels())), "spec": spec}


@st.composite
def valid_nodes(draw: Draw) -> Data:
    spec: Data = {}
    _maybe(draw, spec, "hostname", TEXT)
    _maybe(draw, spec, "unschedulable", st.booleans())
    taints = draw(st.lists(st.tuples(LABEL_KEYS, st.sampled_from(EFFECTS)), max_size=3, unique=True))
    if taints:
        spec["taints"] = [{"key": k, "value": draw(LABEL_VALUES), "effect": e} for k, e in taints]
    return {"apiVersion": v1.API_VERSION, "kind": "Node", "metadata": draw(_metadata(dns_subdomains())), "spec": spec}
