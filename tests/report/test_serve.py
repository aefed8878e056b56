"""`swarmrl view`: the report served on 127.0.0.1 and rebuilt on each load."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from swarmrl.report.serve import start_server
from tests.report.scripted_run import write_scripted_run


def test_each_load_shows_the_steps_written_since(tmp_path):
    run = write_scripted_run(tmp_path / "run")
    server = start_server(run, port=0, refresh_s=5)
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        first = urllib.request.urlopen(url, timeout=30).read().decode()
        assert '<meta http-equiv="refresh" content="5">' in first and '"steps logged": 2' in first
        with open(run / "metrics.jsonl", "a") as f:  # the run trains on
            f.write(json.dumps({"step": 2, "score_mean": 0.5}) + "\n")
        assert '"steps logged": 3' in urllib.request.urlopen(url, timeout=30).read().decode()
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(url + "etc/passwd", timeout=30)
    finally:
        server.shutdown()
        server.server_close()
    assert server.server_address[0] == "127.0.0.1"


def test_a_missing_run_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such run directory"):
        start_server(tmp_path / "nope", port=0)
