"""Generate the Python code for every .proto under proto/ into src/caravanserai/api/.

Usage:
    python proto/generate.py            # (re)write the generated files
    python proto/generate.py --check    # exit 1 when the committed files are stale

The folders map to import paths as follows (protoc's VIRTUAL=DISK form of --proto_path):

    proto/caravanserai/v1/*.proto  ->  caravanserai/api/v1/*.proto  ->  caravanserai.api.v1.*_pb2
    proto/etcd/*.proto             ->  caravanserai/api/etcd/*.proto -> caravanserai.api.etcd.*_pb2
"""

from __future__ import annotations

import argparse
import filecmp
import pathlib
import shutil
import sys
import tempfile

import grpc_tools
from grpc_tools import protoc

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAPPINGS = {
    "caravanserai/api/v1": ROOT / "proto" / "caravanserai" / "v1",
    "caravanserai/api/etcd": ROOT / "proto" / "etcd",
}
OUT = ROOT / "src"
GENERATED = ROOT / "src" / "caravanserai" / "api"
SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")


def _generate(out: pathlib.Path) -> None:
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    bindir = pathlib.Path(sys.executable).parent
    args = [
        "protoc",
        f"--plugin=protoc-gen-mypy={bindir / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={bindir / 'protoc-gen-mypy_grpc'}",
        f"-I{well_known}",
    ]
    files: list[str] = []
    for virtual, disk in MAPPINGS.items():
        args.append(f"-I{virtual}={disk}")
        files.extend(f"{virtual}/{p.name}" for p in sorted(disk.glob("*.proto")))
    args += [
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--mypy_out={out}",
        f"--mypy_grpc_out={out}",
        *files,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for virtual in MAPPINGS:
        pkg = out / virtual
        while pkg != out:
            pkg.mkdir(parents=True, exist_ok=True)
            (pkg / "__init__.py").touch()
            pkg = pkg.parent
    (out / "caravanserai" / "__init__.py").unlink()


def _generated_files(root: pathlib.Path) -> dict[str, pathlib.Path]:
    return {
        str(p.relative_to(root)): p
        for p in root.rglob("*")
        if p.is_file() and (p.name.endswith(SUFFIXES) or p.name == "__init__.py")
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when generated code is stale")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp)
        _generate(out)
        fresh = _generated_files(out / "caravanserai" / "api")
        current = _generated_files(GENERATED)
        if opts.check:
            stale = sorted(
                name
                for name in fresh.keys() | current.keys()
                if name not in fresh
                or name not in current
                or not filecmp.cmp(fresh[name], current[name], shallow=False)
            )
            if stale:
                print("generated code is stale; run: python proto/generate.py", file=sys.stderr)
                for name in stale:
                    print(f"  {name}", file=sys.stderr)
                return 1
            print(f"generated code is fresh ({len(fresh)} files)")
            return 0
        for name, path in current.items():
            if name not in fresh:
                path.unlink()
        for name, path in fresh.items():
            target = GENERATED / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        print(f"wrote {len(fresh)} files under {GENERATED.relative_to(ROOT)}")
        return 0


if __name__ == "__main__":
    sys.exit(main())
