"""The Python client against a real autopartd (ephemeral loopback port,
temporary store): tactics composed into a schedule, JAX-style partition
specs, the same answer again from the store, errors with their status and
position, and the records API.

Run by ctest with PYTHONPATH=<build>/python, AUTOPARTD=<autopartd> and
AUTOPART_SOURCE=<source dir>."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import autopart

SOURCE = os.environ["AUTOPART_SOURCE"]
DAEMON = os.environ["AUTOPARTD"]
MODELGEN = os.path.join(SOURCE, "tests", "models", "modelgen")


def generate(config):
    with tempfile.NamedTemporaryFile(suffix=".mlir", delete=False) as f:
        path = f.name
    subprocess.run([sys.executable, MODELGEN, "transformer", "--config", config, "-q", "-o", path], check=True)
    with open(path) as f:
        text = f.read()
    os.unlink(path)
    return text


class Daemon:
    def __init__(self, *extra):
        self.dir = tempfile.mkdtemp(prefix="autopart-py-")
        self.db = os.path.join(self.dir, "store.db")
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.proc = subprocess.Popen([DAEMON, "--listen", "127.0.0.1:0", "--db", self.db, *extra],
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r" port (\d+)", line)
        if not m:
            raise RuntimeError(f"autopartd did not start: {line!r}")
        self.server = f"127.0.0.1:{m.group(1)}"

    def stop(self):
        self.proc.terminate()
        rc = self.proc.wait(timeout=60)
        self.proc.stdout.close()
        self.log.close()
        if rc == 0:  # a daemon that failed leaves its log and store for a look
            shutil.rmtree(self.dir)
        else:
            print(f"autopartd exited {rc}: its log and store are in {self.dir}", file=sys.stderr)
        return rc


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tiny = generate("tiny")
        cls.daemon = Daemon()

    @classmethod
    def tearDownClass(cls):
        assert cls.daemon.stop() == 0, "autopartd did not exit cleanly"

    def manual_schedule(self):
        return [
            autopart.ManualPartition(axis="batch", inputs={"batch['inputs']": 0, "batch['targets']": 0}),
            autopart.ManualPartition(axis="model", inputs={
                "params['block_*']['attn']['w_qkv']": 2, "params['block_*']['attn']['w_out']": 0,
                "params['block_*']['mlp']['w_up']": 1, "params['block_*']['mlp']['b_up']": 0,
                "params['block_*']['mlp']['w_down']": 0}),
        ]

    def test_manual_schedule_and_cache(self):
        mesh = {"batch": 2, "model": 2}
        first = autopart.partition(self.tiny, mesh, self.manual_schedule(), server=self.daemon.server,
                                   module_name="tiny.mlir", client_label="py-job", device="tpu_v3")
        self.assertEqual(first.origin, "new")
        # JAX-style specs: None for a replicated dim, the axis name otherwise
        self.assertEqual(first.shardings["params['block_0']['mlp']['w_up']"], (None, "model"))
        self.assertEqual(first.shardings["params['block_0']['attn']['w_out']"], ("model", None, None))
        self.assertEqual(first.shardings["batch['inputs']"][0], "batch")
        self.assertGreater(len(first.in_specs), 10)
        self.assertGreater(len(first.out_specs), 0)
        self.assertIn("stablehlo.all_reduce", first.module)
        self.assertGreater(first.report["collectives"]["all_reduce"], 0)
        self.assertEqual(first.cost["device"], "tpu_v3")
        self.assertGreater(first.cost["runtime_s"], 0)
        self.assertIn("manual batch", first.report["tactics"][0]["tactic"])
        # the same request again: from the store, the same bytes
        again = autopart.partition(self.tiny, mesh, self.manual_schedule(), server=self.daemon.server,
                                   module_name="tiny.mlir", client_label="py-job-restarted", device="tpu_v3")
        self.assertEqual(again.origin, "cache_hit")
        self.assertEqual(again.search_id, first.search_id)
        self.assertEqual(again.raw.SerializeToString(), first.raw.SerializeToString())
        # the schedule it reports applies again to the same specs
        replay = autopart.partition(self.tiny, "batch=2,model=2", autopart.ManualPartition(actions=first.schedule),
                                    server=self.daemon.server, module_name="tiny.mlir", device="tpu_v3")
        self.assertEqual(replay.in_specs, first.in_specs)
        with autopart.Client(self.daemon.server) as c:
            rec = c.get(first.search_id, include_result=True)
            self.assertEqual(rec["status"], "done")
            self.assertEqual(rec["client_label"], "py-job")
            self.assertGreaterEqual(rec["cache_hits"], 1)
            self.assertEqual(rec["result"].raw.SerializeToString(), first.raw.SerializeToString())
            rows, token = c.list(client_label="py-job")
            self.assertEqual([r["search_id"] for r in rows], [first.search_id])
            self.assertEqual(token, "")
            self.assertGreaterEqual(c.stats()["cache_hits"], 1)

    def test_framework(self):
        # Eager PyTorch's memory: more than XLA's fused step, the same step
        # time, an answer of its own (not XLA's from the store), and the
        # result says which framework counted it.
        mesh = {"batch": 2, "model": 2}
        xla = autopart.partition(self.tiny, mesh, self.manual_schedule(), server=self.daemon.server,
                                 device="h100", client_label="py-fw")
        eager = autopart.partition(self.tiny, mesh, self.manual_schedule(), server=self.daemon.server,
                                   device="h100", client_label="py-fw", framework="pytorch-eager")
        self.assertEqual(eager.origin, "new")
        self.assertNotEqual(eager.search_id, xla.search_id)
        self.assertEqual(xla.cost["framework"], "xla")
        self.assertEqual(eager.cost["framework"], "pytorch_eager")
        self.assertGreater(eager.cost["peak_memory_bytes"], xla.cost["peak_memory_bytes"])
        self.assertEqual(eager.cost["runtime_s"], xla.cost["runtime_s"])
        with self.assertRaisesRegex(ValueError, "framework 'jax' is not one of"):
            autopart.partition(self.tiny, mesh, self.manual_schedule(), server=self.daemon.server, framework="jax")

    def test_memory_limit_in_the_cost(self):
        # The result's fit is held to the search's memory limit, and says
        # which (it once was the device's HBM whatever the limit): tpu_v3 has
        # 16 GiB; the tiny model's peak is some KiB.
        mesh = {"batch": 2, "model": 2}
        hbm = 16 * 2**30
        cases = ((1024, False, 1024), (90 * 2**30, True, 90 * 2**30), ("none", True, None), (None, True, hbm))
        for limit, fits, held_to in cases:
            res = autopart.partition(self.tiny, mesh, autopart.AutomaticPartition(episodes=10, memory_limit=limit),
                                     server=self.daemon.server, device="tpu_v3", client_label="py-limit")
            with self.subTest(limit=limit):
                self.assertEqual(res.cost["fits"], fits)
                self.assertEqual(res.cost["memory_limit_bytes"], held_to)
                self.assertEqual(res.cost["hbm_bytes"], hbm)
                # the report the daemon sends says the same
                self.assertEqual(res.report["cost"]["fits"], fits)
                self.assertEqual(res.report["cost"]["memory_limit_bytes"], held_to)

    def test_defaults_name_the_module_and_the_client(self):
        # Without module_name and client_label: listed under the module's own
        # @name and as "python" (not as "module", unlabelled).
        res = autopart.partition(self.tiny, {"batch": 2, "model": 2}, self.manual_schedule()[:1],
                                 server=self.daemon.server, device="a100")
        with autopart.Client(self.daemon.server) as c:
            rec = c.get(res.search_id)
        self.assertEqual(rec["module_name"], "jit_train_step")
        self.assertEqual(rec["client_label"], "python")

    def test_jax_mesh(self):
        # A JAX Mesh as the mesh: anything with axis_names and devices.shape.
        # JAX is not installed here (nor needed): a stand-in of its shape.
        class Devices:
            shape = (2, 2)

        class Mesh:
            axis_names = ("batch", "model")
            devices = Devices()

        mesh = Mesh()
        res = autopart.partition(self.tiny, mesh, self.manual_schedule(), server=self.daemon.server,
                                 module_name="tiny.mlir", device="h100")
        self.assertIs(res.mesh, mesh)
        self.assertEqual(res.shardings["params['block_0']['mlp']['w_up']"], (None, "model"))
        # the same request as with a dict mesh: the same answer
        plain = autopart.partition(self.tiny, {"batch": 2, "model": 2}, self.manual_schedule(),
                                   server=self.daemon.server, module_name="tiny.mlir", device="h100")
        self.assertEqual(plain.raw.SerializeToString(), res.raw.SerializeToString())
        self.assertIsNone(plain.mesh)
        self.assertNotIn("jax", sys.modules)
        with self.assertRaises(ImportError) as e:
            res.named_shardings()
        self.assertIn("JAX is not installed", str(e.exception))
        with self.assertRaises(ValueError):
            plain.named_shardings()

        class Bad:
            axis_names = ("batch",)
            devices = Devices()

        with self.assertRaises(ValueError):
            autopart.partition(self.tiny, Bad(), self.manual_schedule(), server=self.daemon.server)
        # With jax.sharding importable: NamedSharding(mesh, PartitionSpec(*spec)) per argument and result.
        # The stand-in takes what JAX's constructors take (a tuple-like PartitionSpec of None, a name
        # or a tuple of names per dim) and keeps it, to check what the client hands JAX.
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "jax"))
            open(os.path.join(d, "jax", "__init__.py"), "w").close()
            with open(os.path.join(d, "jax", "sharding.py"), "w") as f:
                f.write("class PartitionSpec(tuple):\n"
                        "    def __new__(cls, *parts):\n"
                        "        for p in parts:\n"
                        "            assert p is None or isinstance(p, str) or all(isinstance(a, str) for a in p)\n"
                        "        return tuple.__new__(cls, parts)\n"
                        "class NamedSharding:\n"
                        "    def __init__(self, mesh, spec):\n"
                        "        assert isinstance(spec, PartitionSpec)\n"
                        "        self.mesh, self.spec = mesh, spec\n")
            sys.path.insert(0, d)
            try:
                ins, outs = res.named_shardings()
                specs_in, specs_out = res.partition_specs()
            finally:
                sys.path.remove(d)
                for name in ("jax.sharding", "jax"):
                    sys.modules.pop(name, None)
        self.assertEqual(len(ins), len(res.in_specs))
        self.assertEqual(len(outs), len(res.out_specs))
        self.assertTrue(all(s.mesh is mesh for s in ins + outs))
        self.assertEqual([tuple(s.spec) for s in ins], list(res.in_specs))
        self.assertEqual([tuple(s) for s in specs_out], list(res.out_specs))

    def test_errors_name_the_problem(self):
        bad = "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %b : tensor<4xf32>\n}\n"
        with self.assertRaises(autopart.AutopartError) as e:
            autopart.partition(bad, {"batch": 2}, autopart.ManualPartition(actions="propagate"),
                               server=self.daemon.server, module_name="bad.mlir")
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
        self.assertTrue(e.exception.message.startswith("bad.mlir:2:"), e.exception.message)
        with self.assertRaises(autopart.AutopartError) as e:
            autopart.partition(self.tiny, {"batch": 2, "model": 3}, self.manual_schedule(),
                               server=self.daemon.server)
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
        self.assertIn("not divisible", e.exception.message)
        with self.assertRaises(autopart.AutopartError) as e:
            autopart.partition(self.tiny, {"batch": 2, "model": 2},
                               [autopart.AutomaticPartition(axes=["modle"], episodes=10)],
                               server=self.daemon.server)
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
        self.assertIn("'modle' is not an axis", e.exception.message)
        with self.assertRaises(ValueError):
            autopart.partition(self.tiny, {"batch": 2}, [autopart.AutomaticPartition(axes=["batch"]),
                                                         autopart.ManualPartition(actions="propagate")],
                               server=self.daemon.server)
        with self.assertRaises(ValueError):
            autopart.ManualPartition(axis="batch", inputs={"x": -1})
        with self.assertRaises(autopart.AutopartError) as e:
            autopart.partition(self.tiny, {"batch": 2}, self.manual_schedule()[:1], server="127.0.0.1:1",
                               timeout=5)
        self.assertEqual(e.exception.code, "UNAVAILABLE")

    def test_automatic_partition(self):
        # The manual tactic first, then the search on `model` (small: 4 layers)
        small = generate("small")
        seen = []
        sched = [autopart.ManualPartition(axis="batch", inputs={"batch['inputs']": 0, "batch['targets']": 0}),
                 autopart.AutomaticPartition(axes=["model"], episodes=400, seed=1)]
        first = autopart.partition(small, {"batch": 4, "model": 2}, sched, server=self.daemon.server,
                                   module_name="small.mlir", device="tpu_v3", on_progress=seen.append)
        self.assertEqual(first.origin, "new")
        self.assertTrue(seen, "no progress event")
        self.assertEqual(first.search_stats["episodes"], 400)
        self.assertIn("tile batch['inputs'] 0 batch", first.schedule)
        # batch first (the search may add `model` to it: data parallel on 8)
        dim0 = first.shardings["batch['inputs']"][0]
        self.assertEqual(dim0 if isinstance(dim0, str) else dim0[0], "batch", dim0)
        # the search shards something over `model`, and says why
        self.assertTrue(any("model" in str(spec) for spec in first.in_specs), first.in_specs)
        self.assertIsNotNone(first.explanation)
        # less time than the manual tactic alone
        manual_only = autopart.partition(small, {"batch": 4, "model": 2}, sched[:1], server=self.daemon.server,
                                         module_name="small.mlir", device="tpu_v3")
        self.assertLess(first.cost["runtime_s"], manual_only.cost["runtime_s"])
        again = autopart.partition(small, {"batch": 4, "model": 2}, sched, server=self.daemon.server,
                                   module_name="small.mlir", device="tpu_v3")
        self.assertEqual(again.origin, "cache_hit")
        self.assertEqual(again.raw.SerializeToString(), first.raw.SerializeToString())

    def test_devices(self):
        # the search chooses the mesh of 4 devices, names its axes by role
        small = generate("small")
        res = autopart.partition(small, None, autopart.AutomaticPartition(episodes=200, seed=1),
                                 server=self.daemon.server, module_name="small.mlir", device="tpu_v3", devices=4)
        names = [n for n, _ in res.mesh_axes]
        sizes = [k for _, k in res.mesh_axes]
        self.assertEqual(eval("*".join(map(str, sizes))), 4, res.mesh_axes)
        self.assertTrue(all(n in ("data", "fsdp", "model", "expert", "replica") or n[:-1] in ("data", "fsdp", "model")
                            for n in names), names)
        self.assertGreaterEqual(len(res.meshes), 2)
        chosen = [m for m in res.meshes if m["chosen"]]
        self.assertEqual(len(chosen), 1)
        self.assertEqual(chosen[0]["mesh"], res.mesh_axes)
        self.assertEqual(chosen[0]["runtime_s"], res.cost["runtime_s"])
        # every spec names axes of that mesh
        for spec in res.in_specs:
            for d in spec:
                for ax in (d if isinstance(d, tuple) else (d,)):
                    self.assertIn(ax, names + [None])
        # named axes, and a manual tactic over them
        named = autopart.partition(small, None, [autopart.ManualPartition(axis="data", inputs={"batch['inputs']": 0}),
                                                 autopart.AutomaticPartition(episodes=100)],
                                   server=self.daemon.server, device="tpu_v3", devices=4, axes_names=["data", "model"])
        self.assertEqual([n for n, _ in named.mesh_axes], ["data", "model"])
        # the manual tactic's axis comes first on the batch dim (the search
        # may tile it along more: on data=1,model=4, the first mesh in order
        # and the only one 100 episodes look at, it goes on along model)
        dim0 = named.shardings["batch['inputs']"][0]
        self.assertEqual(dim0[0] if isinstance(dim0, tuple) else dim0, "data", (dim0, named.mesh_axes))
        # bad counts: the daemon's reasons
        for n, want in ((1, "nothing to partition"), (7, "no mesh of 7 devices"), (1 << 31, "more than 2^20")):
            with self.assertRaises((autopart.AutopartError, ValueError)) as e:
                autopart.partition(small, None, autopart.AutomaticPartition(episodes=10), server=self.daemon.server,
                                   devices=n)
            if isinstance(e.exception, autopart.AutopartError):
                self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
                self.assertIn(want, e.exception.message)
        with self.assertRaises(ValueError):
            autopart.partition(small, {"batch": 2}, autopart.AutomaticPartition(), devices=4)


if __name__ == "__main__":
    unittest.main()
