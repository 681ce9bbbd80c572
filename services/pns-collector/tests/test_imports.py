"""The sidecar starts in every trial pod: what a StdOut/File collection imports is its CPU.

watchfiles (and its anyio, multiprocessing), the Prometheus scraper's urllib.request and the
TensorFlow event reader are imported only by the collector kinds that use them. In a pod the
client to the API server is the standard library's (no urllib3, no kubernetes package), the
models' pydantic and yaml are never needed, and neither is psutil (the wait reads `/proc`).
"""

from __future__ import annotations

import ssl
import subprocess
import sys
from pathlib import Path

LAZY = ("watchfiles", "anyio", "urllib.request", "kubetune_pns_collector.tfevents")
HEAVY = ("urllib3", "kubernetes", "psutil", "pydantic", "yaml")

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


# Everything `main` does before the wait, in a pod: flags, source, and the client from the
# ServiceAccount files (a token and CA of our own; nothing is sent).
IN_A_POD = """
import sys
from kubetune import incluster
incluster.SERVICE_ACCOUNT_DIR = sys.argv[3]
from kubetune_pns_collector import main
args = main.build_parser().parse_args(
    ["--trial-name", "t", "--objective-metric", "loss", "--collector-kind", sys.argv[1],
     "--metrics-path", sys.argv[2]]
)
main.build_source(args, ["loss"])
main.Kube(main.connect(args.kubeconfig))
print(" ".join(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


def _some_ca_bundle() -> bytes:
    """Any PEM CA certificates (the system's): the client loads them, nothing connects."""
    paths = ssl.get_default_verify_paths()
    for path in (paths.cafile, paths.openssl_cafile, "/etc/ssl/certs/ca-certificates.crt"):
        if path and Path(path).is_file():
            return Path(path).read_bytes()
    raise AssertionError("no CA bundle on this machine to stand in for a ServiceAccount's")


def test_stdout_and_file_collection_in_a_pod_import_no_client_library_psutil_or_models(
    tmp_path,
):
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("a-token")
    (account / "ca.crt").write_bytes(_some_ca_bundle())
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "KUBERNETES_SERVICE_HOST": "10.0.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        "HOME": str(home),  # no kubeconfig
        "PATH": "/usr/bin:/bin",
    }
    for kind in ("StdOut", "File"):
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                IN_A_POD.format(heavy=HEAVY),
                kind,
                str(tmp_path / "metrics.log"),
                str(account),
            ],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [], kind


def test_event_collection_imports_its_reader(tmp_path):
    assert "kubetune_pns_collector.tfevents" in _imported("TensorFlowEvent", str(tmp_path))


# The whole sidecar run as the image starts it (`python -I -S`, its packages put on sys.path by
# hand): flags, source, client, the wait (no training process registers: exit 4) and the report,
# which fails at once (a closed local port); then the standard library modules it loaded.
# Each listed one cost a share of its start in every trial pod (bench/collector_start.py).
HEAVY_STDLIB = (
    *("logging", "dataclasses", "inspect", "typing", "datetime", "traceback", "ast"),
    # the TLS client is `_ssl` and `_socket` (kubetune.tlsclient); the IDNA codec loads for a
    # str host name; argparse's default help width loads `shutil` (with bz2 and lzma)
    *("ssl", "socket", "selectors", "encodings.idna", "shutil"),
    # the flags are kubetune.lightflags': argparse loaded gettext, locale and textwrap
    *("argparse", "gettext", "locale", "textwrap"),
    # paths are strings and URLs are built by kubetune.urlparts: pathlib and urllib.parse (with
    # the ipaddress it loads) cost 3 ms of CPU
    *("pathlib", "urllib.parse", "ipaddress", "fnmatch"),
    # the Trial's condition names are needed only to mark it early-stopped; contextlib 0.6 ms
    *("kubetune.conditions", "contextlib"),
    # JSON through `_json` (kubetune.lightjson), no regexes for a small log (literalscan), the
    # API's values as strings (kubetune.api.literals), one thread on `_thread`
    # (kubetune.plainthreads): each of these pulls `enum`, `functools` and `collections`
    *("json", "re", "shlex", "enum", "kubetune.api.enums", "threading", "weakref"),
    *("functools", "collections", "importlib", "warnings"),
)
SIDECAR = """
import sys
sys.path[:0] = sys.argv[1:3]
from kubetune import incluster
incluster.SERVICE_ACCOUNT_DIR = sys.argv[3]
from kubetune_pns_collector import main
code = main.main(
    ["--trial-name", "t", "--objective-metric", "loss", "--collector-kind", sys.argv[4],
     "--metrics-path", sys.argv[5], "--log-dir", sys.argv[6], "--register-timeout", "0",
     "--report-timeout", "0"]
)
print("exit", code, "loaded:", *sorted(m for m in {heavy!r} if m in sys.modules))
"""


def test_stdout_and_file_sidecar_runs_without_logging_dataclasses_typing_or_datetime(tmp_path):
    import kubetune
    import kubetune_pns_collector

    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("a-token")
    (account / "ca.crt").write_bytes(_some_ca_bundle())
    env = {
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": "1",  # nothing listens: the report fails at once
        "HOME": str(tmp_path),  # no kubeconfig
        "PATH": "/usr/bin:/bin",
    }
    sources = [str(Path(m.__file__).parent.parent) for m in (kubetune, kubetune_pns_collector)]
    for kind in ("StdOut", "File"):
        out = subprocess.run(
            [
                sys.executable,
                "-I",
                "-S",
                "-c",
                SIDECAR.format(heavy=HEAVY_STDLIB),
                *sources,
                str(account),
                kind,
                str(tmp_path / "metrics.log"),
                str(tmp_path / "log"),
            ],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        last = out.stdout.splitlines()[-1]
        assert last == "exit 4 loaded:", f"{kind}: {last}\n{out.stdout}"
        assert "0 of 1 training process(es) registered" in out.stdout
        assert "cannot write the observation of trial" in out.stdout
