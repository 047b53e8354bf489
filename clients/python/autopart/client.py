"""The client of autopartd: tactics, schedules, calls and results.

Everything the daemon says comes back as Python values: partition specs as
tuples (None for a replicated dim, an axis name, or a tuple of axis names),
the report as a dict.  Failures raise AutopartError with the gRPC status
name and the daemon's message (which names the problem, with LINE:COL for a
module or schedule that does not parse).
"""

import json

import grpc

from .v1 import partitioner_pb2 as pb
from .v1 import partitioner_pb2_grpc as pb_grpc

_ORIGINS = {pb.NEW: "new", pb.JOINED: "joined", pb.CACHE_HIT: "cache_hit"}
_STATUSES = {pb.QUEUED: "queued", pb.RUNNING: "running", pb.DONE: "done", pb.FAILED: "failed",
             pb.CANCELLED: "cancelled"}


class AutopartError(Exception):
    """A call that autopartd (or the way to it) refused: `code` is the gRPC
    status name ("INVALID_ARGUMENT", "UNAVAILABLE", ...), `message` the
    daemon's words."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


# ------------------------------------------------------------------ tactics

class ManualPartition:
    """A manual tactic: tile each named input along `axis` on the given dim,
    then propagate (PartIR's manual tactic).  `inputs` maps argument names
    (JAX parameter paths such as "params['w']", globs over them such as
    "params['block_*']['mlp']['w_up']", or "%argN") to the dim to split.
    Or give raw PartIR `actions` text (tile / atomic / propagate lines)."""

    def __init__(self, inputs=None, axis=None, actions=None):
        if actions is not None:
            if inputs is not None or axis is not None:
                raise ValueError("ManualPartition: give either actions, or inputs with an axis")
            if not isinstance(actions, str) or not actions.strip():
                raise ValueError("ManualPartition: actions must be non-empty text")
            self._text = actions.rstrip("\n") + "\n"
            return
        if not axis or not isinstance(axis, str):
            raise ValueError("ManualPartition: axis (a mesh axis name) is required")
        if not inputs or not isinstance(inputs, dict):
            raise ValueError("ManualPartition: inputs must map argument names to dims")
        parts = []
        for name, dim in inputs.items():
            if not isinstance(dim, int) or isinstance(dim, bool) or dim < 0:
                raise ValueError(f"ManualPartition: dim of {name!r} must be an int >= 0, not {dim!r}")
            if any(c.isspace() for c in name) or "=" in name:
                raise ValueError(f"ManualPartition: argument name {name!r} holds a blank or '='")
            parts.append(f"{name}={dim}")
        self._text = f"manual {axis} " + " ".join(parts) + "\n"

    def schedule_text(self):
        """The tactic as PartIR actions (what `autopart apply --schedule` takes)."""
        return self._text

    def __repr__(self):
        return f"ManualPartition({self._text.strip()!r})"


class AutomaticPartition:
    """The automatic tactic: autopartd searches how to partition over `axes`
    (mesh axis names; None: every axis) after the manual tactics before it.
    Budgets:
    `episodes` (0: the search's default; only an episode budget makes the
    answer depend on nothing but the request), `time_limit_s` (seconds to
    the answer), `patience`
    (episodes without improvement).  `memory_limit`: bytes per device,
    "none", or None for the device's memory; `memory_margin`: the share of
    it kept free, 0 <= m < 1 (the search aims at limit x (1 - m)).  `groups`: lists of argument
    globs decided together; `hints`: hint lines as `autopart search --hints`
    takes (group / split / fix GLOB...).  `threads`: search threads (the
    answer does not depend on it)."""

    def __init__(self, axes=None, episodes=0, time_limit_s=0.0, patience=0, seed=0, memory_limit=None, groups=None,
                 hints="", threads=0, batch=0, memory_margin=0.0):
        if isinstance(axes, str):
            axes = [axes]
        if axes is None:
            axes = []
        elif not axes or not all(isinstance(a, str) and a for a in axes):
            raise ValueError("AutomaticPartition: axes must be a non-empty list of mesh axis names, or None (all)")
        if memory_limit not in (None, "none") and (not isinstance(memory_limit, int) or memory_limit <= 0):
            raise ValueError("AutomaticPartition: memory_limit is a positive number of bytes, 'none' or None")
        for name, value in (("episodes", episodes), ("patience", patience), ("threads", threads), ("seed", seed),
                            ("batch", batch)):
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"AutomaticPartition: {name} must be an int >= 0")
        if time_limit_s < 0:
            raise ValueError("AutomaticPartition: time_limit_s must be >= 0")
        if not isinstance(memory_margin, (int, float)) or not 0 <= memory_margin < 1:
            raise ValueError("AutomaticPartition: memory_margin is a share, 0 <= m < 1")
        self.axes = list(axes)
        self.episodes = episodes
        self.time_limit_s = float(time_limit_s)
        self.patience = patience
        self.seed = seed
        self.memory_limit = memory_limit
        self.memory_margin = float(memory_margin)
        lines = [hints.rstrip("\n")] if hints else []
        for g in groups or []:
            if isinstance(g, str) or not g or not all(isinstance(x, str) and x and not any(c.isspace() for c in x)
                                                      for x in g):
                raise ValueError("AutomaticPartition: groups are lists of argument globs without blanks")
            lines.append("group " + " ".join(g))
        self.hints = "\n".join(lines) + ("\n" if lines else "")
        self.threads = threads
        self.batch = batch

    def __repr__(self):
        return f"AutomaticPartition(axes={self.axes!r}, episodes={self.episodes}, seed={self.seed})"


# ------------------------------------------------------------------ results

def _spec(ps):
    """A wire PartitionSpec as JAX's: one entry per dim."""
    out = []
    for d in ps.dims:
        if len(d.axes) == 0:
            out.append(None)
        elif len(d.axes) == 1:
            out.append(d.axes[0])
        else:
            out.append(tuple(d.axes))
    return tuple(out)


class PartitionResult:
    """What partition() returns.

    schedule     the schedule as PartIR actions (feed it back to reproduce)
    in_specs     partition specs of the function's arguments, in order
    out_specs    partition specs of its results, in order
    shardings    {name: spec} for arguments and results (names as in the
                 module: JAX parameter paths, %argN, or "result #N")
    module       the device-local module (StableHLO with collectives)
    report       the cost report as a dict (collectives, cost, conflicts, ...)
    cost         {"runtime_s", "peak_memory_bytes", "fits", "device",
                 "hbm_bytes", "memory_limit_bytes" (what "fits" is held
                 to: the device's HBM unless the search had a memory limit;
                 None: no limit), "framework" (what counted the memory:
                 "xla" or "pytorch_eager"), ...}
    explanation  the search's reasons (a dict), None for manual schedules
    search_id, origin ("new", "joined" or "cache_hit")
    mesh         the mesh object given to partition() when it was a JAX
                 Mesh (or Mesh-like), else None
    mesh_axes    the mesh of the answer: ((name, size), ...), major first -
                 with devices=N, the mesh the search chose (make a JAX mesh
                 of it: jax.make_mesh(sizes, names))
    meshes       with devices=N: each mesh tried, the chosen first, as
                 {"mesh": ((name, size), ...), "runtime_s",
                 "peak_memory_bytes", "fits", "episodes", "chosen"}; else []

    The specs are plain tuples, as jax.sharding.PartitionSpec takes them
    (PartitionSpec(*spec)); partition_specs() and named_shardings() build
    JAX's objects, importing JAX only then.
    """

    def __init__(self, result, search_id="", origin="new", mesh=None):
        self.search_id = search_id
        self.origin = origin
        self.mesh = mesh
        self.schedule = result.schedule
        self.module = result.module
        self.core_view = result.core_view or None
        self.report = json.loads(result.report_json) if result.report_json else {}
        self.explanation = json.loads(result.explanation_json) if result.explanation_json else None
        self.in_specs, self.out_specs, self.shardings, self.types = [], [], {}, {}
        for s in result.shardings:
            spec = _spec(s.spec)
            (self.out_specs if s.kind == pb.Sharding.RESULT else self.in_specs).append(spec)
            self.shardings[s.name] = spec
            self.types[s.name] = s.type
        self.in_specs = tuple(self.in_specs)
        self.out_specs = tuple(self.out_specs)
        c = result.cost
        self.cost = {"device": c.device, "runtime_s": c.runtime_s, "compute_s": c.compute_s, "comm_s": c.comm_s,
                     "peak_memory_bytes": c.peak_memory_bytes, "hbm_bytes": c.hbm_bytes, "fits": c.fits,
                     "flops_per_device": c.flops_per_device} if result.HasField("cost") else {}
        if self.cost:
            # what fits is held to (answers stored before it was carried: the HBM)
            self.cost["memory_limit_bytes"] = (None if c.no_memory_limit else
                                               c.memory_limit_bytes or c.hbm_bytes)
            # which framework counted the memory (older answers: XLA, the only one then)
            self.cost["framework"] = self.report.get("cost", {}).get("memory", {}).get("framework", "xla")
        self.collectives = {x.kind: x.count for x in result.collectives}
        self.mesh_axes = tuple((a.name, a.size) for a in result.mesh.axes)
        self.search_stats = None
        self.meshes = []
        if result.HasField("search"):
            s = result.search
            self.search_stats = {"episodes": s.episodes, "best_episode": s.best_episode,
                                 "episodes_per_s": s.episodes_per_s, "wall_s": s.wall_s}
            self.meshes = [{"mesh": tuple((a.name, a.size) for a in m.mesh.axes), "runtime_s": m.runtime_s,
                            "peak_memory_bytes": m.peak_memory_bytes, "fits": m.fits, "episodes": m.episodes,
                            "chosen": m.chosen} for m in s.meshes]
        self.raw = result

    def partition_specs(self):
        """(in_specs, out_specs) as tuples of jax.sharding.PartitionSpec."""
        P = _jax_sharding().PartitionSpec
        return tuple(P(*s) for s in self.in_specs), tuple(P(*s) for s in self.out_specs)

    def named_shardings(self, mesh=None):
        """(in_shardings, out_shardings): a jax.sharding.NamedSharding per
        argument and per result on `mesh` (default: the Mesh given to
        partition()), as jax.jit(f, in_shardings=..., out_shardings=...)
        takes them."""
        mesh = mesh if mesh is not None else self.mesh
        if mesh is None:
            raise ValueError("named_shardings: no mesh (partition() was given a dict or text mesh: pass a "
                             "jax.sharding.Mesh)")
        js = _jax_sharding()
        return (tuple(js.NamedSharding(mesh, js.PartitionSpec(*s)) for s in self.in_specs),
                tuple(js.NamedSharding(mesh, js.PartitionSpec(*s)) for s in self.out_specs))

    def __repr__(self):
        return (f"PartitionResult(search_id={self.search_id!r}, origin={self.origin!r}, "
                f"runtime_s={self.cost.get('runtime_s')}, {len(self.in_specs)} in_specs)")


class Progress:
    """A search's best so far (given to partition()'s on_progress)."""

    def __init__(self, p):
        self.episodes = p.episodes
        self.best_runtime_s = p.best_runtime_s
        self.best_peak_memory_bytes = p.best_peak_memory_bytes
        self.best_schedule = p.best_schedule
        self.episodes_per_s = p.episodes_per_s
        self.elapsed_s = p.elapsed_s


def _jax_sharding():
    """jax.sharding, imported on first use only: the client works without JAX."""
    try:
        import jax.sharding
    except ImportError:
        raise ImportError("JAX is not installed: use the specs as tuples (in_specs, out_specs; "
                          "PartitionSpec(*spec) once JAX is there)") from None
    return jax.sharding


# ------------------------------------------------------------------- client

def _is_mesh_like(mesh):
    """A JAX Mesh, or anything shaped like one: `axis_names` and a
    `devices` array with a `shape` (JAX itself is never imported here)."""
    return hasattr(mesh, "axis_names") and hasattr(getattr(mesh, "devices", None), "shape")


def _mesh(mesh):
    if _is_mesh_like(mesh):
        names, shape = tuple(mesh.axis_names), tuple(mesh.devices.shape)
        if len(names) != len(shape):
            raise ValueError(f"mesh: {len(names)} axis_names but devices of shape {shape}")
        pairs = [(str(n), int(s)) for n, s in zip(names, shape)]
    elif isinstance(mesh, str):
        pairs = []
        for part in mesh.replace("{", "").replace("}", "").split(","):
            if not part.strip():
                continue
            name, sep, size = part.replace(":", "=").partition("=")
            if not sep:
                raise ValueError(f"mesh: {part!r} is not NAME=SIZE")
            pairs.append((name.strip(), int(size)))
    elif isinstance(mesh, dict):
        pairs = list(mesh.items())
    else:
        pairs = list(mesh)
    m = pb.Mesh()
    for name, size in pairs:
        if not isinstance(size, int) or isinstance(size, bool):
            raise ValueError(f"mesh: size of {name!r} must be an int")
        m.axes.add(name=name, size=size)
    return m


_FRAMEWORKS = {"xla": pb.FRAMEWORK_XLA, "pytorch-eager": pb.FRAMEWORK_PYTORCH_EAGER,
               "pytorch_eager": pb.FRAMEWORK_PYTORCH_EAGER}


def _device(device):
    if isinstance(device, dict):
        spec = pb.DeviceSpec(name=device["name"], hbm_bytes=device["hbm_bytes"],
                             hbm_bandwidth=device["hbm_bandwidth"], source=device.get("source", ""))
        for k, v in device["peak_flops"].items():
            setattr(spec, "peak_flops_" + k, v)
        for t in device["tiers"]:
            spec.tiers.add(name=t["name"], devices=t["devices"], bandwidth=t["bandwidth"], latency=t["latency"],
                           allreduce_bandwidth=t.get("allreduce_bandwidth", 0), torus_dims=t.get("torus_dims", 0))
        # what kernels and collectives reach (cost.h's device JSON keys)
        for k in ("matmul_efficiency", "matmul_tile", "hbm_efficiency", "kernel_overhead", "collective_overhead"):
            if k in device:
                setattr(spec, k, device[k])
        return pb.Device(custom=spec)
    return pb.Device(name=device)


class Client:
    """A connection to autopartd.  `server` is HOST:PORT; `token` the bearer
    token of the daemon's --token-file; `root_certificates` (PEM bytes)
    turns on TLS."""

    def __init__(self, server="127.0.0.1:50051", token=None, root_certificates=None, tls_name=None):
        options = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
        if tls_name:
            options.append(("grpc.ssl_target_name_override", tls_name))
        if root_certificates is not None:
            self._channel = grpc.secure_channel(server, grpc.ssl_channel_credentials(root_certificates), options)
        else:
            self._channel = grpc.insecure_channel(server, options)
        self._stub = pb_grpc.PartitionerStub(self._channel)
        self._metadata = [("authorization", "Bearer " + token)] if token else None
        self.server = server

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request, timeout):
        try:
            return method(request, timeout=timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise AutopartError(e.code().name, e.details() or "") from None

    def apply(self, request, timeout=None):
        """Apply RPC: an ApplyRequest in, PartitionResult out."""
        r = self._call(self._stub.Apply, request, timeout)
        return PartitionResult(r.result, r.search_id, _ORIGINS.get(r.origin, "?"))

    def search(self, request, timeout=None, on_progress=None, on_accepted=None):
        """Search RPC: follows the stream to its result."""
        try:
            accepted = None
            for ev in self._stub.Search(request, timeout=timeout, metadata=self._metadata):
                kind = ev.WhichOneof("event")
                if kind == "accepted":
                    accepted = ev.accepted
                    if on_accepted:
                        on_accepted(accepted.search_id, _ORIGINS.get(accepted.origin, "?"))
                elif kind == "progress" and on_progress:
                    on_progress(Progress(ev.progress))
                elif kind == "result":
                    return PartitionResult(ev.result, accepted.search_id if accepted else "",
                                           _ORIGINS.get(accepted.origin, "?") if accepted else "?")
        except grpc.RpcError as e:
            raise AutopartError(e.code().name, e.details() or "") from None
        raise AutopartError("UNKNOWN", "the search stream ended without a result")

    def get(self, search_id, include_result=False, timeout=None):
        r = self._call(self._stub.GetSearch, pb.GetSearchRequest(search_id=str(search_id),
                                                                 include_result=include_result), timeout)
        out = _summary(r.summary)
        out["history"] = [{"unix_ms": p.unix_ms, "episodes": p.episodes, "best_runtime_s": p.best_runtime_s,
                           "best_peak_memory_bytes": p.best_peak_memory_bytes} for p in r.history]
        out["best_schedule"] = r.best_schedule
        out["result"] = PartitionResult(r.result, r.summary.search_id, "cache_hit") if r.HasField("result") else None
        return out

    def list(self, status=None, client_label="", module_hash="", page_size=0, page_token="", timeout=None):
        """One page, newest first: (summaries, next_page_token)."""
        st = {v: k for k, v in _STATUSES.items()}.get(status, 0) if status else 0
        r = self._call(self._stub.ListSearches, pb.ListSearchesRequest(
            status=st, client_label=client_label, module_hash=module_hash, page_size=page_size,
            page_token=page_token), timeout)
        return [_summary(s) for s in r.searches], r.next_page_token

    def cancel(self, search_id, timeout=None):
        r = self._call(self._stub.CancelSearch, pb.CancelSearchRequest(search_id=str(search_id)), timeout)
        return _STATUSES.get(r.status, "?")

    def stats(self, timeout=None):
        r = self._call(self._stub.Stats, pb.StatsRequest(), timeout)
        return {f.name: getattr(r, f.name) for f in r.DESCRIPTOR.fields}


def _summary(s):
    return {"search_id": s.search_id, "kind": {pb.SEARCH: "search", pb.APPLY: "apply"}.get(s.kind, "?"),
            "status": _STATUSES.get(s.status, "?"), "key": s.key, "module_hash": s.module_hash,
            "module_name": s.module_name, "client_label": s.client_label, "mesh": s.mesh, "device": s.device,
            "axes": list(s.axes), "created_unix_ms": s.created_unix_ms, "started_unix_ms": s.started_unix_ms,
            "finished_unix_ms": s.finished_unix_ms, "episodes": s.episodes, "best_runtime_s": s.best_runtime_s,
            "best_peak_memory_bytes": s.best_peak_memory_bytes, "cache_hits": s.cache_hits, "error": s.error,
            "attempts": s.attempts}


def partition(module_text, mesh, schedule, *, device="h100", server="127.0.0.1:50051", client=None,
              client_label="python", module_name="", func="", overlap=0.0, want_core_view=False, timeout=None,
              on_progress=None, token=None, devices=0, axes_names=None, framework="xla"):
    """Partitions module_text (StableHLO or XLA HLO text) over mesh ({"batch":
    8, "model": 4}, [("batch", 8), ...], "batch=8,model=4", or a
    jax.sharding.Mesh: anything with `axis_names` and `devices.shape`) with
    schedule: a list of ManualPartition tactics, optionally followed by one
    AutomaticPartition.  Returns a PartitionResult (with a Mesh, its
    named_shardings() are ready for jax.jit); raises AutopartError.

    devices=N instead of a mesh (mesh=None): the search also chooses the
    mesh, every way to arrange N devices in 1 to 4 axes the program can use,
    its axes named by their role (data, fsdp, model, expert), or exactly the
    axes of axes_names (["data", "model"]), sizes chosen; the schedule then
    ends with an AutomaticPartition, and ManualPartition tactics need
    axes_names.  The answer's mesh_axes say which mesh, meshes what each
    mesh tried came to.

    framework: what runs the step, for its peak memory (the step time is
    the same): "xla" (XLA's buffer assignment of the fused step) or
    "pytorch-eager" (eager PyTorch: every op's output a tensor, ops as
    written); it is the memory the search's limit holds, and the report's.

    `module_name` names the module in listings and messages (default: the
    module's own @name, as JAX exports it: jit_train_step); `client_label`
    groups requests in listings and in the daemon's fair queues."""
    if isinstance(schedule, (ManualPartition, AutomaticPartition)):
        schedule = [schedule]
    schedule = list(schedule)
    autos = [i for i, t in enumerate(schedule) if isinstance(t, AutomaticPartition)]
    for t in schedule:
        if not isinstance(t, (ManualPartition, AutomaticPartition)):
            raise TypeError(f"schedule: {t!r} is not a ManualPartition or AutomaticPartition")
    if len(autos) > 1 or (autos and autos[0] != len(schedule) - 1):
        raise ValueError("schedule: one AutomaticPartition at most, and last (manual tactics go before it)")
    manual = "".join(t.schedule_text() for t in schedule if isinstance(t, ManualPartition))
    wire_framework = _FRAMEWORKS.get(str(framework).lower())
    if wire_framework is None:
        raise ValueError(f"partition: framework {framework!r} is not one of 'xla', 'pytorch-eager'")
    module = pb.Module(text=module_text, name=module_name, func=func)
    if devices:
        if mesh is not None:
            raise ValueError("partition: mesh and devices are exclusive (with devices the search chooses the mesh)")
        if not isinstance(devices, int) or devices < 2:
            raise ValueError("partition: devices is a number of devices, at least 2")
        if not autos:
            raise ValueError("partition: devices needs an AutomaticPartition (the search chooses the mesh)")
        if isinstance(axes_names, str):
            axes_names = [axes_names]
        wire_mesh = pb.Mesh()
    else:
        if axes_names:
            raise ValueError("partition: axes_names go with devices")
        wire_mesh = _mesh(mesh)
    if not autos and not manual:
        raise ValueError("schedule: no tactic")
    own = client is None
    c = client or Client(server, token=token)
    try:
        res = _request(c, schedule, autos, manual, module, wire_mesh, device, overlap, want_core_view,
                       client_label, timeout, on_progress, devices, list(axes_names or []), wire_framework)
    finally:
        if own:
            c.close()
    res.mesh = mesh if _is_mesh_like(mesh) else None
    return res


def _request(c, schedule, autos, manual, module, mesh, device, overlap, want_core_view, client_label, timeout,
             on_progress, devices=0, axes_names=(), framework=0):
    if not autos:
        req = pb.ApplyRequest(module=module, mesh=mesh, device=_device(device), schedule=manual,
                              overlap=overlap, want_core_view=want_core_view, client_label=client_label,
                              framework=framework)
        return c.apply(req, timeout=timeout)
    a = schedule[autos[0]]
    req = pb.SearchRequest(module=module, mesh=mesh, device=_device(device), manual_schedule=manual,
                           axes=a.axes, episodes=a.episodes, time_limit_s=a.time_limit_s,
                           patience_episodes=a.patience, threads=a.threads, seed=a.seed, hints=a.hints,
                           batch=a.batch, client_label=client_label, want_core_view=want_core_view,
                           overlap=overlap, devices=devices, axes_names=axes_names,
                           memory_margin=a.memory_margin, framework=framework)
    if a.memory_limit == "none":
        req.no_memory_limit = True
    elif a.memory_limit:
        req.memory_limit_bytes = a.memory_limit
    return c.search(req, timeout=timeout, on_progress=on_progress)
