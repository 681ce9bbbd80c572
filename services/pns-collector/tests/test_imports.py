"""The sidecar starts in every trial pod: what a StdOut/File collection imports is its CPU.

watchfiles (and its anyio, multiprocessing), the Prometheus scraper's urllib.request and the
TensorFlow event reader are imported only by the collector kinds that use them.
"""

from __future__ import annotations

import subprocess
import sys

LAZY = ("watchfiles", "anyio", "urllib.request", "kubetune_pns_collector.tfevents")

PROBE = """
import sys
from kubetune_pns_collector import main
args = main.build_parser().parse_args(
    ["--trial-name", "t", "--objective-metric", "loss", "--collector-kind", sys.argv[1],
     "--metrics-path", sys.argv[2]]
)
main.build_source(args, ["loss"])
print(" ".join(sorted(m for m in {lazy!r} if m in sys.modules)))
"""


def _imported(kind: str, path: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(lazy=LAZY), kind, path],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(out.stdout.split())


def test_stdout_and_file_collection_import_no_watcher_scraper_or_event_reader(tmp_path):
    assert _imported("StdOut", str(tmp_path / "metrics.log")) == set()
    assert _imported("File", str(tmp_path / "metrics.log")) == set()


def test_event_collection_imports_its_reader(tmp_path):
    assert "kubetune_pns_collector.tfevents" in _imported("TensorFlowEvent", str(tmp_path))
