"""Custom kinds: from protobuf messages to a ResourceDefinition, and from a ResourceDefinition back to classes.

    definition = definition_for(WebFarm, spec=WebFarmSpec, status=WebFarmStatus, group="example.com")
    schema = Schema.compile(definition.spec)     # message classes built from the definition's descriptors
    kind = kind_for_definition(definition)        # a meta.Kind (dynamic class) for generic code such as the CLI

A kind's names (kind, group, plural, short names, printer columns, node verbs) travel together as one `KindNames`
record: the keyword arguments of `definition_for`, `register` and `Client.define` build it once, and
`KindNames.of_spec` reads it back from a definition.

Conventions of a custom kind's object message (the same as built-in kinds): `api_version = 1`, `kind = 2`,
`metadata = 3` (caravanserai.v1.ObjectMeta), `spec = 4`, `status = 5`. A definition names only the spec and status
messages; the object message is derived from them, so every party builds the same wire format.

Guarantees:

* `Schema.compile` never raises anything but `SchemaError`, which names the definition field at fault
  (`spec.schema`, `spec.specMessage`, …); it uses a private descriptor pool, so definitions never collide.
* The schema of `definition_for` holds the files of the spec and status messages and every file they import,
  dependencies first (a FileDescriptorSet as `protoc --include_imports` writes it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FileDescriptor
from google.protobuf.message import DecodeError

from caravanserai import meta, v1
from caravanserai.api.v1 import resources_pb2

VERSION = "v1"
OBJECT_FIELDS = ("api_version", "kind", "metadata", "spec", "status")
_IDENT = re.compile(r"[^A-Za-z0-9_]")


class SchemaError(ValueError):
    """A definition's schema cannot be built: `field` is the definition field at fault (camelCase path)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def default_plural(kind: str) -> str:
    """The plural a kind gets unless told otherwise: lowercase kind + "s" ("WebFarm" → "webfarms")."""
    return kind.lower() + "s"


def definition_name(plural: str, group: str) -> str:
    """The name a definition must have: `<plural>.<group>`."""
    return f"{plural}.{group}"


SCOPE_NAMESPACED = "Namespaced"
SCOPE_CLUSTER = "Cluster"
SCOPES = (SCOPE_NAMESPACED, SCOPE_CLUSTER)
"""The values of a definition's `scope` (empty means Cluster)."""


@dataclass(frozen=True, slots=True)
class KindNames:
    """The names of a custom kind: what a ResourceDefinition's spec carries besides its schema, and what a custom
    `meta.Kind` holds besides its class. Built once (`of` from keyword arguments, `of_spec` from a definition)."""

    kind: str  # "WebFarm": the object message's name
    group: str  # "example.com": apiVersion is <group>/v1
    plural: str  # "webfarms": the resource name in requests and etcd keys
    short_names: tuple[str, ...] = ()  # further names `caractrl` accepts, e.g. ("wf",)
    printer_columns: tuple[tuple[str, str], ...] = ()  # (header, JSON path) extra columns of `caractrl get`
    node_verbs: tuple[str, ...] = ()  # the verbs node identities may use on the kind's objects
    namespaced: bool = False  # objects live in namespaces (definition scope "Namespaced"), else cluster-wide

    @classmethod
    def of(
        cls,
        kind: str | type[Any],
        *,
        group: str,
        plural: str = "",
        short_names: Sequence[str] = (),
        printer_columns: Sequence[tuple[str, str]] = (),
        node_verbs: Sequence[str] = (),
        namespaced: bool = False,
    ) -> KindNames:
        """The names as users give them: `kind` is the kind's name or the generated object class (named after its
        message); `plural` defaults to `default_plural(kind)`; sequences become tuples."""
        name = kind if isinstance(kind, str) else kind.DESCRIPTOR.name
        return cls(
            name,
            group,
            plural or default_plural(name),
            tuple(short_names),
            tuple(printer_columns),
            tuple(node_verbs),
            namespaced,
        )

    @classmethod
    def of_spec(cls, spec: v1.ResourceDefinitionSpec) -> KindNames:
        """The names a definition's spec carries."""
        columns = tuple((c.name, c.json_path) for c in spec.printer_columns)
        namespaced = spec.scope == SCOPE_NAMESPACED
        return cls(
            spec.kind, spec.group, spec.plural, tuple(spec.short_names), columns, tuple(spec.node_verbs), namespaced
        )

    @property
    def definition_name(self) -> str:
        """The name the kind's definition must have: `<plural>.<group>`."""
        return definition_name(self.plural, self.group)

    def write(self, spec: v1.ResourceDefinitionSpec) -> None:
        """Set these names on `spec` (which holds none yet)."""
        spec.group, spec.kind, spec.plural = self.group, self.kind, self.plural
        spec.short_names.extend(self.short_names)
        for name, path in self.printer_columns:
            spec.printer_columns.add(name=name, json_path=path)
        spec.node_verbs.extend(self.node_verbs)
        if self.namespaced:
            spec.scope = SCOPE_NAMESPACED

    def kind_entry(self, cls: type[Any]) -> meta.Kind:
        """The `meta.Kind` of this kind's objects, whose message class is `cls`."""
        return meta.Kind(
            self.kind,
            self.plural,
            cls,
            "custom",
            self.short_names,
            group=self.group,
            printer_columns=self.printer_columns,
            cluster_scoped=not self.namespaced,
        )


def file_descriptor_set(messages: Iterable[Descriptor]) -> bytes:
    """A serialized FileDescriptorSet with the files of `messages` and everything they import, dependencies first."""
    out = descriptor_pb2.FileDescriptorSet()
    seen: set[str] = set()

    def add(file: FileDescriptor) -> None:
        if file.name in seen:
            return
        seen.add(file.name)
        for dependency in file.dependencies:
            add(dependency)
        file.CopyToProto(out.file.add())

    for message in messages:
        add(message.file)
    return out.SerializeToString(deterministic=True)


def definition_for(
    cls: type[Any],
    *,
    spec: type[Any],
    status: type[Any],
    group: str,
    plural: str = "",
    short_names: Sequence[str] = (),
    printer_columns: Sequence[tuple[str, str]] = (),
    node_verbs: Sequence[str] = (),
    namespaced: bool = False,
) -> v1.ResourceDefinition:
    """The ResourceDefinition of the generated message class `cls` (the object) with its `spec` and `status` classes
    (`namespaced`: its objects live in namespaces).

    Raises ValueError when `cls` does not follow the object conventions (see the module docstring)."""
    names = KindNames.of(
        cls,
        group=group,
        plural=plural,
        short_names=short_names,
        printer_columns=printer_columns,
        node_verbs=node_verbs,
        namespaced=namespaced,
    )
    return definition_of(names, cls, spec=spec, status=status)


def definition_of(names: KindNames, cls: type[Any], *, spec: type[Any], status: type[Any]) -> v1.ResourceDefinition:
    """The ResourceDefinition of the kind `names`, whose object message is the generated class `cls` (named
    `names.kind`) with its `spec` and `status` classes.

    Raises ValueError when `cls` does not follow the object conventions (see the module docstring) or is not named
    `names.kind`."""
    _check_object_message(cls.DESCRIPTOR, spec.DESCRIPTOR, status.DESCRIPTOR)
    if cls.DESCRIPTOR.name != names.kind:
        raise ValueError(f"{cls.DESCRIPTOR.full_name} is not named {names.kind}")
    definition = v1.ResourceDefinition(api_version=v1.API_VERSION, kind="ResourceDefinition")
    definition.metadata.name = names.definition_name
    body = definition.spec
    names.write(body)
    body.schema = file_descriptor_set([spec.DESCRIPTOR, status.DESCRIPTOR])
    body.spec_message = spec.DESCRIPTOR.full_name
    body.status_message = status.DESCRIPTOR.full_name
    return definition


def definition_from_schema(schema: bytes, names: KindNames) -> v1.ResourceDefinition:
    """The ResourceDefinition of the kind `names`, whose object message (named `names.kind`) is in the serialized
    FileDescriptorSet `schema` (as `protoc --include_imports --descriptor_set_out` writes it). ValueError when it is
    not there or does not follow the object conventions."""
    pool = descriptor_pool.DescriptorPool()
    known = _add_own_files(pool)
    try:
        files = descriptor_pb2.FileDescriptorSet.FromString(schema).file
        _add_files(pool, [f for f in files if f.name not in known], known)
    except (DecodeError, SchemaError) as exc:
        raise ValueError(f"not a usable FileDescriptorSet: {exc}") from None
    found = [f"{f.package}.{m.name}".lstrip(".") for f in files for m in f.message_type if m.name == names.kind]
    if not found:
        raise ValueError(f"no message {names.kind} in the schema")
    obj = pool.FindMessageTypeByName(found[-1])
    spec_field, status_field = obj.fields_by_name.get("spec"), obj.fields_by_name.get("status")
    if (
        spec_field is None
        or spec_field.message_type is None
        or status_field is None
        or status_field.message_type is None
    ):
        raise ValueError(f"{obj.full_name} must have message fields spec = 4 and status = 5")
    spec = message_factory.GetMessageClass(spec_field.message_type)
    status = message_factory.GetMessageClass(status_field.message_type)
    return definition_of(names, message_factory.GetMessageClass(obj), spec=spec, status=status)


def _check_object_message(obj: Descriptor, spec: Descriptor, status: Descriptor) -> None:
    expected = {
        "api_version": (1, None),
        "kind": (2, None),
        "metadata": (3, "caravanserai.v1.ObjectMeta"),
        "spec": (4, spec.full_name),
        "status": (5, status.full_name),
    }
    for name, (number, type_name) in expected.items():
        field = obj.fields_by_name.get(name)
        got = field.message_type.full_name if field is not None and field.message_type is not None else None
        if field is None or field.number != number or got != type_name:
            wanted = f"{type_name} {name} = {number}" if type_name else f"string {name} = {number}"
            raise ValueError(f"{obj.full_name} must have the field `{wanted}`")


@dataclass(frozen=True)
class Schema:
    """The message classes of one definition, built in a private descriptor pool."""

    object_cls: type[Any]
    spec: Descriptor
    status: Descriptor
    pool: descriptor_pool.DescriptorPool

    @classmethod
    def compile(cls, spec: v1.ResourceDefinitionSpec) -> Schema:
        """Build the classes of `spec`'s kind; SchemaError naming the field at fault."""
        pool = descriptor_pool.DescriptorPool()
        known = _add_own_files(pool)
        try:
            files = descriptor_pb2.FileDescriptorSet.FromString(spec.schema).file
        except DecodeError:
            raise SchemaError("spec.schema", "is not a serialized google.protobuf.FileDescriptorSet") from None
        _add_files(pool, [f for f in files if f.name not in known], known)
        spec_desc = _find_message(pool, spec.spec_message, "spec.specMessage")
        status_desc = _find_message(pool, spec.status_message, "spec.statusMessage")
        object_desc = _object_message(pool, spec, spec_desc, status_desc)
        return cls(message_factory.GetMessageClass(object_desc), spec_desc, status_desc, pool)


def _add_own_files(pool: descriptor_pool.DescriptorPool) -> set[str]:
    """Add caravanserai/api/v1/resources.proto and its imports (ObjectMeta, Condition, Timestamp) to `pool`."""
    added: set[str] = set()

    def add(file: FileDescriptor) -> None:
        if file.name in added:
            return
        for dependency in file.dependencies:
            add(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        pool.Add(proto)
        added.add(file.name)

    add(resources_pb2.DESCRIPTOR)
    return added


def _add_files(
    pool: descriptor_pool.DescriptorPool, files: Sequence[descriptor_pb2.FileDescriptorProto], known: set[str]
) -> None:
    """Add `files` (besides the `known` ones already in `pool`) in an order where every import comes first;
    SchemaError for a missing import or a bad file."""
    pending = {f.name: f for f in files}
    present = {f.name for f in files} | known
    while pending:
        ready = [f for f in pending.values() if not any(d in pending for d in f.dependency)]
        if not ready:
            raise SchemaError("spec.schema", f"import cycle among {', '.join(sorted(pending))}")
        for file in ready:
            try:
                pool.Add(file)
            except (TypeError, ValueError, KeyError) as exc:
                missing = [d for d in file.dependency if d not in present]
                why = f"imports {', '.join(missing)}, which the set does not hold" if missing else str(exc)
                raise SchemaError("spec.schema", f"file {file.name}: {why}") from None
            del pending[file.name]


def _find_message(pool: descriptor_pool.DescriptorPool, name: str, field: str) -> Descriptor:
    if not name:
        raise SchemaError(field, "is required")
    try:
        return pool.FindMessageTypeByName(name)
    except KeyError:
        raise SchemaError(field, f"message {name} is not in spec.schema") from None


def _object_message(
    pool: descriptor_pool.DescriptorPool,
    spec: v1.ResourceDefinitionSpec,
    spec_desc: Descriptor,
    status_desc: Descriptor,
) -> Descriptor:
    """Derive the object message (`api_version`, `kind`, `metadata`, `spec`, `status`) in its own file."""
    package = "caravanserai.custom." + _IDENT.sub("_", f"{spec.group}.{spec.plural}")
    file = descriptor_pb2.FileDescriptorProto(
        name=f"caravanserai/custom/{spec.plural}.{spec.group}.proto",
        package=package,
        syntax="proto3",
        dependency=sorted({resources_pb2.DESCRIPTOR.name, spec_desc.file.name, status_desc.file.name}),
    )
    message = file.message_type.add(name=spec.kind or "Object")
    string, nested = descriptor_pb2.FieldDescriptorProto.TYPE_STRING, descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
    optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    message.field.add(name="api_version", number=1, type=string, label=optional, json_name="apiVersion")
    message.field.add(name="kind", number=2, type=string, label=optional, json_name="kind")
    for name, number, type_name in (
        ("metadata", 3, "caravanserai.v1.ObjectMeta"),
        ("spec", 4, spec_desc.full_name),
        ("status", 5, status_desc.full_name),
    ):
        message.field.add(
            name=name, number=number, type=nested, label=optional, type_name="." + type_name, json_name=name
        )
    try:
        pool.Add(file)
    except (TypeError, ValueError, KeyError) as exc:
        raise SchemaError("spec.kind", f"cannot build the object message: {exc}") from None
    return pool.FindMessageTypeByName(f"{package}.{message.name}")


def register(
    cls: type[Any],
    *,
    group: str,
    plural: str = "",
    short_names: Sequence[str] = (),
    printer_columns: Sequence[tuple[str, str]] = (),
    namespaced: bool = False,
) -> meta.Kind:
    """Make the generated class `cls` known to this process as a custom kind of `group` (what `Client.define` does
    after defining it), so that `Client.resource(cls)`, informers and `EventRecorder` take its objects."""
    names = KindNames.of(
        cls,
        group=group,
        plural=plural,
        short_names=short_names,
        printer_columns=printer_columns,
        namespaced=namespaced,
    )
    return meta.register(names.kind_entry(cls))


def kind_for_definition(definition: v1.ResourceDefinition, cls: type[Any] | None = None) -> meta.Kind:
    """The meta.Kind of a definition's objects: with `cls` (the user's generated class) or a class compiled from
    the definition's schema. SchemaError when the schema does not build."""
    object_cls = cls if cls is not None else Schema.compile(definition.spec).object_cls
    return KindNames.of_spec(definition.spec).kind_entry(object_cls)


__all__ = [
    "SCOPES",
    "SCOPE_CLUSTER",
    "SCOPE_NAMESPACED",
    "KindNames",
    "OBJECT_FIELDS",
    "Schema",
    "SchemaError",
    "VERSION",
    "default_plural",
    "definition_for",
    "definition_from_schema",
    "definition_name",
    "definition_of",
    "file_descriptor_set",
    "kind_for_definition",
    "register",
]
