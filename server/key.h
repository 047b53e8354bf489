/*
 * key.h - the store key of autopartd's answers, defined once: every field
 * of an Apply or Search request either changes the answer, and then a row
 * of SRV_KEY_FIELDS hashes it into the key, or does not, and then a row of
 * SRV_KEY_IGNORED says why.  work.c expands SRV_KEY_FIELDS into the code
 * that computes the key, key.c expands SRV_KEY_IGNORED into the fields the
 * raw hash leaves out, and tests/service/test_key.c walks the protobuf-c
 * descriptors of both requests and fails on a field that is in neither
 * table (a field added to the .proto and forgotten here would otherwise
 * serve a stale answer for ever) or on a path here the .proto lacks.
 *
 * SRV_KEY_FIELDS(X): X(NAME, APPLY, SEARCH, HASH), in the order they are
 * hashed (an order change changes every key: bump `key` in
 * SRV_KEY_VERSIONS).  NAME is what the field is hashed under; APPLY and
 * SEARCH the request fields it stands for in each method, as dotted paths
 * through the .proto separated by spaces ("" when that method's key has
 * no such field); HASH the statement that hashes it, run after the request
 * is prepared, with `h` (srv_sha *), `n` (NAME), `w` (the prepared
 * srv_work), `c` (the common_req of work.c) and `s` (the SearchRequest;
 * NULL for Apply) in scope.  A value hashed is the canonical one where the
 * request has several spellings (the printed module, the formatted mesh,
 * the device's full spec, the default memory limit resolved).
 *
 * SRV_KEY_IGNORED(X): X(APPLY, SEARCH, WHY), fields that do not change the
 * answer.  Top-level ones are also left out of the raw hash, so that
 * requests differing only in them share one cache entry.
 */
#ifndef SRV_KEY_H
#define SRV_KEY_H

#define SRV_KEY_DEVICE_PATHS                                                                                          \
    "device.name device.custom.name device.custom.peak_flops_f32 device.custom.peak_flops_bf16 "                      \
    "device.custom.peak_flops_f16 device.custom.peak_flops_f8 device.custom.peak_flops_int8 "                         \
    "device.custom.peak_flops_vector device.custom.hbm_bytes device.custom.hbm_bandwidth device.custom.tiers.name "   \
    "device.custom.tiers.devices device.custom.tiers.bandwidth device.custom.tiers.latency "                          \
    "device.custom.tiers.allreduce_bandwidth device.custom.tiers.torus_dims device.custom.matmul_efficiency "        \
    "device.custom.matmul_tile device.custom.hbm_efficiency device.custom.kernel_overhead "                          \
    "device.custom.collective_overhead"

#define SRV_KEY_FIELDS(X)                                                                                             \
    X("module", "module.text module.format", "module.text module.format",                                             \
      srv_sha_field(h, n, w->module_hash, STORE_KEY_BYTES))                                                           \
    X("func", "module.func", "module.func", srv_sha_str(h, n, c->func))                                               \
    X("mesh", "mesh.axes.name mesh.axes.size", "mesh.axes.name mesh.axes.size", srv_sha_str(h, n, w->mesh_text))      \
    X("device", SRV_KEY_DEVICE_PATHS, SRV_KEY_DEVICE_PATHS, srv_key_hash_device(h, &w->dev))                          \
    X("schedule", "schedule", "manual_schedule", srv_sha_str(h, n, c->schedule))                                      \
    X("import", "import_shardings", "import_shardings", srv_sha_i64(h, n, c->import))                                 \
    X("overlap", "overlap", "overlap", srv_sha_f64(h, n, c->overlap))                                                 \
    X("framework", "framework", "framework", srv_sha_i64(h, n, c->framework))                                        \
    X("axis", "", "axes", srv_key_hash_axes(h, n, w))                                                                 \
    X("memory_limit", "", "memory_limit_bytes no_memory_limit memory_margin",                                         \
      srv_key_hash_memory_limit(h, n, s, &w->dev))                                                                    \
    X("episodes", "", "episodes", srv_sha_i64(h, n, s->episodes))                                                     \
    X("time_limit", "", "time_limit_s", srv_sha_f64(h, n, s->time_limit_s))                                           \
    X("patience", "", "patience_episodes", srv_sha_i64(h, n, s->patience_episodes))                                   \
    X("seed", "", "seed", srv_sha_i64(h, n, (int64_t)s->seed))                                                        \
    X("hints", "", "hints", srv_sha_str(h, n, s->hints))                                                              \
    X("batch", "", "batch", srv_sha_i64(h, n, s->batch))                                                              \
    X("core_view", "want_core_view", "want_core_view", srv_sha_i64(h, n, c->core_view))                              \
    X("devices", "", "devices axes_names", srv_key_hash_devices(h, n, s))

#define SRV_KEY_IGNORED(X)                                                                                            \
    X("client_label", "client_label", "a label for listings and fairness")                                            \
    X("", "threads",                                                                                                  \
      "workers sharing one tree: under an episode budget the answer depends on the seed only (test_search); "         \
      "under a time budget it is not reproducible at any thread count")                                               \
    X("module.name", "module.name",                                                                                   \
      "a name for messages and listings: the engine runs on the canonical text, and an answer holds no file name")    \
    X("device.custom.source", "device.custom.source", "where the device's figures come from, for people")

#endif /* SRV_KEY_H */
