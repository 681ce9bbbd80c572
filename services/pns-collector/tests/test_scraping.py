"""Collector kind PrometheusMetric: a real training process serving its metrics over HTTP."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from kubetune_pns_collector import collecting, scraping, summaries
from kubetune_pns_collector.collecting import ExitCode
from kubetune_testkit.processes import free_port

EXPOSITION = """\
# HELP loss Training loss.
# TYPE loss gauge
loss 0.25
accuracy{split="validation",note="a } brace"} 0.9 1700000000000
accuracy{split="train"} 0.95
steps_total 12
nan_metric NaN
"""

# A training process that serves its metrics (loss falling each scrape) and exits after a while.
TRAIN = """
import http.server, sys, threading, time
served = [0]
class Metrics(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/metrics":
            self.send_error(404)
            return
        served[0] += 1
        body = f"# TYPE loss gauge\\nloss {1 / served[0]:.3f}\\nother 7\\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Metrics)
threading.Thread(target=server.serve_forever, daemon=True).start()
deadline = time.monotonic() + 20
while served[0] < 4 and time.monotonic() < deadline:
    time.sleep(0.05)
"""


def test_exposition_gives_the_first_finite_sample_of_each_wanted_metric() -> None:
    found = scraping.parse_exposition(EXPOSITION, frozenset({"loss", "accuracy", "nan_metric"}))
    assert found == {"loss": "0.25", "accuracy": "0.9"}


@pytest.mark.parametrize(
    ("value", "reported"),
    [
        ("0.25", "0.25"),
        ("-1.5e-3", "-1.5e-3"),
        ("0x1p-2", "0.25"),  # Go's ParseFloat reads hexadecimal floats
        ("1_0", "7"),  # Python's float() reads 10; no Prometheus client writes it
        ("\uff11", "7"),
        ("+Inf", "7"),
        ("NaN", "7"),
        ("0x1p2000", "7"),
    ],
)
def test_sample_values_follow_the_exposition_grammar(value: str, reported: str) -> None:
    """A value outside the grammar, or not finite, is no sample: the next one counts."""
    found = scraping.parse_exposition(f"loss {value}\nloss 7\n", frozenset({"loss"}))
    assert found.get("loss") == reported


def test_filters_apply_to_the_exposition_lines() -> None:
    source = scraping.PrometheusSource(
        "http://x", ["accuracy"], [r'(accuracy)\{split="train"\} (\S+)']
    )
    assert source.text_parser is not None
    runs = source.text_parser.parse_runs(EXPOSITION)
    assert [(n, v) for n, _, v in runs] == [("accuracy", ["0.95"])]


def test_a_url_without_http_is_refused() -> None:
    with pytest.raises(ValueError, match="must start with http"):
        scraping.PrometheusSource("127.0.0.1:8080/metrics", ["loss"])


def test_collects_from_the_endpoint_until_the_training_exits(
    log_dir: Path, procs, metric_of, spec
) -> None:
    port = free_port()
    command = f"{shlex.quote(sys.executable)} -u -c {shlex.quote(TRAIN)} {port}"
    p = procs.wrapped(log_dir, command, tee=False)
    summary = summaries.RunningSummary(spec())
    source = scraping.PrometheusSource(
        f"http://127.0.0.1:{port}/metrics", sorted(summary.names), interval=0.2, timeout=2
    )
    settings = collecting.Settings(log_dir=log_dir, register_timeout=10, timeout=60)
    outcome = collecting.Collector(settings, source, summary, None).run()
    assert p.wait(10) == 0
    assert outcome.code == ExitCode.OK, outcome.message
    low, high, latest = metric_of(outcome.observation, "loss")
    # Scrapes 1..n served 1/1, 1/2, ...: the first one read is 1.000 unless the collector was
    # slower than the server's start, and the last one read is the smallest.
    assert float(high or 0) <= 1.0 and float(low or 1) <= 0.25 and latest == low
