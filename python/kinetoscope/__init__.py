"""Upload torch.profiler traces to a Kinetoscope server.

``trace_handler`` makes the ``on_trace_ready`` callable of
``torch.profiler.profile``: it exports the finished trace, compresses it
(zstd when the ``zstandard`` module is present, else gzip), uploads it,
and prints the run's link. It never raises into the training loop.
"""

import gzip
import hashlib
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

__version__ = "0.1.0"
__all__ = ["trace_handler", "__version__"]

try:  # optional: smaller and faster than gzip
    import zstandard as _zstd
except ImportError:  # pragma: no cover - depends on the environment
    _zstd = None

# A progress line is printed for files larger than this.
PROGRESS_BYTES = 16 << 20


def _warn(msg):
    print("kinetoscope: warning: " + msg, file=sys.stderr, flush=True)


def _distributed():
    """(rank, world size) when torch.distributed is initialised, else None."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    try:
        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank()), int(dist.get_world_size())
    except Exception:  # a half-initialised process group
        return None
    return None


def _group_key(name, cycle, step, world, token=None):
    """A key every rank of one profiling cycle computes alike, without a
    collective (a collective in on_trace_ready could hang the job): the
    job's rendezvous (torchrun's run id, master address and port), the
    world size, the run's name and the cycle's number and step, and the
    upload token when there is one (a secret the ranks share: who knows
    the job's environment but not its token cannot compute the key; the
    server binds a group to its token besides)."""
    parts = [
        token or "",
        os.environ.get("TORCHELASTIC_RUN_ID", ""),
        os.environ.get("MASTER_ADDR", ""),
        os.environ.get("MASTER_PORT", ""),
        str(world),
        name or "",
        str(cycle),
        str(step),
    ]
    digest = hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:32]
    return "py-" + digest


def _compress(path):
    """Compresses the exported JSON next to it; returns the new path."""
    if _zstd is not None:
        out = path + ".zst"
        with open(path, "rb") as src, open(out, "wb") as dst:
            _zstd.ZstdCompressor(level=3).copy_stream(src, dst)
    else:
        out = path + ".gz"
        with open(path, "rb") as src, gzip.open(out, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    os.remove(path)
    return out


class _Progress:
    """A file wrapper that prints how much of it has been read."""

    def __init__(self, f, total, label):
        self.f, self.total, self.label = f, total, label
        self.sent, self.last = 0, 0.0
        self.show = total >= PROGRESS_BYTES

    def read(self, n=-1):
        chunk = self.f.read(n if n and n > 0 else 1 << 20)
        self.sent += len(chunk)
        now = time.monotonic()
        if self.show and (now - self.last > 0.5 or not chunk):
            self.last = now
            pct = 100.0 * self.sent / max(self.total, 1)
            print(
                "\rkinetoscope: uploading %s: %.0f%% of %.1f MB"
                % (self.label, pct, self.total / 1e6),
                end="" if chunk else "\n",
                file=sys.stderr,
                flush=True,
            )
        return chunk


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Follows no redirect: urllib would turn the upload's POST into a GET
    and send the token along, even to another host; the 3xx is raised as
    an HTTPError instead."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_opener = urllib.request.build_opener(_NoRedirect)


class _NotARun(Exception):
    """A 2xx answer that is not a created run."""


def _is_run_id(value):
    return (
        isinstance(value, str)
        and len(value) == 22
        and all(c.isascii() and (c.isalnum() or c in "-_") for c in value)
    )


def _upload(server, path, query, token, timeout):
    """POSTs the file; the server's Created answer (a dict), checked: a
    201 with a run id, or _NotARun."""
    url = server.rstrip("/") + "/api/runs?" + urllib.parse.urlencode(query)
    size = os.path.getsize(path)
    headers = {
        "Content-Type": "application/octet-stream",
        "Content-Length": str(size),
        "User-Agent": "kinetoscope-python/" + __version__,
    }
    if token:
        headers["Authorization"] = "Bearer " + token
    with open(path, "rb") as f:
        body = _Progress(f, size, os.path.basename(path))
        req = urllib.request.Request(url, data=body, headers=headers, method="POST")
        with _opener.open(req, timeout=timeout) as resp:
            status = resp.status
            raw = resp.read(1 << 20)
    try:
        created = json.loads(raw.decode("utf-8"))
    except ValueError:
        created = None
    if status != 201 or not isinstance(created, dict) or not _is_run_id(created.get("id")):
        raise _NotARun("answered %s without a run id: is it a Kinetoscope server?" % status)
    return created


def _http_detail(e):
    try:
        return json.loads(e.read().decode("utf-8")).get("detail") or str(e)
    except Exception:
        return str(e)


def trace_handler(
    server=None,
    name=None,
    tags=(),
    token=None,
    rank=None,
    *,
    dir=None,
    timeout=600,
):
    """The ``on_trace_ready`` callable: export, compress, upload, print the link.

    ``server`` is the Kinetoscope server's base URL (default:
    ``$KINETOSCOPE_SERVER``, else ``http://127.0.0.1:8080``); ``name`` and
    ``tags`` label the run; ``token`` is an upload token when the server
    needs one (default: ``$KINETOSCOPE_TOKEN``). ``rank`` overrides the
    rank; with ``torch.distributed`` initialised it is the process's rank,
    and the ranks of one profiling cycle are grouped into one run. ``dir``
    is where the trace is written (default: the temporary directory); a
    trace that could not be uploaded stays there, and its path is printed.

    The handler returns the run's link, or None when it did not upload;
    it never raises.
    """
    server = server or os.environ.get("KINETOSCOPE_SERVER") or "http://127.0.0.1:8080"
    token = token or os.environ.get("KINETOSCOPE_TOKEN") or None
    tags = [tags] if isinstance(tags, str) else list(tags or ())
    state = {"cycle": 0}
    lock = threading.Lock()

    def handler(prof):
        with lock:
            state["cycle"] += 1
            cycle = state["cycle"]
        path = None
        try:
            dist = _distributed()
            my_rank = rank if rank is not None else (dist[0] if dist else None)
            world = dist[1] if dist else None
            step = getattr(prof, "step_num", None)
            base = name or "trace"
            safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in base)[:80]
            stem = "%s-%s-%d-%d" % (safe, socket.gethostname(), os.getpid(), cycle)
            if my_rank is not None:
                stem += "-rank%d" % my_rank
            folder = dir or tempfile.gettempdir()
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, stem + ".pt.trace.json")
            prof.export_chrome_trace(path)
            path = _compress(path)
            query = [("file", os.path.basename(path))]
            if name:
                query.append(("name", name))
            if tags:
                query.append(("tags", ",".join(str(t) for t in tags)))
            if my_rank is not None:
                query.append(("group", _group_key(name, cycle, step, world, token)))
                query.append(("rank", str(my_rank)))
            try:
                created = _upload(server, path, query, token, timeout)
            except urllib.error.HTTPError as e:
                if e.code != 409 or my_rank is None:
                    raise
                # The group already has this rank (a job restarted with the
                # same rendezvous within the hour): a run of its own.
                _warn("%s; uploading rank %d as a run of its own" % (_http_detail(e), my_rank))
                query = [q for q in query if q[0] not in ("group", "rank")]
                created = _upload(server, path, query, token, timeout)
            link = server.rstrip("/") + "/runs/" + created["id"]
            who = "" if my_rank is None else " (rank %d)" % my_rank
            print("kinetoscope: run%s %s" % (who, link), flush=True)
            os.remove(path)
            return link
        except urllib.error.HTTPError as e:
            if 300 <= e.code < 400:
                _warn(
                    "the server %s answered %s, redirecting to %r: uploads follow no redirect "
                    "(the token would go along); give the final address as the server; "
                    "the trace is kept at %s" % (server, e.code, e.headers.get("Location"), path)
                )
            else:
                _warn(
                    "the server %s refused the trace (%s): %s; the trace is kept at %s"
                    % (server, e.code, _http_detail(e), path)
                )
        except _NotARun as e:
            _warn("the server %s %s; the trace is kept at %s" % (server, e, path))
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            where = "the trace is kept at %s" % path if path and os.path.exists(path) else "no trace was written"
            _warn("could not upload to %s (%s); %s" % (server, reason, where))
        except Exception as e:  # never into the training loop
            where = "the trace is kept at %s" % path if path and os.path.exists(path) else "no trace was written"
            _warn("the trace handler failed (%s: %s); %s" % (type(e).__name__, e, where))
        return None

    return handler
