"""`kubetune`: run, get, best, logs, plot, metrics, uninstall, katib-check and import-katib, on the
kubeconfig's cluster."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from kubetune import api, errors, metrichistory, multiobjective
from kubetune.api.experiment import Experiment
from kubetune.api.trial import Trial
from kubetune.kube import EXPERIMENTS, PODS, TRIALS, Kube, connect
from kubetune_cli import (
    exporting,
    fronts,
    importing,
    katibcheck,
    katibdb,
    katibfinalizers,
    overview,
    tables,
    uninstalling,
)
from kubetune_cli.plotting import plot, plot_front, plot_history
from kubetune_cli.reading import (
    UserError,
    best,
    counts,
    experiment_state,
    get_experiment,
    list_trials,
    trial_pages,
)

FINISHED = {"Succeeded", "Failed"}


def _kube(args: argparse.Namespace) -> Kube:
    path = args.kubeconfig or os.environ.get("KUBECONFIG")
    default = Path.home() / ".kube" / "config"
    in_cluster = "KUBERNETES_SERVICE_HOST" in os.environ
    if not path and not default.exists() and not in_cluster:
        raise UserError("no cluster configured: set KUBECONFIG or pass --kubeconfig")
    if path and not Path(path).exists():
        raise UserError(f"kubeconfig {path} does not exist")
    try:
        return Kube(connect(path))
    except Exception as e:
        raise UserError(f"cannot load the cluster configuration: {e}") from e


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def _namespace(args: argparse.Namespace) -> str:
    return str(args.namespace or "default")


def cmd_run(args: argparse.Namespace) -> int:
    kube = _kube(args)
    try:
        documents = [d for d in yaml.safe_load_all(Path(args.file).read_text()) if d]
    except FileNotFoundError as e:
        raise UserError(f"no such file: {args.file}") from e
    except yaml.YAMLError as e:
        raise UserError(f"{args.file} is not valid YAML: {e}") from e
    created = []
    for document in documents:
        try:
            experiment = api.load(document)
        except api.ManifestError as e:
            raise UserError(
                f"{args.file}: " + "\n  ".join(["invalid manifest:", *e.problems])
            ) from e
        if not isinstance(experiment, Experiment):
            raise UserError(f"{args.file}: kubetune run takes Experiments, not {experiment.kind}")
        namespace = experiment.metadata.namespace or _namespace(args)
        body = experiment.to_wire()
        body["metadata"]["namespace"] = namespace
        try:
            kube.create(EXPERIMENTS, body, namespace)
        except errors.AlreadyExists as e:
            raise UserError(
                f"experiment {experiment.metadata.name} already exists in {namespace}"
            ) from e
        except errors.ApiError as e:
            raise UserError(
                f"the cluster refused experiment {experiment.metadata.name}: {e.message}"
            ) from e
        print(f"experiment {namespace}/{experiment.metadata.name} created")
        created.append((experiment.metadata.name or "", namespace))
    if args.watch:
        for name, namespace in created:
            watch(kube, name, namespace, interval=args.interval)
    return 0


def watch(kube: Kube, name: str, namespace: str, interval: float = 2.0) -> None:
    """Redraw the experiment's overview until it finishes (on a terminal), else print changes.

    The overview, not every Trial: each refresh costs the same at 10 trials as at 100,000."""
    last = ""
    tty = sys.stdout.isatty()
    while True:
        experiment = get_experiment(kube, name, namespace)
        text = overview.text(overview.read(kube, experiment))
        if text != last:
            print(("\x1b[2J\x1b[H" if tty else "") + text + ("" if tty else "\n"), flush=True)
            last = text
        if experiment_state(experiment) in FINISHED:
            return
        time.sleep(interval)


def _experiments_table(kube: Kube, namespace: str) -> str:
    rows = []
    for obj in kube.list_all(EXPERIMENTS, namespace):
        experiment = Experiment.model_validate(obj)
        status = experiment.status
        rows.append(
            [
                experiment.metadata.name or "",
                experiment_state(experiment),
                str((status.trials if status else None) or 0),
                str((status.trials_succeeded if status else None) or 0),
                (status.current_optimal_trial.best_trial_name or "-")
                if status and status.current_optimal_trial
                else "-",
            ]
        )
    return tables.render(["EXPERIMENT", "STATE", "TRIALS", "SUCCEEDED", "BEST"], rows)


def _cut_note(shown: int, limit: int | None, experiment: Experiment) -> str | None:
    """Said under a table `--limit` cut short (the total is the Experiment status's count)."""
    total = counts(experiment)["trials"]
    if limit is None or shown < limit or total <= shown:
        return None
    return f"(the first {shown} of {total} trials: --limit to show more)"


def _every_trial(kube: Kube, experiment: Experiment, args: argparse.Namespace) -> int:
    """The whole table (`--all`, `--sort-by`): sorted, it needs every Trial first; unsorted,
    pages print as they arrive and `--limit` stops the reading early."""
    metric = experiment.spec.objective.objective_metric_name if experiment.spec.objective else ""
    limit: int | None = args.limit
    if args.sort_by is None and args.output == "table":
        table = tables.StreamedTable(metric or "objective")
        shown = 0
        for page in trial_pages(kube, experiment, limit):
            shown += len(page)
            for line in table.lines(page):
                print(line)
            sys.stdout.flush()
        note = _cut_note(shown, limit, experiment)
        if note:
            print(note)
        return 0
    if args.sort_by is None:
        rows = [row for page in trial_pages(kube, experiment, limit) for row in page]
    else:
        rows = tables.sort_rows(list_trials(kube, experiment), args.sort_by, args.descending)
        rows = rows[:limit] if limit is not None else rows
    if args.output == "json":
        print(json.dumps([asdict(row) for row in rows], indent=2))
        return 0
    print(tables.trial_table(rows, metric or "objective"))
    note = _cut_note(len(rows), limit, experiment)
    if note:
        print(note)
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    kube = _kube(args)
    namespace = _namespace(args)
    if not args.experiment:
        print(_experiments_table(kube, namespace))
        return 0
    experiment = get_experiment(kube, args.experiment, namespace)
    if args.descending and args.sort_by is None:
        args.sort_by = "created"
    if args.all or args.sort_by is not None:
        return _every_trial(kube, experiment, args)
    view = overview.read(kube, experiment, args.limit or overview.DEFAULT_LIMIT)
    if args.output == "json":
        print(json.dumps(overview.as_json(view), indent=2))
    else:
        print(overview.text(view))
    return 0


def cmd_best(args: argparse.Namespace) -> int:
    kube = _kube(args)
    experiment = get_experiment(kube, args.experiment, _namespace(args))
    if multiobjective.is_multi(experiment.spec.objective):
        if args.output == "json":
            print(json.dumps(fronts.as_json(experiment), indent=2))
        else:
            print(fronts.text(experiment))
        return 0
    optimal = best(experiment)
    if optimal is None:
        raise UserError(f"experiment {args.experiment} has no successful trial yet")
    if args.output == "json":
        print(json.dumps(optimal, indent=2))
        return 0
    rows = [["trial", optimal["bestTrialName"]]]
    assignments = optimal.get("parameterAssignments") or []
    rows += [[p["name"], tables.readable(str(p["value"]))] for p in assignments]
    for metric in (optimal.get("observation") or {}).get("metrics") or []:
        low, high, latest = (tables.readable(str(metric.get(k))) for k in ("min", "max", "latest"))
        rows.append([metric["name"], f"min {low} max {high} latest {latest}"])
    print(tables.render(["FIELD", "VALUE"], rows))
    return 0


def _trial_pods(kube: Kube, trial: str, namespace: str) -> list[dict[str, Any]]:
    for selector in (
        f"katib.kubeflow.org/trial={trial}",
        f"batch.kubernetes.io/job-name={trial}",
        f"training.kubeflow.org/job-name={trial}",
        f"workflows.argoproj.io/workflow={trial}",
    ):
        pods = kube.list_all(PODS, namespace, label_selector=selector)
        if pods:
            return pods
    return []


def cmd_logs(args: argparse.Namespace) -> int:
    kube = _kube(args)
    namespace = _namespace(args)
    obj = kube.get_or_none(TRIALS, args.trial, namespace)
    if obj is None:
        raise UserError(f"no trial {args.trial!r} in namespace {namespace!r}")
    trial = Trial.model_validate(obj)
    pods = _trial_pods(kube, args.trial, namespace)
    if not pods:
        raise UserError(
            f"trial {args.trial} has no pods (yet, or they were deleted with retain: false)"
        )
    container = args.container or trial.spec.primary_container_name
    for pod in pods:
        pod_name = pod["metadata"]["name"]
        names = [c["name"] for c in pod["spec"]["containers"]]
        chosen = container if container in names else names[0]
        if len(pods) > 1:
            print(f"==> {pod_name}/{chosen} <==")
        try:
            print(kube.pod_log(pod_name, namespace, container=chosen), end="")
        except errors.ApiError as e:
            print(f"(no log for {pod_name}/{chosen}: {e.message})", file=sys.stderr)
    return 0


def cmd_metrics(args: argparse.Namespace) -> int:
    """A trial's metric history (status.metricHistory) as a table by step, or JSON; a plot."""
    kube = _kube(args)
    namespace = _namespace(args)
    obj = kube.get_or_none(TRIALS, args.trial, namespace)
    if obj is None:
        raise UserError(f"no trial {args.trial!r} in namespace {namespace!r}")
    status = obj.get("status") or {}
    history = metrichistory.read(status)
    if args.metric:
        if args.metric not in history:
            known = ", ".join(sorted(history)) or "none"
            raise UserError(
                f"trial {args.trial} has no history of metric {args.metric!r} (it has: {known})"
            )
        history = {args.metric: history[args.metric]}
    if not history:
        raise UserError(
            f"trial {args.trial} has no metric history yet (nothing reported, or it ran "
            "before kubetune kept histories)"
        )
    if args.output == "json":
        print(json.dumps({name: [list(p) for p in points] for name, points in history.items()}))
    else:
        counts = ", ".join(
            f"{name} {len(points)} of {metrichistory.reports(status, name)} reports kept"
            for name, points in history.items()
        )
        print(f"trial {namespace}/{args.trial}: {counts}")
        print(tables.history_table(history))
    if args.plot:
        plot_history(history, f"{namespace}/{args.trial}", Path(args.plot))
        print(f"wrote {args.plot}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    kube = _kube(args)
    namespace = _namespace(args)
    experiment = get_experiment(kube, args.experiment, namespace)
    if experiment.spec.objective is None:
        raise UserError(f"experiment {args.experiment} has no objective to plot")
    rows = list_trials(kube, experiment)
    title = f"{namespace}/{args.experiment}"
    if multiobjective.is_multi(experiment.spec.objective):
        plot_front(rows, experiment.spec.objective, title, Path(args.output))
    else:
        plot(rows, experiment.spec.objective, title, Path(args.output))
    print(f"wrote {args.output}")
    return 0


def cmd_uninstall(args: argparse.Namespace) -> int:
    kube = _kube(args)
    the_plan = uninstalling.plan(
        kube, delete_experiments=args.delete_experiments, delete_crds=args.delete_crds
    )
    mode = "deleting" if args.delete_experiments else "keeping"
    if args.dry_run:
        print(f"kubetune uninstall, {mode} the Experiments (dry run, nothing changed):")
        print(the_plan.text())
        return 0
    print(f"kubetune uninstall, {mode} the Experiments:")
    uninstalling.execute(kube, the_plan, args.timeout, sys.stdout)
    return 0


def _uninstall_parser(sub: Any) -> None:
    uninstall = sub.add_parser(
        "uninstall",
        help="remove kubetune from the cluster, keeping or deleting the Experiments",
        description=uninstalling.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mode = uninstall.add_mutually_exclusive_group()
    mode.add_argument(
        "--keep-experiments",
        dest="delete_experiments",
        action="store_false",
        help="(default) Experiments, Suggestions, Trials and the CRDs stay, free of kubetune's "
        "finalizer, for Katib to take back",
    )
    mode.add_argument(
        "--delete-experiments",
        dest="delete_experiments",
        action="store_true",
        help="delete every Experiment first (with its Trials, jobs, Suggestions and volumes)",
    )
    uninstall.add_argument(
        "--delete-crds",
        action="store_true",
        help="with --delete-experiments: also the CRDs (refused while Katib's controller runs)",
    )
    uninstall.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    uninstall.add_argument(
        "--timeout",
        type=_positive,
        default=300,
        help="seconds each wait may take before it stops and names what is left (default 300)",
    )
    uninstall.set_defaults(func=cmd_uninstall, delete_experiments=False)


def cmd_export(args: argparse.Namespace) -> int:
    kube = _kube(args)
    namespace = _namespace(args)
    doc = exporting.document(kube, args.experiment, namespace)
    count = len(doc["results"])
    if args.config_map:
        done = exporting.to_config_map(kube, args.config_map, namespace, doc)
        print(
            f"configmap {namespace}/{args.config_map} {done}: {count} known results of "
            f"experiment {args.experiment}; name it in spec.warmStart.configMaps"
        )
    elif args.output:
        Path(args.output).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.output}: {count} known results of experiment {args.experiment}")
    else:
        print(json.dumps(doc, indent=2))
    return 0


def _export_parser(sub: Any) -> None:
    export = sub.add_parser(
        "export",
        help="an experiment's succeeded trials as known results (results.json) for warm start",
        description="Writes the results.json document that spec.warmStart.configMaps reads: "
        "to stdout, a file (-o) or a ConfigMap (--config-map). Export an experiment before "
        "deleting it: its trials go with it.",
    )
    export.add_argument("experiment")
    where = export.add_mutually_exclusive_group()
    where.add_argument("-o", "--output", metavar="FILE", help="write the document to FILE")
    where.add_argument(
        "--config-map", metavar="NAME", help="create (or update) ConfigMap NAME in the namespace"
    )
    export.set_defaults(func=cmd_export)


def cmd_import_katib(args: argparse.Namespace) -> int:
    if not args.experiment and not args.all:
        raise UserError(
            "name an EXPERIMENT whose trials to import, or pass --all for the namespace"
        )
    if args.experiment and args.all:
        raise UserError("pass an EXPERIMENT or --all, not both")
    kube = _kube(args)
    try:
        source = katibdb.connect(args.db_url)
    except katibdb.SourceError as e:
        raise UserError(str(e)) from e
    try:
        importing.run(
            kube,
            source,
            _namespace(args),
            args.experiment,
            dry_run=args.dry_run,
            out=sys.stdout,
            batch=args.batch_size,
        )
    finally:
        source.close()
    return 0


def cmd_katib_check(args: argparse.Namespace) -> int:
    kube = _kube(args)
    findings = katibcheck.check(kube, None if args.all_namespaces else _namespace(args))
    if args.release_finalizers and findings.finalizers:
        if findings.blocking:
            raise UserError(
                "--release-finalizers refused while Katib runs (its controller adds them back):\n"
                + findings.text()
            )
        released = sum(katibfinalizers.release(kube, held) for held in findings.finalizers)
        print(f"released Katib's finalizer from {released} objects")
        findings.finalizers = []
    print(findings.text())
    return 1 if findings.blocking else 0


def _import_katib_parser(sub: Any) -> None:
    command = sub.add_parser(
        "import-katib",
        help="copy Katib's metric logs (its MySQL or PostgreSQL) into the Trials' histories",
        description=importing.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument("experiment", nargs="?", help="the Experiment whose Trials to import")
    command.add_argument("--all", action="store_true", help="every Trial of the namespace")
    command.add_argument(
        "--db-url",
        required=True,
        help="Katib's database: postgres://USER@HOST[:PORT]/DATABASE[?sslmode=require] or "
        f"mysql://USER@HOST[:PORT]/DATABASE; the password from ${katibdb.PASSWORD_ENV}",
    )
    command.add_argument("--dry-run", action="store_true", help="print what would change")
    command.add_argument(
        "--batch-size",
        type=_positive,
        default=importing.BATCH,
        help=f"rows read from the database at once (default {importing.BATCH})",
    )
    command.set_defaults(func=cmd_import_katib)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="kubetune", description=__doc__)
    root.add_argument("--kubeconfig", help="kubeconfig path (default: $KUBECONFIG, ~/.kube/config)")
    root.add_argument(
        "-n",
        "--namespace",
        default=os.environ.get("KUBETUNE_NAMESPACE"),
        help="namespace (default: the manifest's, else 'default')",
    )
    sub = root.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="submit the Experiment(s) in a YAML file")
    run.add_argument("file")
    run.add_argument("--watch", action="store_true", help="follow until the experiment ends")
    run.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    run.set_defaults(func=cmd_run)
    get = sub.add_parser(
        "get",
        help="list experiments; or one experiment's state, counts, best and active trials",
        description="Without --all or --sort-by, answers from the Experiment's status and its "
        "running and pending trials (an experiment of at most --limit trials is listed whole).",
    )
    get.add_argument("experiment", nargs="?")
    get.add_argument(
        "--all", action="store_true", help="every trial of the experiment, as pages arrive"
    )
    get.add_argument(
        "--sort-by",
        choices=tables.SORT_KEYS,
        help="every trial, sorted (reads them all before printing)",
    )
    get.add_argument("--descending", action="store_true", help="with --sort-by (default created)")
    get.add_argument(
        "--limit",
        type=_positive,
        help=f"at most this many trial rows (default: {overview.DEFAULT_LIMIT} in the default "
        "view, all with --all or --sort-by)",
    )
    get.add_argument("-o", "--output", choices=["table", "json"], default="table")
    get.set_defaults(func=cmd_get)
    best_cmd = sub.add_parser(
        "best", help="the best trial of an experiment (its Pareto front: several objectives)"
    )
    best_cmd.add_argument("experiment")
    best_cmd.add_argument("-o", "--output", choices=["table", "json"], default="table")
    best_cmd.set_defaults(func=cmd_best)
    logs = sub.add_parser("logs", help="the training log of a trial")
    logs.add_argument("trial")
    logs.add_argument("-c", "--container", help="container (default: the primary container)")
    logs.set_defaults(func=cmd_logs)
    plot_cmd = sub.add_parser(
        "plot",
        help="plot the objective per trial to a PNG (several objectives: the Pareto front)",
    )
    plot_cmd.add_argument("experiment")
    plot_cmd.add_argument("-o", "--output", required=True)
    plot_cmd.set_defaults(func=cmd_plot)
    metrics = sub.add_parser("metrics", help="the metric history of a trial (table, JSON, plot)")
    metrics.add_argument("trial")
    metrics.add_argument("--metric", help="one metric only (default: all)")
    metrics.add_argument("-o", "--output", choices=["table", "json"], default="table")
    metrics.add_argument("--plot", metavar="FILE.png", help="also plot each metric by step")
    metrics.set_defaults(func=cmd_metrics)
    _export_parser(sub)
    _uninstall_parser(sub)
    _import_katib_parser(sub)
    check = sub.add_parser(
        "katib-check",
        help="whether Katib still runs here (exit 1: remove what it names before kubetune runs)",
        description=katibcheck.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument(
        "-A", "--all-namespaces", action="store_true", help="Trials of every namespace"
    )
    check.add_argument(
        "--release-finalizers",
        action="store_true",
        help="remove Katib's finalizers from Experiments and Trials (refused while Katib runs)",
    )
    check.set_defaults(func=cmd_katib_check)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except (UserError, errors.InvalidName) as e:
        print(f"kubetune: {e}", file=sys.stderr)
        return 1
    except errors.ApiError as e:
        print(f"kubetune: the cluster answered {e.status} {e.reason}: {e.message}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"kubetune: cannot reach the cluster: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
