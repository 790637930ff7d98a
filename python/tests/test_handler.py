"""The trace handler against a real Kinetoscope server, without torch.

The Rust test `server/tests/it/python.rs` starts the servers, installs the
package into a fresh virtualenv (`pip install ./python`) and runs this file
with the environment below. A stand-in profiler has `export_chrome_trace`
and `step_num`, the whole interface `on_trace_ready` uses.

  KINETOSCOPE_TEST_SERVER  an open server
  KINETOSCOPE_TEST_PRIVATE a server in tokens mode
  KINETOSCOPE_TEST_TOKEN   an upload token of the private server
  KINETOSCOPE_TEST_TRACE   a small trace (plain JSON)
"""

import contextlib
import io
import json
import os
import shutil
import socket
import tempfile
import time
import unittest
import urllib.request

import kinetoscope

SERVER = os.environ["KINETOSCOPE_TEST_SERVER"]
PRIVATE = os.environ["KINETOSCOPE_TEST_PRIVATE"]
TOKEN = os.environ["KINETOSCOPE_TEST_TOKEN"]
TRACE = os.environ["KINETOSCOPE_TEST_TRACE"]


class StandIn:
    """What torch.profiler.profile hands to on_trace_ready."""

    def __init__(self, step_num=7):
        self.step_num = step_num
        self.exports = []

    def export_chrome_trace(self, path):
        shutil.copyfile(TRACE, path)
        self.exports.append(path)


def get(server, path, token=None):
    req = urllib.request.Request(server + path)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read().decode())


def call(handler, prof):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        link = handler(prof)
    return link, out.getvalue(), err.getvalue()


class TraceHandler(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)

    def test_uploads_prints_the_link_and_removes_the_file(self):
        handler = kinetoscope.trace_handler(SERVER, name="py-handler", tags=("ci", "fp8"), dir=self.dir)
        link, out, err = call(handler, StandIn())
        self.assertIsNotNone(link, err)
        self.assertIn(link, out)
        self.assertTrue(link.startswith(SERVER + "/runs/"), link)
        run = get(SERVER, "/api/runs/" + link.rsplit("/", 1)[1])
        self.assertEqual(run["name"], "py-handler")
        self.assertEqual(run["tags"], ["ci", "fp8"])
        self.assertEqual(len(run["ranks"]), 1)
        self.assertTrue(run["ranks"][0]["file"].startswith("py-handler-"), run["ranks"][0])
        expected = "zstd" if kinetoscope._zstd is not None else "gzip"
        self.assertEqual(run["ranks"][0]["encoding"], expected)
        self.assertEqual(os.listdir(self.dir), [], "the uploaded trace is removed")

    def test_gzip_without_zstandard(self):
        saved = kinetoscope._zstd
        kinetoscope._zstd = None
        try:
            link, _, err = call(kinetoscope.trace_handler(SERVER, dir=self.dir), StandIn())
        finally:
            kinetoscope._zstd = saved
        self.assertIsNotNone(link, err)
        run = get(SERVER, "/api/runs/" + link.rsplit("/", 1)[1])
        self.assertEqual(run["ranks"][0]["encoding"], "gzip")

    def test_an_unreachable_server_warns_and_keeps_the_trace(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        handler = kinetoscope.trace_handler("http://127.0.0.1:%d" % port, dir=self.dir)
        link, _, err = call(handler, StandIn())
        self.assertIsNone(link)
        self.assertIn("warning: could not upload", err)
        kept = [os.path.join(self.dir, f) for f in os.listdir(self.dir)]
        self.assertEqual(len(kept), 1, kept)
        self.assertIn(kept[0], err, "the warning gives the kept trace's path")

    def test_a_failing_export_never_raises(self):
        class Broken:
            def export_chrome_trace(self, path):
                raise RuntimeError("the profiler has nothing")

        link, _, err = call(kinetoscope.trace_handler(SERVER, dir=self.dir), Broken())
        self.assertIsNone(link)
        self.assertIn("RuntimeError: the profiler has nothing", err)

    def test_a_token(self):
        # Without it the private server refuses; the trace stays.
        link, _, err = call(kinetoscope.trace_handler(PRIVATE, dir=self.dir), StandIn())
        self.assertIsNone(link)
        self.assertIn("refused the trace (401)", err)
        self.assertEqual(len(os.listdir(self.dir)), 1)
        # With it the upload goes through.
        link, _, err = call(kinetoscope.trace_handler(PRIVATE, token=TOKEN, dir=self.dir), StandIn())
        self.assertIsNotNone(link, err)
        run = get(PRIVATE, "/api/runs/" + link.rsplit("/", 1)[1], TOKEN)
        self.assertEqual(run["status"] in ("queued", "analyzing", "done"), True, run)

    def test_the_ranks_of_one_cycle_are_one_run(self):
        os.environ["MASTER_ADDR"] = "10.0.0.%d" % (os.getpid() % 250)
        os.environ["MASTER_PORT"] = str(int(time.time() * 1000) % 60000)
        try:
            links = []
            for r in range(3):
                h = kinetoscope.trace_handler(SERVER, name="tp3", rank=r, dir=self.dir)
                link, out, err = call(h, StandIn(step_num=12))
                self.assertIsNotNone(link, err)
                self.assertIn("(rank %d)" % r, out)
                links.append(link)
            self.assertEqual(len(set(links)), 1, links)
            run = get(SERVER, "/api/runs/" + links[0].rsplit("/", 1)[1])
            self.assertEqual([k["rank"] for k in run["ranks"]], [0, 1, 2])
            # The next cycle is another run.
            h = kinetoscope.trace_handler(SERVER, name="tp3", rank=0, dir=self.dir)
            call(h, StandIn(step_num=12))
            link2, _, err = call(h, StandIn(step_num=24))
            self.assertNotEqual(link2, links[0], err)
        finally:
            del os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]

    def test_a_redirect_is_not_followed_and_the_trace_is_kept(self):
        # A plain-http address behind a redirect: the POST is not turned
        # into a GET, the token does not go to where it points, and nothing
        # counts as uploaded.
        import http.server
        import threading

        seen = []

        class Target(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append(self.headers.get("Authorization"))
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"ok": true}')

            do_POST = do_GET

            def log_message(self, *a):
                pass

        target = http.server.HTTPServer(("127.0.0.1", 0), Target)
        where = "http://127.0.0.1:%d/api/runs" % target.server_port

        class Redirect(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                self.send_response(302)
                self.send_header("Location", where)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        redirect = http.server.HTTPServer(("127.0.0.1", 0), Redirect)
        for srv in (target, redirect):
            threading.Thread(target=srv.serve_forever, daemon=True).start()
            self.addCleanup(srv.server_close)
            self.addCleanup(srv.shutdown)
        handler = kinetoscope.trace_handler(
            "http://127.0.0.1:%d" % redirect.server_port, token="kst_secret", dir=self.dir
        )
        link, out, err = call(handler, StandIn())
        self.assertIsNone(link)
        self.assertEqual(out, "")
        self.assertIn("redirect", err)
        self.assertEqual(seen, [])
        self.assertEqual(len(os.listdir(self.dir)), 1, "the trace is kept")

        # A 2xx that is not a created run is no success either.
        handler = kinetoscope.trace_handler(
            "http://127.0.0.1:%d" % target.server_port, name="other", dir=self.dir
        )
        link, out, err = call(handler, StandIn())
        self.assertIsNone(link)
        self.assertIn("without a run id", err)
        self.assertEqual(len(os.listdir(self.dir)), 2)
        self.assertEqual(seen, [None], "only the direct upload reached it, without a token")

    def test_the_version_is_the_servers(self):
        self.assertEqual(kinetoscope.__version__, os.environ["KINETOSCOPE_TEST_VERSION"])


if __name__ == "__main__":
    unittest.main()
