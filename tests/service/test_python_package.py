"""The Python client as a user installs it: pip, from clients/python, into a
venv created with --system-site-packages over Debian's python3-grpcio,
offline (--no-build-isolation --no-index: nothing comes from an index), the
gRPC stubs generated while the package is built.  Then the whole client
test (test_python_client.py) runs against the installed package, with no
PYTHONPATH, and a real autopartd.

Run by ctest with AUTOPARTD=<autopartd> and AUTOPART_SOURCE=<source dir>."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.environ["AUTOPART_SOURCE"]
HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEM_PYTHON = "/usr/bin/python3"


class PythonPackageTest(unittest.TestCase):
    def test_pip_install_in_a_venv(self):
        with tempfile.TemporaryDirectory(prefix="autopart-pip-") as tmp:
            # A copy of what pip reads (its in-tree build writes build/ and
            # *.egg-info beside pyproject.toml): the package and the .proto,
            # laid out as in the repository.
            src = os.path.join(tmp, "src")
            shutil.copytree(os.path.join(SOURCE, "clients", "python"), os.path.join(src, "clients", "python"),
                            ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "CMakeLists.txt"))
            shutil.copytree(os.path.join(SOURCE, "proto"), os.path.join(src, "proto"))
            pkg = os.path.join(src, "clients", "python")
            # Nothing generated is committed: the stubs exist only once built.
            self.assertFalse(os.path.exists(os.path.join(pkg, "autopart", "v1")))
            venv = os.path.join(tmp, "venv")
            subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--system-site-packages", "--without-pip", venv], check=True)
            py = os.path.join(venv, "bin", "python")
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            env["PIP_NO_INDEX"] = "1"
            r = subprocess.run([SYSTEM_PYTHON, "-m", "pip", "--python", py, "install", "--no-build-isolation",
                                "--no-index", pkg], env=env, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            # Installed in the venv, with its version and the generated stubs.
            probe = ("import autopart, autopart.v1.partitioner_pb2 as pb, importlib.metadata as md, sys;"
                     "print(autopart.__file__); print(autopart.__version__, md.version('autopart'));"
                     "print(pb.DESCRIPTOR.name); print('jax' in sys.modules)")
            r = subprocess.run([py, "-c", probe], env=env, cwd=tmp, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            where, versions, proto, jax = r.stdout.splitlines()
            self.assertTrue(where.startswith(venv), where)
            version, meta = versions.split()
            self.assertEqual(version, meta)
            self.assertRegex(version, r"^\d+\.\d+\.\d+$")
            self.assertEqual(proto, "autopart/v1/partitioner.proto")
            self.assertEqual(jax, "False")
            # The client's tests, against the installed package.
            r = subprocess.run([py, "-m", "unittest", "test_python_client"], env=env, cwd=HERE,
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("OK", r.stderr)


if __name__ == "__main__":
    unittest.main()
