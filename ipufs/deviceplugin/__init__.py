"""`ipufs device-plugin`: a Kubernetes device plugin (API v1beta1) that
offers a node's emulated IPUs to kubelet (docs/kubernetes.md). A tool on
top of the client library; it needs the `kubernetes` extra (grpcio,
protobuf 7), which importing this package does not import, so that a
missing or unfit extra is reported in one line (``require``)."""
from __future__ import annotations

EXTRA = "pip install 'ipufs[kubernetes]'"


def require() -> None:
    """Raise RuntimeError, saying how to install them, unless grpcio and a
    protobuf runtime that fits the generated code (api_pb2) can be loaded."""
    try:
        import grpc  # noqa: F401

        from ipufs.deviceplugin import api_pb2  # noqa: F401
    except Exception as exc:  # ImportError, or protobuf's VersionError
        raise RuntimeError(f"the device plugin needs grpcio and protobuf 7: {EXTRA} ({exc})") from None
