"""A 1 GiB metrics log is streamed in bounded memory (measured in a fresh process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

GIB = 1 << 30
STRIDE = 256 << 10  # one metrics line every 256 KiB; the holes between are NUL bytes

READER = """
import json, sys
import psutil
def hwm():  # this process's peak RSS (ru_maxrss would include the pre-exec parent's)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
from kubetune.api.common import ObjectiveSpec
from kubetune_pns_collector import collecting, parsing, summaries

spec = ObjectiveSpec(type="minimize", objective_metric_name="loss")
summary = summaries.RunningSummary(spec)
source = collecting.TextSource(sys.argv[1], parsing.TextParser(summary.names))
before = psutil.Process().memory_info().rss
for runs in source.read(final=True):
    summary.add_runs(runs)
m = summary.observation().metrics[0]
print(json.dumps({"before": before, "peak": hwm(), "count": summary.count("loss"),
                  "bytes": source.tail.bytes_read, "min": m.min, "max": m.max, "latest": m.latest}))
"""


@pytest.mark.slow
def test_a_1gib_log_is_streamed_with_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "metrics.log"
    lines = GIB // STRIDE
    with open(path, "wb") as fh:
        fh.truncate(GIB)  # sparse: fast to make, and reads like a real 1 GiB file
        for i in range(lines):
            fh.seek(i * STRIDE + STRIDE - 64)
            fh.write(f"\nepoch {i} loss={lines - i}.5\n".encode())
    out = subprocess.run(
        [sys.executable, "-c", READER, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    figures = json.loads(out.stdout)
    assert figures["bytes"] == GIB
    assert figures["count"] == lines
    assert (figures["min"], figures["max"], figures["latest"]) == ("1.5", f"{lines}.5", "1.5")
    growth = figures["peak"] - figures["before"]
    assert growth < 16 << 20, f"peak RSS grew by {growth >> 20} MiB reading 1 GiB"
