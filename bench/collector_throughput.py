"""Benchmark the pns-collector: parse rate, memory on a 1 GiB log, last exit to report written.

1. Lines/s parsed for the default TEXT format (target 500,000/s): a metrics file of
   `--lines` lines like `epoch 12: loss=0.2345 accuracy=0.9123`, streamed through the
   collector's real path (FileTail -> TextParser -> RunningSummary), best of `--repeat`.
2. Peak RSS reading a `--gib` GiB log of such lines (target < 50 MiB), in a fresh process.
3. With `KUBECONFIG` set (e.g. the dev cluster): time from the last training process writing
   its end record (the record file's mtime) to the final `status.observation` patch returning,
   over `--runs` runs (target < 200 ms), collector in-process with the real Reporter.

Run: `python bench/collector_throughput.py [--lines 2000000] [--gib 1] [--runs 10]`.

`--scan` instead prints what `parsing.STRING_SCAN_BUDGET` weighs: microseconds to scan blocks
of such lines by string methods (`literalscan`) and by the regexes (best of 5), and the CPU of
a fresh interpreter's `import re` plus compiling the regexes a collector needs, once the
collector's modules are imported (median of 15).
Prints figures; no asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kubetune import procwait, wrapperscript
from kubetune.api.common import ObjectiveSpec
from kubetune.kube import NAMESPACES, TRIALS, Kube, connect
from kubetune_pns_collector import collecting, parsing, reporting, summaries

SPEC = ObjectiveSpec(
    type="minimize", objective_metric_name="loss", additional_metric_names=["accuracy"]
)


def block(start: int, count: int) -> bytes:
    return "".join(
        f"epoch {i}: loss={(i % 9973) / 9973:.4f} accuracy={(i % 997) / 997:.4f}\n"
        for i in range(start, start + count)
    ).encode()


def parse_rate(lines: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "metrics.log"
        with open(path, "wb") as fh:
            for start in range(0, lines, 100_000):
                fh.write(block(start, min(100_000, lines - start)))
        size = path.stat().st_size
        best = best_cpu = 0.0
        for _ in range(repeat):
            summary = summaries.RunningSummary(SPEC)
            source = collecting.TextSource(path, parsing.TextParser(summary.names))
            t0, c0 = time.perf_counter(), time.process_time()
            for runs in source.read(final=True):
                summary.add_runs(runs)
            elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
            source.close()
            assert summary.count("loss") == lines
            best = max(best, lines / elapsed)
            best_cpu = max(best_cpu, lines / cpu)
        # On a shared machine the wall-clock rate measures the neighbours as much as the
        # collector; lines per CPU second is what one quiet core would do.
        print(
            f"parse rate (default format, file -> summary): {best:,.0f} lines/s wall clock, "
            f"{best_cpu:,.0f} lines per CPU second ({best * size / lines / 1e6:.1f} MB/s, "
            f"{lines:,} lines, best of {repeat}, load average {os.getloadavg()[0]:.1f}); "
            "target 500,000 lines/s"
        )


_RSS = """
import json, sys, time
import psutil
def hwm():  # this process's peak RSS (ru_maxrss would include the pre-exec parent's)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
from kubetune.api.common import ObjectiveSpec
from kubetune_pns_collector import collecting, parsing, summaries
spec = ObjectiveSpec(
    type="minimize", objective_metric_name="loss", additional_metric_names=["accuracy"]
)
summary = summaries.RunningSummary(spec)
source = collecting.TextSource(sys.argv[1], parsing.TextParser(summary.names))
before = psutil.Process().memory_info().rss
t0 = time.perf_counter()
for runs in source.read(final=True):
    summary.add_runs(runs)
print(json.dumps({"seconds": time.perf_counter() - t0, "before": before,
                  "peak": hwm(),
                  "lines": summary.count("loss"), "bytes": source.tail.bytes_read}))
"""


def rss(gib: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "metrics.log"
        chunk = block(0, 25_000)
        target = int(gib * (1 << 30))
        with open(path, "wb") as fh:
            written = 0
            while written < target:
                fh.write(chunk)
                written += len(chunk)
        out = subprocess.run(
            [sys.executable, "-c", _RSS, str(path)], capture_output=True, text=True, check=True
        )
        f = json.loads(out.stdout)
        print(
            f"memory on a {f['bytes'] / (1 << 30):.2f} GiB log ({f['lines']:,} lines, "
            f"{f['seconds']:.1f}s): peak RSS {f['peak'] / (1 << 20):.1f} MiB "
            f"(interpreter + imports before reading: {f['before'] / (1 << 20):.1f} MiB, "
            f"growth {(f['peak'] - f['before']) / (1 << 20):.1f} MiB); target < 50 MiB"
        )


def latency(runs: int) -> None:
    kube = Kube(connect(os.environ.get("KUBECONFIG")))
    ns = f"bench-collector-{uuid.uuid4().hex[:6]}"
    kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    try:
        kube.create(
            TRIALS,
            {
                "apiVersion": "kubeflow.org/v1beta1",
                "kind": "Trial",
                "metadata": {"name": "bench"},
                "spec": {"objective": SPEC.to_wire()},
            },
            ns,
        )
        samples = []
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as tmp:
                log_dir = Path(tmp)
                code = "import time\nfor i in range(5): print(f'loss={i}'); time.sleep(0.05)"
                cmd = f"{shlex.quote(sys.executable)} -u -c {shlex.quote(code)}"
                script = wrapperscript.sh_wrap(cmd, str(log_dir), metrics_file=f"{tmp}/metrics.log")
                p = subprocess.Popen(["sh", "-c", script], stdout=subprocess.DEVNULL)
                summary = summaries.RunningSummary(SPEC)
                source = collecting.TextSource(
                    log_dir / "metrics.log", parsing.TextParser(summary.names)
                )
                settings = collecting.Settings(log_dir=log_dir, register_timeout=10, timeout=30)
                reporter = reporting.Reporter(kube, "bench", ns)
                outcome = collecting.Collector(settings, source, summary, reporter).run()
                reported = time.time_ns()
                p.wait()
                ended = os.stat(procwait.pid_file(log_dir, p.pid)).st_mtime_ns
                assert outcome.code is collecting.ExitCode.OK, outcome
                samples.append((reported - ended) / 1e6)
        samples.sort()
        p95 = samples[min(len(samples) - 1, int(len(samples) * 0.95))]
        print(
            f"last exit -> report written (local cluster, {runs} runs): median "
            f"{statistics.median(samples):.0f} ms, p95 {p95:.0f} ms, max {samples[-1]:.0f} ms; "
            "target < 200 ms"
        )
    finally:
        kube.delete(NAMESPACES, ns)


SCAN_LINE = "epoch 3/10 step 120: loss=0.123456 accuracy=0.954321 lr=0.001\n"
RE_COST = """
import resource, sys
def cpu():
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime
from kubetune_pns_collector import main, parsing
before = cpu()
if sys.argv[1] == "re":
    for name in ("loss", "accuracy"):
        parsing.name_values(name), parsing.name_after_name(name)
    parsing._TIMESTAMP_START.get()
print((cpu() - before) * 1e3)
"""


def scan_costs() -> None:
    """String methods against regexes per block, and what `re` costs a collector once."""
    import timeit

    from kubetune_pns_collector import literalscan

    names = ["accuracy", "loss"]
    patterns = [(parsing.name_values(n), parsing.name_after_name(n)) for n in names]
    for size in (1024, 4096, 16384, 65536):
        text = (SCAN_LINE * (size // len(SCAN_LINE) + 1))[:size]
        text = text[: text.rfind("\n") + 1]

        def by_strings(text: str = text) -> object:
            literalscan.has_timestamp(text)
            return [literalscan.values(text, n) for n in names]

        def by_regexes(text: str = text) -> object:
            parsing._has_timestamp(text)
            any(after.search(text) for _, after in patterns)
            return [values.findall(text) for values, _ in patterns]

        n = max(10, 200_000 // size)
        strings = min(timeit.repeat(by_strings, number=n, repeat=5)) / n * 1e6
        regexes = min(timeit.repeat(by_regexes, number=n, repeat=5)) / n * 1e6
        extra_ns = (strings - regexes) / len(text) * 1e3
        print(
            f"scan {len(text):6d} chars: string methods {strings:7.1f} us, regexes "
            f"{regexes:6.1f} us ({strings / regexes:.1f}x; {extra_ns:.0f} ns a character more)"
        )
    costs = {}
    for what in ("re", "none"):
        runs = [
            float(
                subprocess.run(
                    [sys.executable, "-c", RE_COST, what],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
            )
            for _ in range(15)
        ]
        costs[what] = statistics.median(runs)
    print(
        f"import re + the collector's regexes compiled: {costs['re'] - costs['none']:.2f} CPU-ms "
        f"(median of 15; load {os.getloadavg()[0]:.1f})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--scan", action="store_true", help="string methods against regexes")
    args = ap.parse_args()
    if args.scan:
        scan_costs()
        return
    parse_rate(args.lines, args.repeat)
    if args.gib > 0:
        rss(args.gib)
    if os.environ.get("KUBECONFIG") and args.runs > 0:
        latency(args.runs)
    else:
        print("last exit -> report written: skipped (set KUBECONFIG to a cluster)")


if __name__ == "__main__":
    main()
