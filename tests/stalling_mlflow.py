"""A tracking server that never makes a run: it answers MLflow's GETs as for a missing experiment
and holds every POST (create experiment) unanswered, as a stalled or overloaded server does. For
the tests of a stop that comes while a run is still being made."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class Stalled:
    uri: str
    #: set once a client asked to create something (the run's experiment)
    posts: threading.Event


@contextmanager
def stalling_mlflow(hold_s: float = 30.0) -> Iterator[Stalled]:
    """A server on a free loopback port, for the `with` block; each POST is held `hold_s`."""
    posts = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "none"}')

        def do_POST(self) -> None:
            posts.set()
            time.sleep(hold_s)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True  # a held POST does not hold the test's exit
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield Stalled(f"http://127.0.0.1:{server.server_address[1]}", posts)
    finally:
        server.shutdown()
        server.server_close()
