# Regenerates the protobuf code of api.proto (the device plugin API) and
# podresources.proto (the kubelet's pod-resources API, which the exporter
# reads): NAME_pb2.py (the messages) and NAME_pb2.pyi (their types, for
# mypy). They are committed, and tests/deviceplugin/test_command.py checks
# that they still describe the .proto files; docs/dependencies.md says why they are committed rather than
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
PROTOS = (PROTO, PROTO.with_name("podresources.proto"))


def _protoc(proto: Path, *arguments: str) -> None:
    from grpc_tools import protoc  # type: ignore[import-untyped]

    if protoc.main(["protoc", f"-I{SOURCE_ROOT}", *arguments, str(proto)]) != 0:
        raise RuntimeError(f"protoc failed on {proto}")


def generate(out_root: Path, proto: Path = PROTO) -> list[Path]:
    """Write NAME_pb2.py and NAME_pb2.pyi of ``proto`` under ``out_root``
    (at the package's relative path); returns their paths."""
    _protoc(proto, f"--python_out={out_root}", f"--pyi_out={out_root}")
    base = out_root / proto.with_name(proto.stem + "_pb2")
    return [base.with_suffix(".py"), base.with_suffix(".pyi")]


def descriptor_set(proto: Path = PROTO) -> bytes:
    """``proto`` compiled to a FileDescriptorSet, as protoc sees it now."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "proto.pb"
        _protoc(proto, f"--descriptor_set_out={out}")
        return out.read_bytes()


def main() -> int:
    for proto in PROTOS:
        for path in generate(SOURCE_ROOT, proto):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
