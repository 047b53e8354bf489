"""autopart: automatic partitioning of ML programs, from Python.

A partitioning schedule is a list of tactics, as in PartIR: ManualPartition
tactics say what to shard by hand, and an AutomaticPartition tactic lets
autopartd search the rest.  partition() sends the module to the daemon and
returns the schedule it arrived at, the shardings of the arguments and
results as JAX-style partition specs, the device-local module and the cost
report.  Identical requests are answered from the daemon's store, byte for
byte, so a preempted training job that asks again gets its answer at once.

    import autopart
    res = autopart.partition(
        open("train_step.mlir").read(),
        mesh={"batch": 8, "model": 4},
        schedule=[autopart.ManualPartition(axis="batch", inputs={"batch['inputs']": 0}),
                  autopart.AutomaticPartition(axes=["model"], episodes=1000, seed=1)],
        server="127.0.0.1:50051")
    jax.sharding.PartitionSpec(*res.in_specs[0])

With a jax.sharding.Mesh as the mesh, res.named_shardings() gives the
NamedShardings of the arguments and results, ready for jax.jit (JAX is
imported only then; the client does not need it).

Install with pip from clients/python (the wire stubs are generated from the
.proto at build time):

    python3 -m venv --system-site-packages ~/venv   # sees Debian's python3-grpcio
    ~/venv/bin/pip install --no-build-isolation clients/python

or, in the build tree, put build/python on PYTHONPATH.
"""

from .client import (AutomaticPartition, AutopartError, Client, ManualPartition, PartitionResult, Progress,
                     partition)

__all__ = ["AutomaticPartition", "AutopartError", "Client", "ManualPartition", "PartitionResult", "Progress",
           "partition"]
__version__ = "0.1.0"
