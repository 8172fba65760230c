"""Hostile and boundary input is refused cleanly, naming the offending field, before etcd sees it.

Each test checks one protection against a real etcd and a real apiserver (one for the module): object and message
size limits, nesting and alias bombs in manifests, huge maps and values, undecodable strings on the wire, names
at their length limits, unknown resources and kind mismatches, and error replies small enough to reach a client.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.errors import FieldViolation, Invalid, NotFound, ResourceExhausted
from caravanserai.testing.apiserver import RunningApiServer, apiserver
from caravanserai.testing.builders import node, project
from caravanserai.testing.etcd import EtcdServer
from caravanserai.text.manifest import dump_yaml, load_manifests

MIB = 1024 * 1024
HEADER = "apiVersion: caravanserai/v1\nkind: Project\nmetadata: {name: web}\n"


@pytest.fixture(scope="module")
async def api(etcd: EtcdServer) -> AsyncIterator[RunningApiServer]:
    async with apiserver(etcd.endpoint) as running:
        yield running


@pytest.fixture
async def client(api: RunningApiServer) -> AsyncIterator[Client]:
    async with Client(api.address, timeout=20, retry_timeout=2) as c:
        yield c


@pytest.fixture
async def channel(api: RunningApiServer) -> AsyncIterator[grpc.aio.Channel]:
    """A raw channel, for bodies no client would send."""
    async with grpc.aio.insecure_channel(api.address, options=[("grpc.max_send_message_length", 8 * MIB)]) as ch:
        yield ch


async def etcd_revision(api: RunningApiServer) -> int:
    """The etcd revision under the apiserver's store: unchanged means nothing was written."""
    return await api.server.service._store.current_revision()  # type: ignore[union-attr]  # the server is started: service is set


def fields(err: Invalid) -> list[str]:
    return [v.field for v in err.violations]


def bad_request_fields(exc: grpc.aio.AioRpcError) -> list[str]:
    found: list[str] = []
    for key, value in exc.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                bad = error_details_pb2.BadRequest()
                if detail.Unpack(bad):
                    found.extend(v.field for v in bad.field_violations)
    return found


async def raw_call(channel: grpc.aio.Channel, method: str, body: bytes) -> grpc.aio.AioRpcError:
    """Send `body` to `method`; the error it must end with (a Watch is read until it ends)."""
    path = f"/caravanserai.v1.Resources/{method}"
    with pytest.raises(grpc.aio.AioRpcError) as info:
        if method == "Watch":
            watch: Any = channel.unary_stream(path)  # bytes in, bytes out
            async for _ in watch(body, timeout=5):
                pass
        else:
            call: Any = channel.unary_unary(path)
            await call(body, timeout=5)
    return info.value


# ---- sizes ----------------------------------------------------------------------------------------------------


def with_args(name: str, *, count: int, size: int) -> v1.Project:
    """A valid project whose service has `count` arguments of `size` characters (each under the 64 KiB limit)."""
    obj = project(name)
    obj.spec.services[0].args.extend([str(i % 10) * size for i in range(count)])
    return obj


async def test_objects_over_1_mib_are_refused_naming_object_before_etcd_sees_them(
    client: Client, api: RunningApiServer
) -> None:
    small = await client.projects.create(project("grows"))
    before = await etcd_revision(api)

    with pytest.raises(Invalid) as created:
        await client.projects.create(with_args("too-big", count=20, size=60_000))
    grown = with_args("grows", count=20, size=60_000)
    grown.metadata.resource_version = small.metadata.resource_version
    with pytest.raises(Invalid) as updated:
        await client.projects.update(grown)
    status = meta.copy(small)
    for i in range(20):
        status.status.conditions.add(type=f"Custom{i}", status=v1.TRUE, message="m" * 60_000)
    with pytest.raises(Invalid) as status_updated:
        await client.projects.update_status(status)

    for err in (created, updated, status_updated):
        assert fields(err.value) == ["object"] and "at most 1048576 allowed" in str(err.value)
    assert await etcd_revision(api) == before
    with pytest.raises(NotFound):
        await client.projects.get("too-big")
    assert await client.projects.get("grows") == small


async def test_messages_over_3_mib_are_refused_by_grpc_and_the_server_keeps_serving(
    client: Client, api: RunningApiServer
) -> None:
    before = await etcd_revision(api)
    with pytest.raises(ResourceExhausted) as info:
        await client.projects.create(with_args("huge-message", count=60, size=60_000))  # 3.6 MB
    assert "larger than max" in str(info.value)
    assert await etcd_revision(api) == before
    assert (await client.projects.create(project("after-huge"))).metadata.name == "after-huge"


async def test_huge_maps_and_values_are_refused_with_the_field_path(client: Client, api: RunningApiServer) -> None:
    many = project("many-labels", labels={f"label-{i}": "v" for i in range(10_000)})
    long_value = project("long-label", labels={"big": "v" * 100_000})
    big_annotations = project("big-annotations")
    big_annotations.metadata.annotations["notes"] = "n" * (300 * 1024)
    big_image = project("big-image", image="i" * (100 * 1024))
    labels = "".join(f"    l{i}: v\n" for i in range(10_000))
    manifest = (
        f"apiVersion: caravanserai/v1\nkind: Project\nmetadata:\n  name: from-manifest\n  labels:\n{labels}"
        "spec: {services: [{name: a, image: i}]}\n"
    )
    before = await etcd_revision(api)

    expected = [
        (many, "metadata.labels"),
        (long_value, 'metadata.labels["big"]'),
        (big_annotations, "metadata.annotations"),
        (big_image, "spec.services[0].image"),
    ]
    [loaded] = load_manifests(manifest, source="labels.yaml")
    for obj, path in [*expected, (loaded, "metadata.labels")]:
        with pytest.raises(Invalid) as info:
            await client.projects.create(obj)
        assert path in fields(info.value), (path, info.value.violations)
    assert await etcd_revision(api) == before


async def test_a_refusal_naming_thousands_of_fields_still_reaches_the_client(client: Client) -> None:
    # Regression: every violation went into the reply, whose metadata then exceeded the client's limit (8-16 KiB):
    # the client saw RESOURCE_EXHAUSTED "metadata size exceeds ..." and no field at all.
    hostile = project("bad-labels", labels={f"Bad Key {i}": "v" for i in range(10_000)})
    with pytest.raises(Invalid) as info:
        await client.projects.create(hostile)
    named = fields(info.value)
    assert all(f.startswith('metadata.labels["Bad Key ') for f in named[:-1]) and len(named) > 5
    found = 10_001  # each key, and the size of the map
    assert info.value.violations[-1] == FieldViolation("(more)", f"{found - (len(named) - 1)} further violations")
    assert len(info.value.message.encode()) <= 1024


async def test_long_names_and_versions_are_not_echoed_into_oversized_replies(client: Client) -> None:
    # Regression: NotFound repeated a 1 MB name, and an invalid watch version its 5000 digits, in the reply.
    with pytest.raises(NotFound):
        await client.projects.get("x" * MIB)
    with pytest.raises(Invalid) as info:
        async for _ in client.projects.watch(resource_version="9" * 5000):
            pass
    assert fields(info.value) == ["resourceVersion"]


# ---- manifests: nesting and aliases ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "deep",
    [
        "[" * 10_000 + "]" * 10_000,
        "{a: " * 10_000 + "1" + "}" * 10_000,
        "\n" + "- " * 10_000 + "x",
        '{"a": ' * 10_000 + "1" + "}" * 10_000,
    ],
    ids=["flow-sequences", "flow-mappings", "block-sequences", "json"],
)
def test_deeply_nested_yaml_is_refused_quickly(deep: str) -> None:
    started = time.monotonic()
    with pytest.raises(Invalid) as info:
        load_manifests(HEADER + "spec: " + deep + "\n", source="deep.yaml")
    # A parser that recursed or backtracked would take minutes here; the bound is loose so that a loaded
    # machine does not fail it (speed itself is measured in bench/, not here).
    assert time.monotonic() - started < 15
    assert str(info.value).startswith("deep.yaml, document 1: line ")
    assert "maximum depth of data structure exceeded" in str(info.value)


def laughs(levels: int) -> str:
    """The billion laughs: each level is ten uses of the one below."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def test_alias_bombs_are_refused_quickly() -> None:
    service = "svc: &svc {name: a, image: i, args: *strings}\n"
    strings = "strings: &strings [" + ", ".join(["x"] * 1000) + "]\n"
    services = ", ".join(["*svc"] * 1000)
    through_schema = HEADER + "x-" + strings + "x-" + service + "spec: {services: [" + services + "]}\n"
    in_unknown_field = HEADER + laughs(9) + "spec: {services: [{name: a, image: i, args: *l9}]}\n"
    cases = [(through_schema, "too large: more than 500000 values"), (in_unknown_field, "spec.services[0].args[0]")]
    for text, expected in cases:
        started = time.monotonic()
        with pytest.raises(Invalid) as info:
            load_manifests(text, source="bomb.yaml")
        assert time.monotonic() - started < 15  # loose: a loaded machine must not fail it; expansion takes hours
        assert expected in str(info.value)


def test_an_alias_bomb_spread_over_the_items_of_a_list_document_is_refused_quickly() -> None:
    # Regression: the value budget applied to each item of a list document on its own, so every alias of one
    # project of 400,000 values was expanded in full (about a second each: a 8 KB text with thousands of them
    # took hours and gigabytes).
    strings = "[" + ", ".join(["x"] * 400) + "]"
    first = (
        "- &p {apiVersion: caravanserai/v1, kind: Project, metadata: {name: x}, spec: {services: ["
        + ", ".join([f"{{name: a, image: i, args: &s {strings}}}"] + ["{name: a, image: i, args: *s}"] * 999)
        + "]}}\n"
    )
    text = first + "- *p\n" * 10
    started = time.monotonic()
    with pytest.raises(Invalid) as info:
        load_manifests(text, source="items.yaml")
    assert time.monotonic() - started < 15  # loose: a loaded machine must not fail it; expansion takes hours
    assert (
        str(info.value)
        == "items.yaml, document 1, line 1: too large: more than 500000 values (an alias counts each use)"
    )


# ---- manifests: values the loader used to crash on -----------------------------------------------------------


def test_manifest_values_that_used_to_crash_the_loader_are_refused_with_a_place() -> None:
    cases = [
        # Python refuses to convert integers of more than 4300 digits (ValueError escaped the loader).
        (HEADER + "spec: {priority: " + "9" * 5000 + "}\n", "", 'line 4, column 18: invalid YAML: cannot read "999'),
        # ruamel's constructors raise plain Python errors on malformed tagged values and on unhashable keys.
        (HEADER + "spec: {priority: !!int 0x}\n", "", "invalid YAML: cannot construct a value"),
        (HEADER + "spec: {priority: !!float abc}\n", "", "invalid YAML: cannot construct a value"),
        (HEADER + "spec: {priority: !!bool maybe}\n", "", "invalid YAML: cannot construct a value"),
        (HEADER + "spec: {[{a: 1}]: 2}\n", "", "invalid YAML: cannot construct a value: unhashable type"),
        (HEADER + "spec: !!set x\n", "", "invalid YAML: cannot construct a value"),
        # In UTC this is before year 1 (OverflowError escaped the loader).
        (
            HEADER + "spec: {expireAt: 0001-01-01 00:00:00+05:00, services: [{name: a, image: i}]}\n",
            "spec.expireAt",
            "expected an RFC 3339 time",
        ),
        (
            HEADER + "spec: {expireAt: 9999-12-31 23:00:00-05:00, services: [{name: a, image: i}]}\n",
            "spec.expireAt",
            "expected an RFC 3339 time",
        ),
        # JSON escapes can make unpaired surrogates, which protobuf refuses (the path was lost).
        (
            '{"apiVersion": "caravanserai/v1", "kind": "Project", '
            '"metadata": {"name": "a", "labels": {"k": "\\ud800"}}}',
            'metadata.labels["k"]',
            "must be valid Unicode text",
        ),
        (
            '{"apiVersion": "caravanserai/v1", "kind": "Project", "metadata": {"name": "\\udfff"}}',
            "metadata.name",
            "must be valid Unicode text",
        ),
    ]
    for text, path, problem in cases:
        with pytest.raises(Invalid) as info:
            load_manifests(text, source="crash.yaml")
        assert any(v.field == path and problem in v.description for v in info.value.violations), info.value
        str(info.value).encode()  # printable


def test_a_next_line_character_is_refused_instead_of_becoming_a_space() -> None:
    # Regression: the YAML reader takes U+0085 for a line break even inside quotes, so valid JSON holding it was
    # loaded with a space in its place.
    text = (
        '{"apiVersion": "caravanserai/v1", "kind": "Project", "metadata": {"name": "a", "annotations": '
        '{"note": "one\x85two"}}, "spec": {"services": [{"name": "a", "image": "i"}]}}'
    )
    with pytest.raises(Invalid) as info:
        load_manifests(text, source="nel.json")
    assert str(info.value).startswith("nel.json, document 1: line 1, column 108: invalid YAML: U+0085")
    [escaped] = load_manifests(text.replace("\x85", "\\u0085"))
    assert escaped.metadata.annotations["note"] == "one\x85two"
    assert load_manifests(dump_yaml([escaped])) == [escaped]  # written as "one\Ntwo", so it loads back


async def test_an_invalid_host_ip_is_reported_at_the_manifest_field_host_ip(client: Client) -> None:
    # Regression: the path said "hostIP", a field manifests do not have (its JSON name is hostIp).
    [obj] = load_manifests(
        HEADER + "spec: {services: [{name: a, image: i, ports: [{containerPort: 80, hostIp: localhost}]}]}\n"
    )
    with pytest.raises(Invalid) as info:
        await client.projects.create(obj)
    assert fields(info.value) == ["spec.services[0].ports[0].hostIp"]


# ---- the wire -------------------------------------------------------------------------------------------------

UTF8_BREAKERS = [b"\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80"]  # never valid, overlong "/", encoded surrogate


@pytest.mark.parametrize("method", ["Create", "Get", "List", "Update", "UpdateStatus", "Delete", "Watch"])
async def test_non_utf8_strings_in_raw_requests_are_invalid_argument(
    channel: grpc.aio.Channel, api: RunningApiServer, method: str
) -> None:
    before = await etcd_revision(api)
    for bad in UTF8_BREAKERS:
        top_level = bytes([0x0A, len(bad)]) + bad  # field 1 (resource), length-delimited
        errors = [await raw_call(channel, method, top_level)]
        if method in ("Create", "Update", "UpdateStatus"):
            placeholder = "Q" * len(bad)
            body = v1.CreateRequest(resource="projects", object=meta.wrap(project(placeholder))).SerializeToString()
            errors.append(await raw_call(channel, method, body.replace(placeholder.encode(), bad)))
        for exc in errors:
            assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, exc
            assert bad_request_fields(exc) == ["body"]
    assert await etcd_revision(api) == before


# ---- names, resources, kinds ----------------------------------------------------------------------------------


async def test_names_at_the_limits_are_accepted_and_one_beyond_refused(client: Client, api: RunningApiServer) -> None:
    longest_project = "p" * 63
    longest_node = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])
    assert len(longest_node) == 253
    assert (await client.projects.create(project(longest_project))).metadata.name == longest_project
    assert (await client.nodes.create(node(longest_node))).metadata.name == longest_node
    await client.projects.get(longest_project)
    await client.nodes.get(longest_node)

    before = await etcd_revision(api)
    refused = [
        project("p" * 64),
        project(""),
        project("Upper"),
        node(longest_node + "e"),
        node("a" * 64 + ".b"),
        node(""),
        node("a..b"),
    ]
    for obj in refused:
        with pytest.raises(Invalid) as info:
            await client.resource(meta.kind_of(obj).plural).create(obj)
        assert fields(info.value)[0] == "metadata.name", (obj.metadata.name, info.value)
    assert await etcd_revision(api) == before


async def test_empty_and_path_like_names_in_requests_name_the_field(client: Client) -> None:
    # Regression: the store refused these with a bare INVALID_ARGUMENT that named no field.
    # A name with one slash is a key ("namespace/name"); one with more names a namespace that cannot be one.
    for name, field in [("", "name"), ("..", "name"), (".", "name"), ("a/b/c", "namespace")]:
        for call in (client.projects.get(name), client.projects.delete(name)):
            with pytest.raises(Invalid) as info:
                await call
            assert fields(info.value) == [field], name
    for name in ["", "a/b", "..", "."]:
        stale = project("whatever")
        stale.metadata.name, stale.metadata.resource_version = name, "5"
        for write in (client.projects.update(stale), client.projects.update_status(stale)):
            with pytest.raises(Invalid) as info:
                await write
            assert fields(info.value) == ["metadata.name"], name


@pytest.mark.parametrize("method", ["Create", "Get", "List", "Update", "UpdateStatus", "Delete", "Watch"])
async def test_an_unknown_resource_is_refused_naming_resource(channel: grpc.aio.Channel, method: str) -> None:
    body = {
        "Create": v1.CreateRequest(resource="pods", object=meta.wrap(project("web"))),
        "Update": v1.UpdateRequest(resource="pods", object=meta.wrap(project("web"))),
        "UpdateStatus": v1.UpdateRequest(resource="pods", object=meta.wrap(project("web"))),
        "Get": v1.GetRequest(resource="pods", name="web"),
        "Delete": v1.DeleteRequest(resource="pods", name="web"),
        "List": v1.ListRequest(resource="pods"),
        "Watch": v1.WatchRequest(resource="pods"),
    }[method].SerializeToString()
    exc = await raw_call(channel, method, body)
    assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request_fields(exc) == ["resource"]
    assert "unknown resource 'pods'" in (exc.details() or "")


async def test_a_kind_mismatch_is_refused_naming_kind(channel: grpc.aio.Channel, api: RunningApiServer) -> None:
    labelled_node = project("looks-fine")
    labelled_node.kind = "Node"
    bodies = [
        v1.CreateRequest(resource="projects", object=meta.wrap(node("a-node"))),  # a node in a projects request
        v1.CreateRequest(resource="nodes", object=meta.wrap(project("a-project"))),
        v1.CreateRequest(resource="projects", object=meta.wrap(labelled_node)),  # a project calling itself a Node
        v1.CreateRequest(resource="projects"),  # no object at all
    ]
    before = await etcd_revision(api)
    for body in bodies:
        exc = await raw_call(channel, "Create", body.SerializeToString())
        assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert bad_request_fields(exc) == ["kind"], body
    assert await etcd_revision(api) == before


async def test_forged_continue_tokens_are_refused_naming_continue(client: Client) -> None:
    # Regression: a revision beyond int64 was INTERNAL, one etcd has not reached a bare INVALID_ARGUMENT, and
    # a name with an unpaired surrogate INTERNAL.
    import base64

    def token(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).decode()

    forged = [
        token(b'{"rv": 1000000000000000000000000000000, "after": ""}'),
        token(b'{"rv": 999999999, "after": ""}'),
        token(b'{"rv": 1, "after": "\\ud800"}'),
        token(b'{"rv": -1, "after": ""}'),
        token(b"[1]"),
        "%%%",
    ]
    for continue_token in forged:
        with pytest.raises(Invalid) as info:
            await client.projects.list(continue_token=continue_token)
        assert fields(info.value) == ["continue"], continue_token
