"""`swarmrl view RUN`: the report served on 127.0.0.1, rebuilt from the run dir on every load.

A run that is training keeps appending to metrics.jsonl and samples/, so each request renders
the page again (report/html.py `render_report`); with `refresh_s` the page reloads itself
that often. Bound to the loopback interface only: the report shows everything agents wrote.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from swarmrl.report.html import render_report


def make_handler(run_dir: Path, refresh_s: float):
    """A request handler class serving the report of `run_dir` at `/`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server name
            if self.path.split("?", 1)[0] not in ("/", "/report.html"):
                self.send_error(404)
                return
            page, _warnings = render_report(run_dir)
            if refresh_s > 0:  # a reload that keeps nothing but picks up new steps
                page = page.replace("<head>", f'<head><meta http-equiv="refresh" content="{refresh_s:g}">', 1)
            body = page.encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:  # quiet: one line per reload would flood a terminal
            pass

    return Handler


def start_server(run_dir: Path, port: int = 8765, refresh_s: float = 0.0) -> ThreadingHTTPServer:
    """A server for the report of `run_dir` on 127.0.0.1:`port` (0: any free port), running in a
    daemon thread; `server.shutdown()` stops it."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: no such run directory")
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(run_dir, refresh_s))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
