"""`pns-collector`: the metrics collector sidecar's command line.

Accepts exactly the flags the webhook passes (contracts: Pod injection), each with an env-var
fallback (`KUBETUNE_<FLAG>`), plus tuning flags. Exit codes: 0 every training process ended
well (or SIGTERM) and the report is written; 1 a training process failed; 2 bad flags, filter
regex or early-stopping rule; 3 the report could not be written; 4 no training process
registered in time, or `--timeout` expired.
"""

from __future__ import annotations

# `_signal`, the C module under `signal`: the same calls with plain int numbers (`signal` makes
# enums of its constants at import, a fortieth of this sidecar's start in every trial pod).
import _signal  # type: ignore[import-not-found]  # typeshed has no stub for it
import gc
import os
import sys

from kubetune import lightflags, lightlog, plainthreads, procwait
from kubetune.api import literals
from kubetune.incluster import InCluster
from kubetune.kube import Kube, connect
from kubetune.observations import Objective, Strategy
from kubetune.typenames import TYPE_CHECKING
from kubetune_pns_collector import collecting, parsing, reporting, stopping, summaries

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import FrameType
    from typing import Any, NoReturn

log = lightlog.get("pns-collector")

KINDS = ("StdOut", "File", "TensorFlowEvent", "PrometheusMetric", "None", "Push")
_SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def _env(flag: str) -> str:
    return "KUBETUNE_" + flag.upper().replace("-", "_")


def build_parser() -> lightflags.Parser:
    p = lightflags.Parser(
        "pns-collector",
        "Wait for every training process of this pod, collect its metrics while it runs and "
        "report them in the Trial's status.observation.",
        lightflags.CONNECTION_FLAGS,
    )

    def flag(name: str, **kw: Any) -> None:
        p.add(lightflags.Flag(f"--{name}", env=_env(name), **kw))

    flag("trial-name", required=True, help="the Trial to report to")
    flag("namespace", default=None, help="the Trial's namespace (default: the pod's)")
    flag("objective-metric", required=True, help="objective metric name")
    flag("objective-type", default="", choices=literals.OBJECTIVE_TYPES, help="goal type")
    flag("additional-metrics", default="", help="more metric names, ';'-separated")
    flag("metric-strategies", default="", help="name=min|max|latest, ';'-separated")
    flag("collector-kind", default="StdOut", choices=KINDS, help="where metrics come from")
    flag("metrics-path", default="", help="metrics file (StdOut, File) or event directory")
    flag(
        "metrics-url",
        default="",
        help="PrometheusMetric: the training's endpoint, e.g. http://127.0.0.1:8080/metrics",
    )
    flag("scrape-interval", type=float, default=1.0, help="PrometheusMetric: seconds per scrape")
    flag("format", default="TEXT", choices=("TEXT", "JSON"), help="metrics file format")
    p.add(
        lightflags.Flag(
            "--filter",
            repeat=True,
            help="metrics-format regex with two groups (name, value)",
        )
    )
    flag("log-dir", default=procwait.DEFAULT_LOG_DIR, help="shared dir of the PID records")
    flag("expected-processes", type=int, default=1, help="number of wrapped containers")
    p.add(lightflags.Flag("--early-stop-rule", repeat=True, help="name;value;comparison;startStep"))
    flag("register-timeout", type=float, default=600.0, help="seconds to wait for registration")
    flag("timeout", type=float, default=0.0, help="seconds to wait in all (0 = no limit)")
    flag(
        "report-interval",
        type=float,
        default=10.0,
        help="seconds before the first and between intermediate reports",
    )
    flag("report-timeout", type=float, default=60.0, help="seconds to retry the final report")
    flag("history", type=int, default=summaries.DEFAULT_HISTORY, help="recent values kept")
    return p


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(";") if n.strip()]


def objective_from(args: lightflags.Values) -> Objective:
    strategies = []
    for item in _names(args.metric_strategies):
        name, _, value = item.partition("=")
        if value not in literals.METRIC_STRATEGIES:
            raise ValueError(f"--metric-strategies {item!r}: want name=min|max|latest")
        strategies.append(Strategy(name.strip(), value))
    return Objective(
        type=args.objective_type,
        objective_metric_name=args.objective_metric,
        additional_metric_names=tuple(_names(args.additional_metrics)),
        metric_strategies=tuple(strategies),
    )


def _namespace(args: lightflags.Values) -> str:
    if args.namespace:
        return str(args.namespace)
    try:
        with open(_SA_NAMESPACE, encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return "default"


def build_source(args: lightflags.Values, names: list[str]) -> collecting.Source | None:
    """The metric source of the collector kind (None for None/Push: nothing to collect)."""
    kind = args.collector_kind
    if kind in ("None", "Push"):
        return None
    log_dir = str(args.log_dir)
    if kind == "PrometheusMetric":
        if not args.metrics_url:
            raise ValueError("--metrics-url is required for --collector-kind PrometheusMetric")
        from kubetune_pns_collector import scraping  # urllib.request: only for this kind

        return scraping.PrometheusSource(
            args.metrics_url, names, args.filter, interval=args.scrape_interval
        )
    if kind == "TensorFlowEvent":
        return collecting.EventSource(
            str(args.metrics_path or os.path.join(log_dir, "tfevent")), names
        )
    path = str(args.metrics_path or os.path.join(log_dir, "metrics.log"))
    parser: parsing.Parser
    if kind == "File" and args.format == "JSON":
        if args.filter:
            raise parsing.FilterError("--filter cannot be used with --format JSON")
        parser = parsing.JsonParser(names)
    else:
        parser = parsing.TextParser(names, args.filter)
    echo = sys.stdout if kind == "StdOut" else None
    return collecting.TextSource(path, parser, echo)


def _library_logging(args: lightflags.Values) -> None:
    """The same lines from the libraries that log through `logging`; only the kinds and
    connections that load them pay for its import."""
    import logging

    from kubetune import logs

    logs.configure(args.log_format, args.log_level)
    logging.getLogger("watchfiles").setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    stop = plainthreads.Event()
    received: list[int] = []

    def _stop(signum: int, frame: FrameType | None) -> None:
        # No logging here: a handler that writes while the main thread is writing the same
        # stream fails with "reentrant call" and its line is lost.
        received.append(signum)
        stop.set()

    _signal.signal(_signal.SIGTERM, _stop)
    _signal.signal(_signal.SIGINT, _stop)
    lightlog.configure(args.log_format, args.log_level)
    if args.collector_kind == "TensorFlowEvent":
        _library_logging(args)  # watchfiles logs through `logging`
    try:
        objective = objective_from(args)
        summary = summaries.RunningSummary(objective, args.history)
        names = sorted(summary.names)
        source = build_source(args, names)
        rules = [stopping.parse_rule(r) for r in args.early_stop_rule]
    except (ValueError, parsing.FilterError, stopping.RuleError) as e:
        log.error("%s", e)
        return collecting.ExitCode.USAGE
    stopper = None
    if rules:
        stopper = stopping.EarlyStopper(
            rules, objective.objective_metric_name, objective.type or literals.UNKNOWN
        )
    reporter = None
    if source is not None:
        api = connect(args.kubeconfig)
        if not isinstance(api, InCluster):
            _library_logging(args)  # the kubernetes client and urllib3 log through `logging`
        kube = Kube(api)
        reporter = reporting.Reporter(kube, args.trial_name, _namespace(args))
    settings = collecting.Settings(
        log_dir=str(args.log_dir),
        expected=args.expected_processes,
        register_timeout=args.register_timeout,
        timeout=args.timeout or None,
        report_interval=args.report_interval,
        report_timeout=args.report_timeout,
    )
    collector = collecting.Collector(settings, source, summary, reporter, stopper, stop)
    log.info(
        "collecting %s for trial %s (%s, %d training process(es) expected)",
        ", ".join(names),
        args.trial_name,
        args.collector_kind,
        settings.expected,
    )
    outcome = collector.run()
    if received:
        log.info("signal %d: reported what was collected; exiting", received[0])
    if outcome.code == collecting.ExitCode.OK:
        done = "observation reported" if reporter is not None else "nothing to collect"
        log.info("%s; %s", outcome.message, done)
    else:
        log.error("%s", outcome.message)
    return int(outcome.code)


def run() -> NoReturn:
    """The console script: `main`, then out without the interpreter's teardown (freeing every
    module of the client libraries took ~0.8 s on a busy node, and the Job, so the Trial, only
    completes when this sidecar has exited); output is flushed first. The garbage collector
    is turned on here: the entrypoint turns it off while the modules load."""
    gc.enable()
    code = main()
    if "logging" in sys.modules:  # a library logged through it (`_library_logging`)
        import logging

        logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105 - importing contextlib cost 0.6 ms of CPU in every trial pod
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed or broken stream: nothing more can be said on it
    os._exit(code)


if __name__ == "__main__":
    run()
