"""Builds the autopart package with its gRPC stubs generated from the
project's .proto (grpc_tools, Debian's python3-grpc-tools): the stubs go
into the build, as autopart/v1, and are never committed.

The .proto is looked for in $AUTOPART_PROTO_DIR, then ./proto (a copy
beside this file), then ../../proto (the repository's, for a build from a
checkout)."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join("autopart", "v1", "partitioner.proto")


def proto_dir():
    for d in (os.environ.get("AUTOPART_PROTO_DIR"), os.path.join(HERE, "proto"),
              os.path.join(HERE, "..", "..", "proto")):
        if d and os.path.isfile(os.path.join(d, PROTO)):
            return os.path.abspath(d)
    raise SystemExit(f"autopart: {PROTO} not found (set AUTOPART_PROTO_DIR to the directory holding it; "
                     "from a checkout it is ../../proto)")


class build_py_with_stubs(build_py):
    """build_py, then grpc_tools.protoc into the build directory."""

    def run(self):
        super().run()
        try:
            from grpc_tools import protoc
        except ImportError:
            raise SystemExit("autopart: building needs grpc_tools (Debian: python3-grpc-tools; pip: grpcio-tools); "
                             "with pip, --no-build-isolation uses the installed one") from None
        src = proto_dir()
        out = os.path.join(self.build_lib, "autopart", "v1")
        os.makedirs(out, exist_ok=True)
        rc = protoc.main(["grpc_tools.protoc", f"-I{src}", f"--python_out={self.build_lib}",
                          f"--grpc_python_out={self.build_lib}", os.path.join(src, PROTO)])
        if rc != 0:
            raise SystemExit(f"autopart: grpc_tools.protoc failed on {os.path.join(src, PROTO)} ({rc})")
        with open(os.path.join(out, "__init__.py"), "w") as f:
            f.write('"""autopart.v1: gRPC stubs generated from partitioner.proto at build time (do not edit)."""\n')

    def get_outputs(self, include_bytecode=1):
        stubs = [os.path.join(self.build_lib, "autopart", "v1", n)
                 for n in ("__init__.py", "partitioner_pb2.py", "partitioner_pb2_grpc.py")]
        return super().get_outputs(include_bytecode) + stubs


setup(cmdclass={"build_py": build_py_with_stubs})
