"""autopartd's gRPC port spoken to below the gRPC libraries, with a raw
HTTP/2 client (Debian's python3-h2): what a conforming client never sends
but a hostile one may.  Each case asserts the grpc-status the daemon
answers, and that it goes on serving.

Run by ctest with AUTOPARTD=<autopartd>."""

import os
import re
import socket
import struct
import subprocess
import tempfile
import time
import unittest

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


INVALID_ARGUMENT, NOT_FOUND = 3, 5


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

    def test_still_serving(self):
        st, _, _ = call(self.d.port, "/grpc.health.v1.Health/Check", [frame(b"")])
        self.assertEqual(st, 0)


if __name__ == "__main__":
    unittest.main()
