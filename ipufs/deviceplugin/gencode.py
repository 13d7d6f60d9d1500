# Regenerates the protobuf code of api.proto: api_pb2.py (the messages)
# and api_pb2.pyi (their types, for mypy). Both are committed, and
# tests/deviceplugin/test_command.py checks that they still describe
# api.proto; docs/architecture.md says why they are committed rather than
# built at install time. The services are not generated: rpc.py binds them
# by hand, typed. Needs grpcio-tools (the test extra):
#     python -m ipufs.deviceplugin.gencode
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
SOURCE_ROOT = PACKAGE.parents[1]
PROTO = PACKAGE.relative_to(SOURCE_ROOT) / "api.proto"


def _protoc(*arguments: str) -> None:
    from grpc_tools import protoc  # type: ignore[import-untyped]

    if protoc.main(["protoc", f"-I{SOURCE_ROOT}", *arguments, str(PROTO)]) != 0:
        raise RuntimeError(f"protoc failed on {PROTO}")


def generate(out_root: Path) -> list[Path]:
    """Write api_pb2.py and api_pb2.pyi under ``out_root`` (at the package's
    relative path); returns their paths."""
    _protoc(f"--python_out={out_root}", f"--pyi_out={out_root}")
    base = out_root / PROTO.with_name("api_pb2")
    return [base.with_suffix(".py"), base.with_suffix(".pyi")]


def descriptor_set() -> bytes:
    """api.proto compiled to a FileDescriptorSet, as protoc sees it now."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "api.pb"
        _protoc(f"--descriptor_set_out={out}")
        return out.read_bytes()


def main() -> int:
    for path in generate(SOURCE_ROOT):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
