"""`python -m caravanserai.protoc`: compile a custom kind's .proto into its Python module and typed `.pyi` stub.

    python -m caravanserai.protoc --python_out=. backup.proto      # backup_pb2.py, backup_pb2.pyi

The same as `caravanserai.customkinds.protoc` (where `compile_proto` and `load_proto` live), under a short name.
"""

from __future__ import annotations

import sys

from caravanserai.customkinds.protoc import EXTRA, ProtocError, compile_proto, load_proto, main

if __name__ == "__main__":
    sys.exit(main())

__all__ = ["EXTRA", "ProtocError", "compile_proto", "load_proto", "main"]
