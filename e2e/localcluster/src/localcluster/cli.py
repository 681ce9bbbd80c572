"""``localcluster`` command: build, build-node, build-operators, build-katib, install-katib,
thirdparty-crds, up, load, install-operators, down, status, env."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from types import FrameType

from localcluster import (
    build,
    cluster,
    gotool,
    katib,
    katibinstall,
    node,
    nodebuild,
    nodeoperators,
    operators,
    thirdparty,
)
from localcluster.kubectlrun import KubectlError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="localcluster",
        description="A real local Kubernetes control plane (etcd, kube-apiserver, "
        "kube-controller-manager, kube-scheduler, node agent) as processes.",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help=f"state directory (env LOCALCLUSTER_STATE_DIR; default {cluster.default_state_dir()})",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the binaries into the cache (once)")
    b.add_argument("--force", action="store_true", help="rebuild even when cached")
    u = sub.add_parser("up", help="start the cluster and wait until it is Ready")
    u.add_argument("--no-nodeagent", action="store_true", help="do not start the node agent")
    u.add_argument(
        "--image-map",
        type=Path,
        default=None,
        help="image -> command table passed to the node agent",
    )
    u.add_argument(
        "--node",
        choices=node.NODE_MODES,
        default="",
        help="run a real node (containerd, kubelet, kube-proxy, CNI, CoreDNS; root, one per "
        "machine; `build-node` first) instead of the node agent",
    )
    u.add_argument(
        "--audit",
        action="store_true",
        help="log every API request at the Metadata level to <state>/logs/audit.log",
    )
    u.add_argument("--timeout", type=float, default=cluster.READY_TIMEOUT)
    n = sub.add_parser(
        "build-node",
        help="build the real node's binaries (kubelet, kube-proxy, containerd, runc, CNI "
        "plugins, CoreDNS, pause) into the cache (once)",
    )
    n.add_argument("--force", action="store_true", help="rebuild even when cached")
    ld = sub.add_parser(
        "load", help="import OCI or docker-save image archives into the real node's containerd"
    )
    ld.add_argument("archives", nargs="+", type=Path)
    o = sub.add_parser(
        "build-operators",
        help="build the real training-operator and Argo Workflows binaries into the cache (once)",
    )
    o.add_argument("names", nargs="*", help="operators to build (default: all)")
    o.add_argument("--force", action="store_true", help="rebuild even when cached")
    i = sub.add_parser(
        "install-operators",
        help="on the real node: load images of the built operators and apply their releases' "
        "manifests (`build-operators` and `up --node kubelet` first)",
    )
    i.add_argument("names", nargs="*", help="operators to install (default: all)")
    k = sub.add_parser(
        "build-katib",
        help=f"build upstream Katib {katib.VERSION}'s binaries and take its manifests (once)",
    )
    k.add_argument("--force", action="store_true", help="rebuild even when cached")
    katibinstall.add_arguments(
        sub.add_parser(
            "install-katib",
            help=f"install upstream Katib {katib.VERSION} (standalone PostgreSQL) on the running "
            "cluster; prints the image-map entries `up --image-map` needs",
        )
    )
    t = sub.add_parser(
        "thirdparty-crds",
        help="fetch the operators' CRDs for tests from their Go modules (part of build); "
        "print their paths",
    )
    t.add_argument("--force", action="store_true", help="fetch again even when cached")
    sub.add_parser("down", help="stop everything and delete the cluster data")
    s = sub.add_parser("status", help="say what runs")
    s.add_argument("--json", action="store_true")
    sub.add_parser("env", help="print `export KUBECONFIG=...` for eval")
    args = parser.parse_args(argv)

    if args.command == "build":
        return build.main(force=args.force)
    if args.command == "build-node":
        return nodebuild.main(force=args.force)
    if args.command == "load":
        return _load(args.archives)
    if args.command == "build-operators":
        return operators.main(args.names, force=args.force)
    if args.command == "install-operators":
        return _install_operators(args.state_dir, args.names)
    if args.command == "build-katib":
        return katib.main(force=args.force)
    if args.command == "install-katib":
        return katibinstall.main(args)
    if args.command == "thirdparty-crds":
        return _thirdparty_crds(args.force)
    if args.command == "up":
        # A SIGTERM while starting must still stop what was started (up's cleanup path).
        signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            cluster.up(
                args.state_dir,
                with_nodeagent=False if args.no_nodeagent else None,
                image_map=args.image_map,
                timeout=args.timeout,
                node_mode=args.node,
                audit=args.audit,
            )
        except cluster.ClusterError as exc:
            print(f"[localcluster] up FAILED: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
        return 0
    if args.command == "down":
        cluster.down(args.state_dir)
        return 0
    if args.command == "status":
        st = cluster.status(args.state_dir)
        if args.json:
            print(json.dumps(st, indent=2))
        else:
            _print_status(st)
        return 0 if st["running"] else 3
    if args.command == "env":
        st = cluster.status(args.state_dir)
        if not st["running"]:
            print("# no local cluster is running: `localcluster up`", file=sys.stderr)
            return 3
        print(f"export KUBECONFIG={st['kubeconfig']}")
        return 0
    return 2


def _thirdparty_crds(force: bool) -> int:
    try:
        dirs = thirdparty.fetch_all(gotool.find_go(), force=force)
    except gotool.BuildError as exc:
        print(f"[localcluster thirdparty-crds] FAILED: {exc}", file=sys.stderr)
        return 1
    for d in dirs:
        for path in sorted(d.glob("*.yaml")):
            print(path)
    return 0


def _load(archives: list[Path]) -> int:
    for archive in archives:
        try:
            names = node.load(archive)
        except node.NodeError as exc:
            print(f"[localcluster load] FAILED: {exc}", file=sys.stderr)
            return 1
        print(f"[localcluster load] {archive}: {', '.join(names)}")
    return 0


def _install_operators(state_dir: Path | None, names: list[str]) -> int:
    st = cluster.State.load(state_dir or cluster.default_state_dir())
    if st is None or st.node_mode != "kubelet":
        print(
            "[localcluster install-operators] FAILED: no real node runs from this state dir: "
            "`localcluster up --node kubelet` first",
            file=sys.stderr,
        )
        return 1
    try:
        nodeoperators.install(st.kubectl, st.kubeconfig, st.node_dir / "operator-images", names)
    except (nodeoperators.InstallError, KubectlError, node.NodeError, gotool.BuildError) as exc:
        print(f"[localcluster install-operators] FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"[localcluster install-operators] {', '.join(names or nodeoperators.NAMES)} running")
    return 0


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _print_status(st: dict[str, object]) -> None:
    if not st["components"]:
        print(f"not running (no state in {st['state_dir']})")
        return
    print(
        f"cluster in {st['state_dir']}: {'running' if st['running'] else 'stopped'}; "
        f"apiserver ready: {st.get('apiserver_ready')}; version {st.get('version')}"
    )
    comps = st["components"]
    assert isinstance(comps, dict)
    for name, c in comps.items():
        alive = "running" if c["alive"] else "DEAD"
        port = f" port {c['port']}" if c["port"] else ""
        print(f"  {name:<24} pid {c['pid']:<8} {alive}{port}  log {c['log']}")
    print(f"  KUBECONFIG={st['kubeconfig']}")


if __name__ == "__main__":
    sys.exit(main())
