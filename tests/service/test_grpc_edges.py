"""autopartd's gRPC port spoken to below the gRPC libraries, with a raw
HTTP/2 client (Debian's python3-h2): what a conforming client never sends
but a hostile one may.  Each case asserts the grpc-status the daemon
answers, and that it goes on serving.

Run by ctest with AUTOPARTD=<autopartd>."""

import os
import re
import gzip
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import zlib

import h2.config
import h2.connection
import h2.events

DAEMON = os.environ["AUTOPARTD"]
GET = "/autopart.v1.Partitioner/GetSearch"


def frame(msg, compressed=False, length=None):
    return bytes([1 if compressed else 0]) + struct.pack(">I", len(msg) if length is None else length) + msg


class Daemon:
    def __init__(self, *extra):
        self.dir = tempfile.mkdtemp(prefix="autopart-h2-")
        self.db = os.path.join(self.dir, "store.db")
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.proc = subprocess.Popen([DAEMON, "--listen", "127.0.0.1:0", "--db", self.db, *extra],
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        m = re.search(r" port (\d+)", self.proc.stdout.readline())
        if not m:
            raise RuntimeError("autopartd did not start")
        self.port = int(m.group(1))

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


def call(port, path, data_frames, headers=(), timeout=10):
    """One call: HEADERS, the DATA frames (the last ends the stream); returns
    (grpc-status or None, grpc-message, RST_STREAM error code or None)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    c.initiate_connection()
    sid = c.get_next_available_stream_id()
    c.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "127.0.0.1"),
                         ("content-type", "application/grpc"), ("te", "trailers"), *headers],
                   end_stream=not data_frames)
    for i, d in enumerate(data_frames):
        c.send_data(sid, d, end_stream=i == len(data_frames) - 1)
    s.sendall(c.data_to_send())
    hdrs, reset = {}, None
    t0 = time.time()
    try:
        while time.time() - t0 < timeout and reset is None and "grpc-status" not in hdrs:
            data = s.recv(65536)
            if not data:
                break
            for ev in c.receive_data(data):
                if isinstance(ev, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                    hdrs.update(dict(ev.headers))
                elif isinstance(ev, h2.events.DataReceived):
                    c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamReset):
                    reset = ev.error_code
            s.sendall(c.data_to_send())
    except socket.timeout:
        pass
    s.close()
    st = hdrs.get("grpc-status")
    return (int(st) if st is not None else None), hdrs.get("grpc-message", ""), reset


def status_kb(pid, field):
    """VmRSS (now) or VmHWM (the peak so far) of a process, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError("no " + field)


def frames(msg, size=16384):
    """A message cut into DATA frames of the default largest size."""
    return [msg[i:i + size] for i in range(0, len(msg), size)]


def stream_body(port, path, claim, most, timeout=30):
    """A message whose prefix claims `claim` bytes, then up to `most` bytes of
    its body as fast as flow control lets them go, the stream left open, and
    a wait for the answer until `timeout`.  Returns (bytes sent, RST_STREAM
    code or None, grpc-status or None)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    c.initiate_connection()
    sid = c.get_next_available_stream_id()
    c.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "127.0.0.1"),
                         ("content-type", "application/grpc"), ("te", "trailers")])
    pending, sent, reset, status = frame(b"", length=claim), 0, None, None
    chunk = bytes(16384)
    t0 = time.time()
    while reset is None and status is None and time.time() - t0 < timeout:
        while sent < most:
            room = min(c.local_flow_control_window(sid), c.max_outbound_frame_size, most - sent)
            if room <= 0:
                break
            data = (pending + chunk)[:room]
            pending = b""
            c.send_data(sid, data)
            sent += len(data)
        s.sendall(c.data_to_send())
        if select.select([s], [], [], 0.2)[0]:
            data = s.recv(1 << 16)
            if not data:
                break
            for ev in c.receive_data(data):
                if isinstance(ev, h2.events.StreamReset):
                    reset = ev.error_code
                elif isinstance(ev, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                    status = dict(ev.headers).get("grpc-status", status)
            s.sendall(c.data_to_send())
    s.close()
    return sent, reset, (int(status) if status is not None else None)


INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED = 3, 5, 8
ENHANCE_YOUR_CALM = 11
GZIP = [("grpc-encoding", "gzip")]


class EdgesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon()

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def test_one_message_per_call(self):
        msg = b"\x0a\x01\x31"  # search_id "1"
        st, text, _ = call(self.d.port, GET, [frame(msg)])
        self.assertEqual((st, text), (NOT_FOUND, "no search 1 in the store"))
        st, text, _ = call(self.d.port, GET, [frame(msg), frame(msg)])
        self.assertEqual(st, INVALID_ARGUMENT, text)
        self.assertIn("more than one request message", text)
        st, text, _ = call(self.d.port, GET, [frame(msg) + frame(msg)])  # two in one DATA frame
        self.assertEqual(st, INVALID_ARGUMENT, text)

    def test_nul_and_bad_utf8(self):
        st, text, _ = call(self.d.port, GET, [frame(b"\x0a\x021\x00")])
        self.assertEqual(st, INVALID_ARGUMENT, text)
        self.assertIn("search_id: holds a NUL byte", text)
        st, text, _ = call(self.d.port, GET, [frame(b"\x0a\x02\xff\xfe")])
        self.assertEqual(st, INVALID_ARGUMENT, text)
        self.assertIn("not valid UTF-8", text)

    def test_message_cut_short(self):
        # gRPC 1.51 drops a message the end of the stream cuts short, and
        # the daemon is handed a call with no message (rpc_grpc.c): what
        # it can say is that no complete message came, not RESOURCE_EXHAUSTED
        for body in (b"", b"abc"):
            st, text, reset = call(self.d.port, GET, [frame(body, length=2**31)])
            self.assertEqual((st, reset), (INVALID_ARGUMENT, None), text)
            self.assertIn("no complete request message", text)
            self.assertIn("shorter than its length prefix", text)

    def test_compressed_requests(self):
        msg = b"\x0a\x01\x31"  # search_id "1"
        st, text, _ = call(self.d.port, GET, [frame(gzip.compress(msg), compressed=True)], headers=GZIP)
        self.assertEqual((st, text), (NOT_FOUND, "no search 1 in the store"))
        st, text, _ = call(self.d.port, GET, [frame(zlib.compress(msg), compressed=True)],
                           headers=[("grpc-encoding", "deflate")])
        self.assertEqual((st, text), (NOT_FOUND, "no search 1 in the store"))
        # bytes that do not inflate: a grpc-status, not a stream reset
        st, text, reset = call(self.d.port, GET, [frame(b"garbage!", compressed=True)], headers=GZIP)
        self.assertEqual((st, reset), (INVALID_ARGUMENT, None), text)
        self.assertIn("not valid gzip data", text)
        st, text, _ = call(self.d.port, GET, [frame(gzip.compress(msg)[:-6], compressed=True)], headers=GZIP)
        self.assertEqual(st, INVALID_ARGUMENT, text)
        self.assertIn("cut short", text)
        st, text, _ = call(self.d.port, GET, [frame(gzip.compress(msg) + b"zz", compressed=True)], headers=GZIP)
        self.assertEqual(st, INVALID_ARGUMENT, text)
        self.assertIn("2 bytes after its compressed data", text)

    def test_still_serving(self):
        st, _, _ = call(self.d.port, "/grpc.health.v1.Health/Check", [frame(b"")])
        self.assertEqual(st, 0)


class LimitsTest(unittest.TestCase):
    """--max-message-mb 1 --rpc-memory-mb 16: the bound holds for what a
    request inflates to and for what gRPC buffers before it has a message."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon("--max-message-mb", "1", "--rpc-memory-mb", "16")

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def test_gzip_bomb(self):
        # 60 MiB of search_id in 60 KB of gzip: refused once 1 MiB is
        # inflated (gRPC's own inflation went to the end: +66 MB of peak RSS)
        z = zlib.compressobj(9, zlib.DEFLATED, 31)
        bomb = z.compress(b"\x0a\x80\x80\x80\x1e") + b"".join(z.compress(bytes(1 << 20)) for _ in range(60))
        bomb += z.flush()
        self.assertLess(len(bomb), 64 << 10)
        peak = status_kb(self.d.proc.pid, "VmHWM")
        st, text, reset = call(self.d.port, GET, frames(frame(bomb, compressed=True)), headers=GZIP)
        self.assertEqual((st, reset), (RESOURCE_EXHAUSTED, None), text)
        self.assertIn("inflates (gzip) to more than the largest message, 1048576 bytes", text)
        self.assertLess(status_kb(self.d.proc.pid, "VmHWM") - peak, 16 << 10)
        # 1 MiB inflated is still taken
        body = b"\x0a\xfc\xff\x3f" + b"1" * ((1 << 20) - 4)
        self.assertEqual(len(body), 1 << 20)
        st, text, _ = call(self.d.port, GET, [frame(gzip.compress(body), compressed=True)], headers=GZIP)
        self.assertEqual(st, INVALID_ARGUMENT, text)
        self.assertIn("is not a search id", text)

    def test_huge_prefix_is_not_buffered(self):
        # gRPC 1.51 opens the stream's window as far as the prefix claims
        # and keeps what comes; its resource quota (--rpc-memory-mb) resets
        # the stream once it holds more than that
        before = status_kb(self.d.proc.pid, "VmRSS")
        sent, reset, status = stream_body(self.d.port, GET, claim=1 << 30, most=96 << 20)
        self.assertTrue(reset == ENHANCE_YOUR_CALM or status == RESOURCE_EXHAUSTED, (sent, reset, status))
        self.assertLess(sent, 64 << 20)
        self.assertLess(status_kb(self.d.proc.pid, "VmRSS") - before, 48 << 10)
        st, _, _ = call(self.d.port, "/grpc.health.v1.Health/Check", [frame(b"")])
        self.assertEqual(st, 0)


if __name__ == "__main__":
    unittest.main()
