"""The one-command demo (`tox -e demo`): a real Experiment on a local cluster, live.

Builds the local control plane the first time (with progress), starts it with the node agent,
deploys kubetune's `local` overlay and prints the web UI's URL, submits the random-search
example (its trials run examples/training/digits.py from this checkout), shows the trials as a
live table, prints the best trial, writes a plot of the objective per trial to a PNG, and takes
everything down again. `--keep` leaves the cluster running and prints the KUBECONFIG to use.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import yaml
from kubetune_cli import main as cli

from kubetune.kube import Kube, connect
from kubetune_testkit.deploying import (
    KUBETUNE_NAMESPACE,
    ROOT,
    apply_overlay,
    enable_injection,
    render_image_map,
    wait_available,
)
from localcluster import build
from localcluster import cluster as localcluster
from localcluster.pytest_plugin import ClusterHandle

EXAMPLE = ROOT / "examples" / "random.yaml"
TRAINING = ROOT / "examples" / "training" / "digits.py"
NAMESPACE = "demo"
UI_URL = "http://127.0.0.1:28480/"
"""The web UI of the local overlay (kustomize/overlays/local/patches/ui.yaml: host network)."""


def say(message: str) -> None:
    print(f"[demo] {message}", flush=True)


def ui_answers(url: str = UI_URL) -> bool:
    """Whether the deployed UI is ready (its caches synced); the demo goes on either way."""
    try:
        with urllib.request.urlopen(url + "readyz", timeout=5) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def experiment_manifest() -> dict[str, object]:
    """The example as shipped, with its trials running this checkout's training script."""
    exp = yaml.safe_load(EXAMPLE.read_text())
    exp["metadata"]["namespace"] = NAMESPACE
    pod = exp["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]
    command = pod["containers"][0]["command"]
    pod["containers"][0]["command"] = [sys.executable, str(TRAINING), *command[2:]]
    return dict(exp)


def run(args: argparse.Namespace) -> int:
    say("building the control plane binaries (first time only; several minutes)")
    build.build_all()
    state_dir = Path(args.state_dir or tempfile.mkdtemp(prefix="kubetune-demo-"))
    # Outside the state directory: `up` starts from an empty one.
    image_map = Path(tempfile.mkdtemp(prefix="kubetune-demo-map-")) / "image-map.yaml"
    image_map.write_text(render_image_map())
    say(f"starting the local cluster in {state_dir}")
    state = localcluster.up(state_dir, image_map=image_map, with_nodeagent=True)
    handle = ClusterHandle(state.kubeconfig, state.kubectl, state.server, state)
    try:
        say("deploying kubetune (kustomize/overlays/local)")
        apply_overlay(handle)
        wait_available(handle)
        say(f"kubetune is up in namespace {KUBETUNE_NAMESPACE}")
        if ui_answers():
            say(f"web UI (read-only here, live while the demo runs): {UI_URL}")
        else:
            say(f"the web UI does not answer at {UI_URL}; the demo goes on without it")
        handle.kubectl("create", "namespace", NAMESPACE)
        enable_injection(handle, NAMESPACE)
        manifest = image_map.parent / "random-digits.yaml"
        manifest.write_text(yaml.safe_dump(experiment_manifest()))
        name = str(experiment_manifest()["metadata"]["name"])  # type: ignore[index]
        common = ["--kubeconfig", state.kubeconfig, "-n", NAMESPACE]
        cli.main([*common, "run", str(manifest), "--watch", "--interval", "1"])
        say("best trial:")
        cli.main([*common, "best", name])
        png = Path(args.output).resolve()
        cli.main([*common, "plot", name, "-o", str(png)])
        Kube(connect(state.kubeconfig))  # the cluster answered to the end
        if args.keep:
            say(f"cluster kept: export KUBECONFIG={state.kubeconfig}; web UI: {UI_URL}")
            say(f"stop it with: localcluster --state-dir {state_dir} down")
            return 0
    finally:
        if not args.keep:
            say("taking the cluster down")
            localcluster.down(state_dir, quiet=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="demo", description=__doc__)
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    parser.add_argument("--state-dir", help="where the cluster keeps its state")
    parser.add_argument("--output", default="kubetune-demo.png", help="the plot to write")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
