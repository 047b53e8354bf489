"""autopartd's /metrics, read as Prometheus reads it: a real daemon
(ephemeral ports, temporary store, a bearer token), real calls through the
Python client, and the page parsed by python3-prometheus-client's parser.
The figures must say what happened: calls by method and status, a cache
hit from memory, a search's duration, the store's operations, the queues.

Run by ctest with PYTHONPATH=<build>/python, AUTOPARTD=<autopartd> and
AUTOPART_SOURCE=<source dir>."""

import os
import re
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

import autopart

SOURCE = os.environ["AUTOPART_SOURCE"]
DAEMON = os.environ["AUTOPARTD"]
MODELGEN = os.path.join(SOURCE, "tests", "models", "modelgen")
TOKEN = "metrics-s3cret"


def generate(config):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.mlir")
        subprocess.run([sys.executable, MODELGEN, "transformer", "--config", config, "-q", "-o", path], check=True)
        with open(path) as f:
            return f.read()


def scrape(port, token=TOKEN):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.headers.get("Content-Type"), r.read().decode()


def families(text):
    """{name: {labels tuple: value}} for every sample, and {name: type}."""
    samples, types = {}, {}
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        for s in fam.samples:
            samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return samples, types


def value(samples, name, **labels):
    return samples[name][tuple(sorted(labels.items()))]


class MetricsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory(prefix="autopart-metrics-")
        token = os.path.join(cls.dir.name, "token")
        with open(token, "w") as f:
            f.write(TOKEN + "\n")
        cls.log = open(os.path.join(cls.dir.name, "log"), "w")
        cls.proc = subprocess.Popen([DAEMON, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--db",
                                     os.path.join(cls.dir.name, "store.db"), "--token-file", token],
                                    stdout=subprocess.PIPE, stderr=cls.log, text=True)
        grpc_line, http_line = cls.proc.stdout.readline(), cls.proc.stdout.readline()
        cls.server = "127.0.0.1:" + re.search(r" port (\d+)", grpc_line).group(1)
        cls.http = int(re.search(r" port (\d+)", http_line).group(1))
        cls.tiny = generate("tiny")

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        assert cls.proc.wait(timeout=60) == 0
        cls.proc.stdout.close()
        cls.log.close()
        cls.dir.cleanup()

    def test_what_happened_is_counted(self):
        # the same token rules as the API
        with self.assertRaises(urllib.error.HTTPError) as e:
            scrape(self.http, token=None)
        self.assertEqual(e.exception.code, 401)
        with self.assertRaises(urllib.error.HTTPError) as e:
            scrape(self.http, token="wrong")
        self.assertEqual(e.exception.code, 401)

        ctype, text = scrape(self.http)
        self.assertTrue(ctype.startswith("text/plain; version=0.0.4"), ctype)
        before, _ = families(text)
        self.assertEqual(value(before, "autopartd_grpc_server_handled_total", grpc_service="autopart.v1.Partitioner",
                               grpc_method="Apply", grpc_code="OK"), 0)

        with autopart.Client(self.server, token=TOKEN) as c:
            sched = [autopart.ManualPartition(axis="batch", inputs={"batch['inputs']": 0, "batch['targets']": 0})]
            first = autopart.partition(self.tiny, {"batch": 2}, sched, client=c, device="tpu_v3")
            # again: from the store (then kept in memory), and from memory
            again = autopart.partition(self.tiny, {"batch": 2}, sched, client=c, device="tpu_v3")
            third = autopart.partition(self.tiny, {"batch": 2}, sched, client=c, device="tpu_v3")
            self.assertEqual((first.origin, again.origin, third.origin), ("new", "cache_hit", "cache_hit"))
            with self.assertRaises(autopart.AutopartError):
                autopart.partition(self.tiny, {"batch": 3}, sched, client=c)
            found = autopart.partition(self.tiny, {"batch": 2, "model": 2},
                                       [autopart.AutomaticPartition(axes=["model"], episodes=200, seed=3)],
                                       client=c, device="tpu_v3")
            self.assertEqual(found.search_stats["episodes"], 200)
            c.stats()
        with self.assertRaises(autopart.AutopartError) as e:  # no token: refused by the gRPC layer, counted
            autopart.Client(self.server).stats()
        self.assertEqual(e.exception.code, "UNAUTHENTICATED")

        _, text = scrape(self.http)
        m, types = families(text)
        self.assertEqual(types["autopartd_grpc_server_handled"], "counter")
        self.assertEqual(types["autopartd_grpc_server_handling_seconds"], "histogram")

        def handled(method, code, service="autopart.v1.Partitioner"):
            return value(m, "autopartd_grpc_server_handled_total", grpc_service=service, grpc_method=method,
                         grpc_code=code)

        self.assertEqual(handled("Apply", "OK"), 3)
        self.assertEqual(handled("Apply", "INVALID_ARGUMENT"), 1)
        self.assertEqual(handled("Search", "OK"), 1)
        self.assertEqual(handled("Stats", "OK"), 1)
        self.assertEqual(handled("Stats", "UNAUTHENTICATED"), 1)
        self.assertEqual(value(m, "autopartd_grpc_server_handling_seconds_count",
                               grpc_service="autopart.v1.Partitioner", grpc_method="Apply"), 4)
        self.assertEqual(value(m, "autopartd_cache_hits_total", source="store"), 1)
        self.assertEqual(value(m, "autopartd_cache_hits_total", source="memory"), 1)
        self.assertEqual(value(m, "autopartd_searches_total", outcome="done"), 1)
        self.assertEqual(value(m, "autopartd_search_duration_seconds_count"), 1)
        self.assertGreater(value(m, "autopartd_search_duration_seconds_sum"), 0)
        self.assertEqual(value(m, "autopartd_search_episodes_per_second_count"), 1)
        self.assertEqual(value(m, "autopartd_searches_running"), 0)
        self.assertEqual(value(m, "autopartd_workers", pool="search"), 2)
        self.assertEqual(value(m, "autopartd_queue_depth", pool="search"), 0)
        self.assertGreater(value(m, "autopartd_store_operation_seconds_count"), 5)
        self.assertEqual(value(m, "autopartd_store_errors_total"), 0)
        self.assertEqual(value(m, "autopartd_store_up"), 1)
        self.assertGreater(value(m, "process_resident_memory_bytes"), 1 << 20)
        # every histogram: cumulative buckets, +Inf equal to the count
        for name, t in types.items():
            if t != "histogram":
                continue
            series = {}
            for labels, v in m[name + "_bucket"].items():
                le = dict(labels)["le"]
                rest = tuple(kv for kv in labels if kv[0] != "le")
                series.setdefault(rest, []).append((float(le), v))
            for rest, buckets in series.items():
                buckets.sort()
                counts = [v for _, v in buckets]
                self.assertEqual(counts, sorted(counts), (name, rest))
                self.assertEqual(buckets[-1][0], float("inf"))
                self.assertEqual(counts[-1], m[name + "_count"][rest], (name, rest))


if __name__ == "__main__":
    unittest.main()
