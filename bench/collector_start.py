"""The pns-collector's start as instructions executed, a figure the machine's load leaves alone.

CPU seconds on a shared 2-core machine vary by half from run to run; the instructions a
process executes do not. This runs, under valgrind's callgrind, what a StdOut collector does
before its wait in a pod: the interpreter, its imports, the flags, the metric source and the
in-cluster client (a ServiceAccount token and CA of its own; nothing is sent). It prints the
median of `--runs` counts, and the third-party modules loaded; then the same with psutil
imported too, which the wait loads when it binds the first training process (before, it was
loaded at start; the TLS context, now made at start, was made at the first request).

    python bench/collector_start.py [--runs 3] [--python .tox/pns-collector/bin/python]

`PYTHONPATH=<an old checkout's shared/src and services/pns-collector/src>` measures that
checkout with the same interpreter. Needs valgrind.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PROBE = """
import sys
from pathlib import Path
from kubetune import incluster
incluster.SERVICE_ACCOUNT_DIR = Path(sys.argv[1])
from kubetune_pns_collector import main
args = main.build_parser().parse_args(
    ["--trial-name", "t", "--objective-metric", "loss", "--collector-kind", "StdOut",
     "--metrics-path", sys.argv[2]]
)
main.build_source(args, ["loss"])
main.Kube(main.connect(args.kubeconfig))
third = ("urllib3", "kubernetes", "psutil", "pydantic", "yaml", "http.client", "email")
print(" ".join(m for m in third if m in sys.modules) or "none")
"""
WITH_PSUTIL = PROBE + "import psutil\n"


def instructions(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if not found:
        raise SystemExit(f"no count in valgrind's output:\n{done.stderr}")
    return int(found.group(1)), done.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(prog="collector_start", description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--python", default=sys.executable, help="the collector's interpreter")
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        raise SystemExit("collector_start needs valgrind")
    ca = ssl.get_default_verify_paths().openssl_cafile
    with tempfile.TemporaryDirectory(prefix="bench-collector-start-") as tmp:
        account = Path(tmp)
        (account / "token").write_text("a-token")
        first = Path(ca).read_text().split("-----END CERTIFICATE-----")[0]
        (account / "ca.crt").write_text(first + "-----END CERTIFICATE-----\n")  # one, as a pod's
        home = account / "home"
        home.mkdir()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),  # no kubeconfig: in-cluster, as in a pod
            "KUBERNETES_SERVICE_HOST": "10.0.0.1",
            "KUBERNETES_SERVICE_PORT": "443",
            "PYTHONHASHSEED": "0",
        }
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        where = [str(account), str(account / "metrics.log")]
        bare, _ = instructions([args.python, "-c", "pass"], env)
        for what, code in (("to the wait", PROBE), ("and psutil", WITH_PSUTIL)):
            probe = [args.python, "-c", code, *where]
            subprocess.run(probe, env=env, check=True, capture_output=True)  # bytecode cached
            counts, loaded = [], ""
            for _ in range(args.runs):
                count, loaded = instructions(probe, env)
                counts.append(count)
            print(
                f"collector start (StdOut, {what}): median "
                f"{statistics.median(counts) / 1e6:.1f} M instructions of {args.runs} runs "
                f"(python -c pass: {bare / 1e6:.1f} M); third-party modules loaded: {loaded}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
