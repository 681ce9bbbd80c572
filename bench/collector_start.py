"""The pns-collector's start as instructions executed, a figure the machine's load leaves alone.

CPU seconds on a shared 2-core machine vary by half from run to run; the instructions a
process executes do not. This runs, under valgrind's callgrind, what a StdOut collector does
before its wait in a pod: the interpreter, its imports, the flags, the metric source and the
in-cluster client (a ServiceAccount token and CA of its own; nothing is sent). It prints the
median of `--runs` counts, and the third-party modules loaded (none: the wait reads `/proc`
itself, without psutil).

    python bench/collector_start.py [--runs 3] [--python .tox/pns-collector/bin/python]

`PYTHONPATH=<an old checkout's shared/src and services/pns-collector/src>` measures that
checkout with the same interpreter. Needs valgrind.

`--cpu N` instead measures CPU: the whole sidecar as the image starts it (`python -I -S -u`,
the packages put on `sys.path` by hand, `main.run()`), N times, alternating this checkout
with `--before <an old checkout>`, each process's user + system CPU from `os.wait4`. The
collector gets the webhook's StdOut flags, no training process registers
(`--register-timeout 0`) and its one report fails at once (the API server's address is a
closed local port, `--report-timeout 0`): its start, flags, source, client, wait thread, log
lines and exit, without the wait. It prints the median CPU-ms of each checkout, of a bare
`python -I -S -c pass`, and the load average before and after; no valgrind.

    python bench/collector_start.py --cpu 15 --before /work/wt/before
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

# `type(...)(path)`: a str since the collector dropped pathlib, a Path in an older `--before`.
PROBE = """
import gc; gc.disable()  # as the image's entrypoint, for the imports
import sys
from kubetune import incluster
incluster.SERVICE_ACCOUNT_DIR = type(incluster.SERVICE_ACCOUNT_DIR)(sys.argv[1])
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

# The sidecar as the image runs it: `python -I -S -u` (no site, no PYTHONPATH), its packages
# put on sys.path by the entrypoint; here a checkout's source directories.
SIDECAR = """
import gc; gc.disable()  # as the image's entrypoint; a checkout's main.run turns it on
import sys
root = {root!r}
sys.path[:0] = [root + "/shared/src", root + "/services/pns-collector/src"]
from kubetune import incluster
incluster.SERVICE_ACCOUNT_DIR = type(incluster.SERVICE_ACCOUNT_DIR)(sys.argv[1])
sys.argv = ["pns-collector", "--trial-name", "t", "--objective-metric", "loss",
            "--collector-kind", "StdOut", "--metrics-path", sys.argv[2], "--log-dir", sys.argv[3],
            "--register-timeout", "0", "--report-timeout", "0"]
from kubetune_pns_collector import main
main.run()
"""


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


def service_account(account: Path) -> tuple[Path, Path]:
    """A ServiceAccount directory (a token, one CA certificate as a pod's) and an empty home."""
    ca = ssl.get_default_verify_paths().openssl_cafile
    (account / "token").write_text("a-token")
    first = Path(ca).read_text().split("-----END CERTIFICATE-----")[0]
    (account / "ca.crt").write_text(first + "-----END CERTIFICATE-----\n")
    home = account / "home"
    home.mkdir()
    return account, home


def cpu_ms(argv: list[str], env: dict[str, str]) -> float:
    """User + system CPU of one process run to its end, in milliseconds."""
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(child.pid, 0)
    child.returncode = 0  # reaped above
    return (usage.ru_utime + usage.ru_stime) * 1000


def cpu_mode(args: argparse.Namespace, account: Path, env: dict[str, str]) -> None:
    env = {**env, "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "1"}
    here = str(Path(__file__).resolve().parent.parent)
    checkouts = {"after (this checkout)": here}
    if args.before:
        checkouts = {"before": str(Path(args.before).resolve()), **checkouts}
    runs: dict[str, list[str]] = {
        "bare (python -I -S -c pass)": [args.python, "-I", "-S", "-c", ""]
    }
    for name, root in checkouts.items():
        for src in ("shared/src", "services/pns-collector/src"):
            subprocess.run([args.python, "-m", "compileall", "-q", f"{root}/{src}"], check=True)
        log_dir = account / name.split()[0]
        log_dir.mkdir()
        code = SIDECAR.format(root=root)
        where = [str(account), str(log_dir / "metrics.log"), str(log_dir)]
        runs[name] = [args.python, "-I", "-S", "-u", "-c", code, *where]
    for argv in runs.values():
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if argv[-1] != "" and "cannot write the observation" not in done.stdout:
            raise SystemExit(f"the sidecar did not run as expected:\n{done.stdout}{done.stderr}")
    load = os.getloadavg()
    figures: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.cpu):
        for name, argv in runs.items():
            figures[name].append(cpu_ms(argv, env))
    after_load = os.getloadavg()
    for name, values in figures.items():
        print(
            f"{name}: median {statistics.median(values):.1f} CPU-ms of {args.cpu} runs "
            f"(min {min(values):.1f}, max {max(values):.1f})"
        )
    print(f"load average (1, 5, 15 min): before {load}, after {after_load}")


def main() -> int:
    parser = argparse.ArgumentParser(prog="collector_start", description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--python", default=sys.executable, help="the collector's interpreter")
    parser.add_argument("--cpu", type=int, default=0, help="CPU mode: this many runs of each")
    parser.add_argument("--before", default="", help="CPU mode: an older checkout to compare")
    args = parser.parse_args()
    if args.cpu:
        with tempfile.TemporaryDirectory(prefix="bench-collector-cpu-") as tmp:
            account, home = service_account(Path(tmp))
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
            cpu_mode(args, account, env)
        return 0
    if not shutil.which("valgrind"):
        raise SystemExit("collector_start needs valgrind")
    with tempfile.TemporaryDirectory(prefix="bench-collector-start-") as tmp:
        account, home = service_account(Path(tmp))
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
        probe = [args.python, "-c", PROBE, *where]
        subprocess.run(probe, env=env, check=True, capture_output=True)  # bytecode cached
        counts, loaded = [], ""
        for _ in range(args.runs):
            count, loaded = instructions(probe, env)
            counts.append(count)
        print(
            f"collector start (StdOut, to the wait): median "
            f"{statistics.median(counts) / 1e6:.1f} M instructions of {args.runs} runs "
            f"(python -c pass: {bare / 1e6:.1f} M); third-party modules loaded: {loaded}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
