"""bench/xla_measure.py - compile one StableHLO module with XLA on a local
GPU and print XLA's own memory figures (its buffer assignment) and the
measured step time: the measurements bench_fidelity's section "single-device
programs measured with XLA on an H200" holds the cost model to.

Not part of the product and never run by CI (it needs a GPU and jax): run
it by hand on a GPU machine with jax installed (the rows were taken with
jax 0.11.2's PJRT GPU backend on one NVIDIA H200):

    tests/models/modelgen transformer --config t32 layers=4 batch=8 seq=1024 -q -o t32_l4.mlir
    XLA_FLAGS=--xla_dump_to=dump python3 bench/xla_measure.py t32_l4.mlir 5

It parses the StableHLO text with jax's MLIR bindings, compiles it with the
PJRT GPU backend, reads get_compiled_memory_stats() (XLA's peak is
arguments + outputs - aliased + temporaries), and times `runs` executions
(default 5) after 2 warm-ups on fresh random inputs, each from its call to
its results being ready.  Prints one JSON line prefixed 'RESULT '.  With
--xla_dump_to, XLA also writes its optimized HLO and buffer assignment,
which bench/xla_buffers.py reads."""

import json, os, sys, time, traceback

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import numpy as np
import jax
import jax.numpy as jnp
from jax._src import xla_bridge
from jax._src.interpreters import mlir
from jax._src.lib import xla_client as xc
from jax._src.lib.mlir import ir

path = sys.argv[1]
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
out = {"file": os.path.basename(path), "jax": jax.__version__}
text = open(path).read()
backend = xla_bridge.get_backend()
dev = backend.local_devices()[0]
out["device"] = getattr(dev, "device_kind", str(dev))

ctx = mlir.make_ir_context()
with ctx, ir.Location.unknown():
    module = ir.Module.parse(text)
    main = None
    for op in module.body.operations:
        if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value == "main":
            main = op
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    inputs = []
    for t in ftype.inputs:
        rt = ir.RankedTensorType(t)
        inputs.append((tuple(rt.shape), str(rt.element_type)))
    bytecode = mlir.module_to_bytecode(module)

DT = {"f32": jnp.float32, "bf16": jnp.bfloat16, "f16": jnp.float16, "f64": jnp.float64,
      "i32": jnp.int32, "i64": jnp.int64, "i1": jnp.bool_, "ui32": jnp.uint32, "i8": jnp.int8}

opts = None
errs = []
try:
    from jax._src import compiler
    opts = compiler.get_compile_options(num_replicas=1, num_partitions=1,
                                        device_assignment=np.array([[dev.id]]))
except Exception as e:
    errs.append("get_compile_options: %r" % e)
    opts = xc.CompileOptions()
exe = None
t0 = time.perf_counter()
for attempt in (
        lambda: backend.compile_and_load(bytecode, executable_devices=xc.DeviceList((dev,)), compile_options=opts),
        lambda: backend.compile_and_load(bytecode, xc.DeviceList((dev,)), opts),
        lambda: backend.compile(bytecode, compile_options=opts),
        lambda: backend.compile(text, compile_options=opts),
        lambda: backend.compile(bytecode, opts)):
    try:
        exe = attempt()
        break
    except Exception as e:
        errs.append(repr(e)[:400])
out["compile_s"] = time.perf_counter() - t0
if exe is None:
    out["error"] = errs
    out["backend_methods"] = [m for m in dir(backend) if "compile" in m]
    print("RESULT " + json.dumps(out), flush=True)
    sys.exit(1)
out["compile_notes"] = errs
try:
    st = exe.get_compiled_memory_stats()
    for k in dir(st):
        if k.endswith("_in_bytes"):
            out["xla_" + k] = getattr(st, k)
    out["xla_stats_str"] = str(st)[:600]
except Exception as e:
    out["stats_error"] = repr(e)

key = jax.random.PRNGKey(0)


def make_args():
    global key
    args = []
    for shape, et in inputs:
        dt = DT.get(et)
        if dt is None:
            raise RuntimeError("element type %s" % et)
        if jnp.issubdtype(dt, jnp.floating):
            key, sub = jax.random.split(key)
            a = (jax.random.normal(sub, shape, jnp.float32) * 0.02).astype(dt)
        elif dt == jnp.bool_:
            a = jnp.zeros(shape, dt)
        else:
            a = jnp.ones(shape, dt)
        args.append(jax.device_put(a, dev))
    jax.block_until_ready(args)
    return args


def run_once():
    args = make_args()
    t = time.perf_counter()
    try:
        res = exe.execute_sharded(args)
        outs = res.disassemble_into_single_device_arrays()
        flat = [a for group in outs for a in group]
    except AttributeError:
        flat = exe.execute(args)
    jax.block_until_ready(flat)
    dt = time.perf_counter() - t
    for a in flat + args:
        try:
            a.delete()
        except Exception:
            pass
    return dt


if runs == 0:
    print("RESULT " + json.dumps(out), flush=True)
    sys.exit(0)
try:
    times = [run_once() for _ in range(2 + runs)][2:]
    out["step_ms_all"] = [round(x * 1e3, 3) for x in times]
    out["step_ms_median"] = float(np.median(times)) * 1e3
    out["step_ms_min"] = min(times) * 1e3
    ms = dev.memory_stats() or {}
    out["peak_bytes_in_use"] = ms.get("peak_bytes_in_use")
    out["bytes_limit"] = ms.get("bytes_limit")
except Exception as e:
    out["run_error"] = traceback.format_exc()[-800:]
print("RESULT " + json.dumps(out), flush=True)
