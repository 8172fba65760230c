"""Compile the .proto of a custom kind with grpcio-tools (install the `proto` extra: `pip install caravanserai[proto]`).

    python -m caravanserai.protoc --python_out=. webfarm.proto     # webfarm_pb2.py and webfarm_pb2.pyi
    messages = load_proto("webfarm.proto")                          # or build the classes at run time
    WebFarm = messages.WebFarm

A custom kind's file imports `caravanserai/api/v1/resources.proto` (for `caravanserai.v1.ObjectMeta`, `Condition`,
`ProjectSpec` …); it is supplied from the installed package, so no copy of it is needed on the include path.
Google's well-known types (`google/protobuf/*.proto`) are found too.

With `--python_out` the typed stubs (`_pb2.pyi`) are written next to the module, so operators type-check (mypy
strict) against their kind's fields: by mypy-protobuf's `protoc-gen-mypy` when it is installed (the `proto` extra
brings it), else by protoc's own `--pyi_out`; `--no-stubs` skips them.

Guarantees: every failure is a `ProtocError` with one line of explanation (protoc's own message, or which extra
to install); classes from `load_proto` live in the default descriptor pool, so they mix with `caravanserai.v1`
messages (`CopyFrom`, conditions helpers) exactly like generated code.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import pathlib
import shutil
import sys
import tempfile
import types
from collections.abc import Sequence

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from caravanserai.api.v1 import resources_pb2
from caravanserai.customkinds.schemas import file_descriptor_set

EXTRA = "caravanserai[proto]"
MYPY_PLUGIN = "protoc-gen-mypy"


class ProtocError(RuntimeError):
    """The .proto could not be compiled (or grpcio-tools is missing)."""


def _protoc() -> types.ModuleType:
    try:
        from grpc_tools import protoc  # type: ignore[import-untyped]  # grpcio-tools ships no stubs  # noqa: PLC0415 - optional extra
    except ImportError:
        raise ProtocError(f"compiling .proto files needs grpcio-tools: pip install '{EXTRA}'") from None
    module: types.ModuleType = protoc
    return module


def mypy_plugin() -> str | None:
    """The path of mypy-protobuf's protoc plugin: next to this Python's executable, else on PATH; None if absent."""
    beside = pathlib.Path(sys.executable).parent / MYPY_PLUGIN
    if beside.is_file():
        return str(beside)
    return shutil.which(MYPY_PLUGIN)


def _stub_args(python_out: str) -> list[str]:
    plugin = mypy_plugin()
    if plugin is None:
        return [f"--pyi_out={python_out}"]
    return [f"--plugin={MYPY_PLUGIN}={plugin}", f"--mypy_out={python_out}"]


def compile_proto(path: str, *, include: Sequence[str] = (), python_out: str = "", stubs: bool = True) -> bytes:
    """The serialized FileDescriptorSet of `path` with every import (dependencies first); with `python_out`,
    also write the generated Python module there, and its `.pyi` stub unless `stubs` is False. ProtocError on
    any failure."""
    protoc = _protoc()
    source = pathlib.Path(path)
    if not source.is_file():
        raise ProtocError(f"{path}: no such file")
    well_known = pathlib.Path(str(protoc.__file__)).parent / "_proto"
    with tempfile.TemporaryDirectory(prefix="cara-protoc-") as tmp:
        own, out = pathlib.Path(tmp, "own.pb"), pathlib.Path(tmp, "out.pb")
        own.write_bytes(file_descriptor_set([resources_pb2.ObjectMeta.DESCRIPTOR]))
        args = ["protoc", f"-I{source.parent.resolve()}", *(f"-I{i}" for i in include), f"-I{well_known}"]
        args += [f"--descriptor_set_in={own}", "--include_imports", f"--descriptor_set_out={out}"]
        if python_out:
            args.append(f"--python_out={python_out}")
            if stubs:
                args += _stub_args(python_out)
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            code = protoc.main([*args, str(source.resolve())])
        if code != 0 or not out.exists():
            detail = " ".join(stderr.getvalue().split()) or f"protoc exited with {code}"
            raise ProtocError(f"{path}: {detail}")
        return out.read_bytes()


def load_proto(path: str, *, include: Sequence[str] = ()) -> types.SimpleNamespace:
    """The message classes of `path` (by name), built in the default descriptor pool. ProtocError on failure."""
    files = descriptor_pb2.FileDescriptorSet.FromString(compile_proto(path, include=include)).file
    pool = descriptor_pool.Default()
    for file in files:
        try:
            pool.FindFileByName(file.name)
        except KeyError:
            pool.Add(file)
    target = pool.FindFileByName(files[-1].name)
    classes = {name: message_factory.GetMessageClass(d) for name, d in target.message_types_by_name.items()}
    return types.SimpleNamespace(**classes)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m caravanserai.protoc", description=__doc__.splitlines()[0])
    parser.add_argument("proto", help="the .proto file")
    parser.add_argument("--python_out", default=".", help="where to write the generated module")
    parser.add_argument("-I", "--include", action="append", default=[], help="further import directories")
    parser.add_argument("--no-stubs", action="store_true", help="do not write the typed .pyi stubs")
    args = parser.parse_args(argv)
    try:
        compile_proto(args.proto, include=args.include, python_out=args.python_out, stubs=not args.no_stubs)
    except ProtocError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["EXTRA", "MYPY_PLUGIN", "ProtocError", "compile_proto", "load_proto", "main", "mypy_plugin"]
