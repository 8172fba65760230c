"""Property-based fuzzing of the API surface against a real etcd and a real apiserver.

* **Manifests** (`strategies.manifest_cases`): valid and mutated Project and Node manifests, written as YAML or
  JSON, go through `load_manifests` and `create`. Every valid one is loaded and stored exactly as written; every
  mutated one is refused with `Invalid` naming a mutated field; nothing else ever happens. Arbitrary and damaged
  manifest text is refused with a located error or, when it still parses, handled like any manifest.
* **Raw requests** (`request_strategies.request_batches`): random, formed and mutated bodies on a raw gRPC channel
  to every method. The answer is OK or one of the expected codes, never INTERNAL, UNKNOWN or a transport failure;
  INVALID_ARGUMENT carries a BadRequest naming fields; the server keeps serving.
* After each run every key under the apiserver's prefix decodes and passes `validate_object` and
  `validate_status`: no half-valid object was stored.

Counts of inputs tried, refused and accepted are printed to the run log; together the tests try more than 7,000
per run (800 manifests, 800 manifest texts, 5,760 raw requests). There is no fixed seed: every run draws new inputs,
so the inputs tried add up over the runs (`--hypothesis-seed=N` repeats a run's draws). The counts were 1,200
manifests and 8,640 raw requests until the suite outgrew its time budget; the generators are unchanged.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import difflib
import io
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import strategies as st
from mutations import ManifestCase, manifest_cases
from request_strategies import REQUEST_TYPES, SEEDS, RawRequest, request_batches
from ruamel.yaml import YAML
from ruamel.yaml.representer import RoundTripRepresenter

from caravanserai import meta
from caravanserai.apiserver.kinds import validate_object, validate_status
from caravanserai.apiserver.kinds.rbacdefaults import AUTOUPDATE, v1
from caravanserai.client import Client
from caravanserai.errors import AlreadyExists, Invalid, NotFound
from caravanserai.storage import EtcdClient
from caravanserai.storage.etcd_types import prefix_end
from caravanserai.testing.apiserver import RunningApiServer, apiserver
from caravanserai.testing.builders import lease, node, project
from caravanserai.testing.etcd import EtcdServer
from caravanserai.text.manifest import load_manifests

MANIFEST_BATCH, MANIFEST_EXAMPLES = 8, 100  # 800 manifests
TEXT_BATCH, TEXT_EXAMPLES = 20, 40  # 800 manifest texts
REQUEST_BATCH, REQUEST_EXAMPLES = 96, 60  # 5,760 raw requests
MINIMUM_TOTAL = 7_000
WATCH_WINDOW = 0.15  # a Watch that neither fails nor sends within this is open, as it should be
FUZZ = settings(
    deadline=None,
    database=None,
    # No shrinking and no printed batch: every failure names its input, shrinking batches against a server takes
    # minutes, and a printed batch can run to megabytes.
    phases=[Phase.explicit, Phase.generate],
    verbosity=Verbosity.quiet,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
        HealthCheck.large_base_example,
    ],
)
EXPECTED_CODES = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.OUT_OF_RANGE,
}
RESPONSE_TYPES = {
    "Create": v1.Object,
    "Get": v1.Object,
    "Update": v1.Object,
    "UpdateStatus": v1.Object,
    "Delete": v1.DeleteResponse,
    "List": v1.ListResponse,
}
TRIED: collections.Counter[str] = collections.Counter()  # inputs tried per test, for the total


@pytest.fixture
async def api(etcd: EtcdServer) -> AsyncIterator[RunningApiServer]:
    """One apiserver per fuzz test, under its own prefix, so each test knows everything that was stored."""
    async with apiserver(etcd.endpoint) as running:
        yield running


@pytest.fixture
async def client(api: RunningApiServer) -> AsyncIterator[Client]:
    async with Client(api.address, timeout=20, retry_timeout=5) as c:
        yield c


async def run_examples(
    strategy: st.SearchStrategy[Any], examples: int, batch: Callable[[Any], Coroutine[Any, Any, None]]
) -> None:
    """Run `batch` on `examples` values drawn from `strategy`.

    Hypothesis drives the examples from a worker thread; each batch runs as a coroutine on the test's event loop
    (where the apiserver, the channel and the client live), and its failure fails the test with that example.
    """
    loop = asyncio.get_running_loop()

    def examples_in_thread() -> None:
        @settings(FUZZ, max_examples=examples)
        @given(strategy)
        def fuzz(value: Any) -> None:
            asyncio.run_coroutine_threadsafe(batch(value), loop).result()

        fuzz()

    await asyncio.to_thread(examples_in_thread)


def report(capsys: pytest.CaptureFixture[str], line: str) -> None:
    """Write `line` to the run log even while pytest captures output."""
    with capsys.disabled():
        print(f"\n[fuzz] {line}")


async def stored_objects(etcd_client: EtcdClient, prefix: str) -> dict[tuple[str, str], Any]:
    """Every key under the apiserver's prefix, decoded; fails on any key or value that is not a valid object."""
    start = prefix.encode() + b"/"
    result = await etcd_client.range(start, prefix_end(start))
    objects: dict[tuple[str, str], Any] = {}
    for kv in result.kvs:
        resource, _, key = kv.key[len(start) :].decode().partition("/")
        assert resource in meta.KINDS, f"unexpected key {kv.key!r}"
        obj = meta.KINDS[resource].cls.FromString(kv.value)
        assert meta.key_of(obj) == key, f"{kv.key!r} holds {meta.key_of(obj)!r}"
        validate_object(resource, obj)
        validate_status(resource, obj)
        if obj.metadata.annotations.get(AUTOUPDATE) or (resource, key) == ("namespaces", meta.DEFAULT_NAMESPACE):
            continue  # what every apiserver keeps: the default namespace, the built-in roles
        objects[(resource, key)] = obj
    return objects


def stored_key(obj: Any) -> tuple[str, str]:
    """(plural, key) under which the apiserver stores `obj`: a namespaced object that names no namespace lives in
    `default`. Two objects of one name in two namespaces are two objects."""
    kind = meta.kind_of(obj)
    namespace = "" if kind.cluster_scoped else (obj.metadata.namespace or meta.DEFAULT_NAMESPACE)
    return kind.plural, meta.join_key(namespace, obj.metadata.name)


# ---- manifests ------------------------------------------------------------------------------------------------

# Characters JSON text may hold raw but a YAML reader refuses (DEL, C1 controls including U+0085, which YAML
# readers take for a line break, non-characters, and unpaired surrogates, which only an escape can express): they
# are written as escapes, which both read.
_NOT_IN_YAML = re.compile("[\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


class _Representer(RoundTripRepresenter):
    """As `caravanserai.text.manifest.dump_yaml` writes strings: double-quoted when they hold U+0085."""


_Representer.add_representer(
    str, lambda r, data: r.represent_scalar("tag:yaml.org,2002:str", data, style='"' if "\x85" in data else None)
)


def render(case: ManifestCase) -> str:
    """The manifest text: YAML written like `caravanserai.text.manifest.dump_yaml` (`caractrl get -o yaml`), or JSON."""
    if case.format == "json":
        text = json.dumps(case.data, ensure_ascii=False)
        return _NOT_IN_YAML.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    yaml = YAML(typ="rt")
    yaml.Representer = _Representer
    yaml.default_flow_style = False
    yaml.width = 4096
    out = io.StringIO()
    yaml.dump(case.data, out)
    return out.getvalue()


def load(text: str, source: str) -> list[Any]:
    """`load_manifests`, with any exception other than `Invalid` turned into a failure that shows the text."""
    try:
        return load_manifests(text, source=source)
    except Invalid:
        raise
    except Exception as exc:
        raise AssertionError(f"load_manifests raised {exc!r} on {text[:1000]!r}") from exc


def names_a_path(err: Invalid, paths: list[str]) -> bool:
    """Whether a violation of `err` is at one of `paths` or inside it."""
    return any(v.field == p or v.field.startswith((p + ".", p + "[")) for v in err.violations for p in paths)


def spec_diff(accepted: Any, stored: Any) -> str:
    """The lines in which `stored` differs from `accepted` (text format, one field per line)."""
    return "\n".join(
        difflib.unified_diff(str(accepted).splitlines(), str(stored).splitlines(), "accepted", "stored", lineterm="")
    )


@dataclass
class ManifestRun:
    """What a manifest fuzz run did: per-name locks, the objects accepted, and the tallies."""

    client: Client
    accepted: dict[tuple[str, str], Any] = field(default_factory=dict)
    locks: collections.defaultdict[tuple[str, str], asyncio.Lock] = field(
        default_factory=lambda: collections.defaultdict(asyncio.Lock)
    )
    tally: collections.Counter[str] = field(default_factory=collections.Counter)

    async def create(self, obj: Any, *, replace: bool) -> None:
        """Create `obj`; with `replace`, first remove an object of that name this run accepted earlier."""
        key = stored_key(obj)
        resource = self.client.resource(key[0])
        async with self.locks[key]:
            if replace and key in self.accepted:
                await resource.delete(key[1], force=True)
                del self.accepted[key]
            await resource.create(obj)
            self.accepted[key] = obj

    async def submit(self, case: ManifestCase, number: int) -> None:
        self.tally["tried"] += 1
        text = render(case)
        try:
            [obj] = load(text, f"case-{number}.{case.format}")
            if case.valid:
                assert obj == json_format.ParseDict(case.data, case.cls()), f"loaded differently:\n{text[:2000]}"
            await self.create(obj, replace=case.valid)
        except Invalid as err:
            assert not case.valid, f"a valid manifest was refused: {err}\n{text[:2000]}"
            assert names_a_path(err, case.paths), f"refusal names none of {case.paths}: {err.violations}"
            self.tally["refused"] += 1
            return
        assert case.valid, f"accepted a manifest broken at {case.paths}:\n{text[:2000]}"
        self.tally["accepted"] += 1

    async def submit_text(self, text: str, number: int) -> None:
        """Arbitrary text: a located refusal, or objects handled like any manifest's."""
        self.tally["tried"] += 1
        source = f"text-{number}.yaml"
        started = time.monotonic()
        try:
            objects = load(text, source)
        except Invalid as err:
            assert str(err).startswith(source) and all(v.description for v in err.violations), str(err)
            self.tally["refused"] += 1
            return
        finally:
            assert time.monotonic() - started < 5, "loading took more than 5 s"
        if not objects:
            self.tally["empty"] += 1
        for obj in objects:
            try:
                await self.create(obj, replace=False)
                self.tally["accepted"] += 1
            except Invalid as err:
                assert err.violations and all(v.field for v in err.violations), str(err)
                self.tally["refused"] += 1
            except AlreadyExists:
                assert stored_key(obj) in self.accepted
                self.tally["refused"] += 1

    async def assert_stored_as_accepted(self, etcd_client: EtcdClient, prefix: str) -> None:
        stored = await stored_objects(etcd_client, prefix)
        assert set(stored) == set(self.accepted)
        for key, obj in self.accepted.items():
            if stored[key].spec != obj.spec:
                pytest.fail(f"{key}: stored differently\n{spec_diff(obj.spec, stored[key].spec)}")
            assert stored[key].metadata.labels == obj.metadata.labels, key
            assert stored[key].metadata.annotations == obj.metadata.annotations, key


async def test_manifests_valid_stored_invalid_refused_with_a_path(
    client: Client, api: RunningApiServer, etcd_client: EtcdClient, capsys: pytest.CaptureFixture[str]
) -> None:
    run = ManifestRun(client)
    numbers = iter(range(10**9))

    async def batch(cases: list[ManifestCase]) -> None:
        await asyncio.gather(*(run.submit(case, next(numbers)) for case in cases))

    started = time.monotonic()
    cases = st.lists(manifest_cases(), min_size=MANIFEST_BATCH, max_size=MANIFEST_BATCH, unique_by=ManifestCase.key)
    await run_examples(cases, MANIFEST_EXAMPLES, batch)
    await run.assert_stored_as_accepted(etcd_client, api.prefix)
    TRIED["manifests"] = run.tally["tried"]
    report(
        capsys,
        f"manifests: tried {run.tally['tried']}, refused {run.tally['refused']}, "
        f"accepted {run.tally['accepted']} in {time.monotonic() - started:.1f}s",
    )
    assert run.tally["tried"] >= MANIFEST_BATCH * MANIFEST_EXAMPLES
    assert run.tally["refused"] > run.tally["tried"] // 3 and run.tally["accepted"] > run.tally["tried"] // 5


YAML_PIECES = [
    "!!int ",
    "!!float ",
    "!!bool ",
    "!!str ",
    "!!binary ",
    "!!timestamp ",
    "!!set ",
    "!!omap ",
    "!!pairs ",
    "!!map ",
    "!!seq ",
    "!!null ",
    "!foo ",
    "&a ",
    "*a ",
    "<<: ",
    "? ",
    "[",
    "]",
    "{",
    "}",
    ": ",
    ", ",
    "- ",
    "|\n",
    ">-\n",
    "'",
    '"',
    "\\",
    "#",
    "\n---\n",
    "\n...\n",
    "%YAML 1.1\n---\n",
    "\t",
    "\n",
    "  ",
    "0x",
    "1e999",
    "-.inf",
    ".nan",
    "~",
    "null",
    "true",
    "9" * 5000,
    "\\ud800",
]


@st.composite
def manifest_texts(draw: Any) -> str:
    """Arbitrary text, or a manifest's text cut, spliced or sprinkled with characters and pieces of YAML syntax."""
    if draw(st.booleans()):
        return str(draw(st.one_of(st.text(), st.binary().map(lambda b: b.decode("utf-8", "replace")))))
    text = render(draw(manifest_cases()))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        edit = draw(st.sampled_from(["cut", "insert", "yaml", "delete", "swap"]))
        if edit == "cut":
            text = text[:at]
        elif edit == "insert":
            text = text[:at] + draw(st.text(min_size=1, max_size=4)) + text[at:]
        elif edit == "yaml":
            text = text[:at] + draw(st.sampled_from(YAML_PIECES)) + text[at:]
        elif edit == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 10)) :]
        else:
            text = text[at:] + text[:at]
    return text


async def test_manifest_text_junk_is_refused_with_a_location(
    client: Client, api: RunningApiServer, etcd_client: EtcdClient, capsys: pytest.CaptureFixture[str]
) -> None:
    run = ManifestRun(client)
    numbers = iter(range(10**9))

    async def batch(texts: list[str]) -> None:
        await asyncio.gather(*(run.submit_text(text, next(numbers)) for text in texts))

    texts = st.lists(manifest_texts(), min_size=TEXT_BATCH, max_size=TEXT_BATCH, unique=True)
    await run_examples(texts, TEXT_EXAMPLES, batch)
    await run.assert_stored_as_accepted(etcd_client, api.prefix)
    TRIED["texts"] = run.tally["tried"]
    report(
        capsys,
        f"manifest texts: tried {run.tally['tried']}, refused {run.tally['refused']}, "
        f"accepted {run.tally['accepted']}, empty {run.tally['empty']}",
    )
    assert run.tally["tried"] >= TEXT_BATCH * TEXT_EXAMPLES and run.tally["refused"] > 0


# ---- raw requests ---------------------------------------------------------------------------------------------


async def seed(client: Client) -> None:
    """(Re)create the objects raw requests aim at: projects (one bound to a node), nodes, a lease, an event."""
    wanted: list[Any] = [project(n) for n in SEEDS["projects"]] + [node(n) for n in SEEDS["nodes"]]
    wanted += [lease(n) for n in SEEDS["leases"]]
    event = meta.with_type_meta(v1.Event())
    event.metadata.name = SEEDS["events"][0]
    event.spec.involved_object.kind, event.spec.involved_object.name = "Project", SEEDS["projects"][0]
    event.spec.type, event.spec.reason = "Normal", "Seeded"
    for obj in [*wanted, event]:
        with contextlib.suppress(AlreadyExists):
            await client.resource(meta.kind_of(obj).plural).create(obj)
    bound = await client.projects.get(SEEDS["projects"][1])
    if bound.status.phase == v1.PENDING:
        bound.status.phase, bound.status.node_ref = v1.SCHEDULED, SEEDS["nodes"][0]
        await client.projects.update_status(bound)


def bad_request_fields(trailers: Any) -> list[str]:
    """The field paths of the BadRequest detail in a call's trailing metadata."""
    fields: list[str] = []
    for key, value in trailers or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                bad = error_details_pb2.BadRequest()
                if detail.Unpack(bad):
                    fields.extend(v.field for v in bad.field_violations)
    return fields


@dataclass
class RequestRun:
    """Sends raw requests and checks each answer; counts outcomes by origin and code, requests by method, and the
    first field each INVALID_ARGUMENT names (indexes and keys left out), to show how deep the requests reach."""

    channel: grpc.aio.Channel
    client: Client
    outcomes: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    methods: collections.Counter[str] = field(default_factory=collections.Counter)
    named: collections.Counter[str] = field(default_factory=collections.Counter)

    async def body_of(self, request: RawRequest) -> bytes:
        """The bytes to send; for `current_version` requests, with the stored resource_version filled in."""
        message: Any = request.message
        if not request.current_version or message is None:
            return request.body
        message = type(message).FromString(request.body)
        try:
            target = meta.unwrap(message.object).metadata if request.method != "Delete" else message
            current = await self.client.resource(message.resource).get(target.name)
        except (KeyError, ValueError, Invalid, NotFound):  # an unknown resource, no object, no such name
            return request.body
        target.resource_version = current.metadata.resource_version
        return bytes(message.SerializeToString())

    async def send(self, request: RawRequest) -> None:
        path = f"/caravanserai.v1.Resources/{request.method}"
        body = await self.body_of(request)
        if request.method == "Watch":
            code, trailers = await self._watch(path, body)
        else:
            try:
                call: Any = self.channel.unary_unary(path)  # bytes in, bytes out
                answer = await call(body, timeout=20)
                RESPONSE_TYPES[request.method].FromString(answer)  # a well-formed answer
                code, trailers = grpc.StatusCode.OK, None
            except grpc.aio.AioRpcError as exc:
                code, trailers = exc.code(), exc.trailing_metadata()
                assert code in EXPECTED_CODES, f"{request.method} {body[:300]!r}: {code} {exc.details()}"
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            fields = bad_request_fields(trailers)
            assert fields and all(fields), f"{request.method} {body[:300]!r}: INVALID_ARGUMENT without field paths"
            self.named[re.sub(r"\[.*?\]", "[]", fields[0])] += 1
        self.outcomes[(request.origin, code.name)] += 1
        self.methods[request.method] += 1

    async def _watch(self, path: str, body: bytes) -> tuple[grpc.StatusCode, Any]:
        watch: Any = self.channel.unary_stream(path)  # bytes in, bytes out
        call = watch(body, timeout=WATCH_WINDOW)
        try:
            async for data in call:
                assert v1.WatchEvent.FromString(data).type in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK")
                break
            return grpc.StatusCode.OK, None
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                return grpc.StatusCode.OK, None  # still open: a valid watch waiting for changes
            assert exc.code() in EXPECTED_CODES, f"Watch {body[:300]!r}: {exc.code()} {exc.details()}"
            return exc.code(), exc.trailing_metadata()
        finally:
            call.cancel()


async def test_raw_requests_get_expected_codes_and_the_server_keeps_serving(
    client: Client, api: RunningApiServer, etcd_client: EtcdClient, capsys: pytest.CaptureFixture[str]
) -> None:
    channel = grpc.aio.insecure_channel(api.address)
    run = RequestRun(channel, client)
    await seed(client)

    async def batch(requests: list[RawRequest]) -> None:
        await seed(client)
        await asyncio.gather(*(run.send(request) for request in requests))

    started = time.monotonic()
    try:
        await run_examples(request_batches(REQUEST_BATCH), REQUEST_EXAMPLES, batch)
        health = health_pb2_grpc.HealthStub(channel)
        answer = await health.Check(health_pb2.HealthCheckRequest(service="caravanserai.v1.Resources"), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
        await client.projects.create(project("after-the-fuzz"))
        assert (await client.projects.get("after-the-fuzz")).status.phase == v1.PENDING
        assert not api.task.done()
    finally:
        await channel.close()
    await stored_objects(etcd_client, api.prefix)
    by_code = collections.Counter[str]()
    for (_, code), n in run.outcomes.items():
        by_code[code] += n
    tried = sum(by_code.values())
    TRIED["requests"] = tried
    report(
        capsys,
        f"raw requests: tried {tried}, refused {tried - by_code['OK']}, answered OK {by_code['OK']} in "
        f"{time.monotonic() - started:.1f}s; by code {dict(by_code)}; by method {dict(run.methods)}; "
        f"fields named first {dict(run.named.most_common(25))}",
    )
    assert tried >= REQUEST_BATCH * REQUEST_EXAMPLES
    assert set(run.methods) == set(REQUEST_TYPES)
    assert by_code["INVALID_ARGUMENT"] > 0 and by_code["OK"] > 0 and by_code["NOT_FOUND"] > 0


def test_fuzz_volume(capsys: pytest.CaptureFixture[str]) -> None:
    """Runs last in this module: the fuzz tests above tried at least `MINIMUM_TOTAL` inputs between them."""
    if len(TRIED) < 3:
        pytest.skip("only part of the fuzz module ran")
    report(capsys, f"fuzz total: {sum(TRIED.values())} inputs ({dict(TRIED)})")
    assert sum(TRIED.values()) >= MINIMUM_TOTAL
