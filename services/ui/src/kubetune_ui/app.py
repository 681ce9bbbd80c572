"""The web application: three pages, their JSON, live change streams, and the writes.

Pages are static HTML + one script (static/); the script fetches `/api/...` JSON and redraws
when the page's server-sent event stream (`/api/events`) says something it shows has changed.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from kubetune import errors, naming
from kubetune.kube import PODS, Kube
from kubetune_ui import insight, views
from kubetune_ui.cache import Cluster
from kubetune_ui.importance import ImportanceCache
from kubetune_ui.streams import Limits, Streams, client_of
from kubetune_ui.versioned import VersionedCache
from kubetune_ui.writing import Refused, Writer

STATIC = Path(__file__).with_name("static")
WRITE_HEADER = "X-Kubetune-UI"
"""Writes must carry it: a custom header a cross-site form or image cannot send (CSRF)."""
STUDY_ENTRIES = 8
"""Experiments whose study is kept: its trials' values (about 5 MB at 10,000 trials) and its
charts JSON (at most a few hundred KiB)."""
PAGE_ENTRIES = 256
"""Experiments whose page JSON is kept (one experiment's is about 270 KiB at 1,000 trials)."""
TRIAL_POD_SELECTORS = (
    "katib.kubeflow.org/trial={}",
    "batch.kubernetes.io/job-name={}",
    "training.kubeflow.org/job-name={}",
    "workflows.argoproj.io/workflow={}",
)


def plotly_js() -> Path:
    """plotly.js as the `plotly` package ships it (found without importing the package)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the plotly package is not installed: pip install kubetune-ui")
    return Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"message": message}, status_code=status)


def build(cluster: Cluster, kube: Kube, writer: Writer, limits: Limits | None = None) -> Starlette:
    """The app: reads come from `cluster`'s caches, logs from `kube`, writes go through
    `writer`; live streams are bounded by `limits`."""
    chart_js = plotly_js()
    streams = Streams(cluster.hub, limits or Limits())
    pages: VersionedCache[tuple[str, str], bytes] = VersionedCache(PAGE_ENTRIES)
    """The last experiment page JSON per experiment, while neither it nor a trial changed."""
    charts = insight.Limits()
    studies: VersionedCache[tuple[str, str], tuple[insight.Study, bytes]]
    studies = VersionedCache(STUDY_ENTRIES)
    """The last study and its charts JSON per experiment, like `pages`."""
    importances = ImportanceCache()

    async def page(request: Request) -> Response:
        name = request.scope["endpoint_page"]
        return FileResponse(STATIC / name, headers={"Cache-Control": "no-cache"})

    async def static(request: Request) -> Response:
        name = request.path_params["file"]
        path = chart_js if name == "plotly.min.js" else STATIC / name
        if "/" in name or not path.is_file():
            return PlainTextResponse("not found", status_code=404)
        return FileResponse(path, headers={"Cache-Control": "max-age=3600"})

    async def experiments(request: Request) -> Response:
        rows = [views.experiment_summary(e) for e in cluster.experiments.objects()]
        rows.sort(key=lambda r: (r["namespace"], r["name"]))
        return JSONResponse({"experiments": rows, "writes": writer.mode.value})

    async def experiment(request: Request) -> Response:
        ns, name = request.path_params["namespace"], request.path_params["name"]
        obj = cluster.experiments.get(ns, name)
        if obj is None:
            pages.drop((ns, name))
            return _error(404, f"no experiment {name!r} in namespace {ns!r}")
        version = _version(cluster, obj)
        body = pages.get((ns, name), version)
        if body is None:
            data = views.experiment_page(obj, cluster.trials_of(ns, name))
            body = pages.put((ns, name), version, json.dumps(data, separators=(",", ":")).encode())
        return Response(body, media_type="application/json")

    async def study(request: Request) -> tuple[insight.Study, bytes] | JSONResponse:
        """The experiment's study and its charts JSON, rebuilt only after it or a trial
        changed (shared by the charts, the importance and the contour)."""
        ns, name = request.path_params["namespace"], request.path_params["name"]
        obj = cluster.experiments.get(ns, name)
        if obj is None:
            studies.drop((ns, name))
            return _error(404, f"no experiment {name!r} in namespace {ns!r}")
        version = _version(cluster, obj)
        built = studies.get((ns, name), version)
        if built is None:
            trials = cluster.trials_of(ns, name)
            built = await asyncio.to_thread(_study_and_json, obj, trials, charts)
            studies.put((ns, name), version, built)
        return built

    async def study_charts(request: Request) -> Response:
        found = await study(request)
        if isinstance(found, Response):
            return found
        return Response(found[1], media_type="application/json")

    async def importance(request: Request) -> Response:
        found = await study(request)
        if isinstance(found, Response):
            return found
        key = (request.path_params["namespace"], request.path_params["name"])
        return JSONResponse(await asyncio.to_thread(importances.get, key, found[0]))

    async def contour(request: Request) -> Response:
        x, y = request.query_params.get("x"), request.query_params.get("y")
        if not x or not y:
            return _error(400, "x and y: give two parameter names, e.g. ?x=lr&y=momentum")
        found = await study(request)
        if isinstance(found, Response):
            return found
        try:
            data = await asyncio.to_thread(insight.contour, found[0], x, y, charts)
        except insight.BadQuery as e:
            return _error(400, str(e))
        return JSONResponse(data)

    async def trial(request: Request) -> Response:
        ns, name = request.path_params["namespace"], request.path_params["name"]
        obj = cluster.trials.get(ns, name)
        if obj is None:
            return _error(404, f"no trial {name!r} in namespace {ns!r}")
        return JSONResponse(views.trial_page(obj, _experiment_of(obj)))

    async def trial_logs(request: Request) -> Response:
        ns, name = request.path_params["namespace"], request.path_params["name"]
        obj = cluster.trials.get(ns, name)
        if obj is None:
            return _error(404, f"no trial {name!r} in namespace {ns!r}")
        text = await asyncio.to_thread(_logs, kube, obj)
        return PlainTextResponse(text)

    async def events(request: Request) -> Response:
        client = client_of(request, writer.identity.client_of(request.headers))
        try:
            return streams.open(client, request.query_params.getlist("topic"))
        except Refused as e:
            return _error(e.status, e.message)

    async def create(request: Request) -> Response:
        try:
            user = writer.user_of(request.headers)
            _check_write(request)
            form = await request.json()
            body = _parse_experiment(str(form.get("yaml", "")))
            ns = str(form.get("namespace") or body["metadata"].get("namespace") or "default")
            body["metadata"]["namespace"] = ns
            made = await asyncio.to_thread(writer.create, user, body, ns)
        except Refused as e:
            return _error(e.status, e.message)
        except errors.ApiError as e:
            return _error(e.status or 500, e.message)
        meta = made.get("metadata") or {}
        return JSONResponse({"namespace": meta.get("namespace"), "name": meta.get("name")}, 201)

    async def delete(request: Request) -> Response:
        ns, name = request.path_params["namespace"], request.path_params["name"]
        try:
            user = writer.user_of(request.headers)
            _check_write(request)
            await asyncio.to_thread(writer.delete, user, ns, name)
        except Refused as e:
            return _error(e.status, e.message)
        except errors.ApiError as e:
            return _error(e.status or 500, e.message)
        return JSONResponse({"deleted": name})

    async def restart(request: Request) -> Response:
        ns, name = request.path_params["namespace"], request.path_params["name"]
        try:
            user = writer.user_of(request.headers)
            _check_write(request)
            form = await request.json()
            count = form.get("maxTrialCount")
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise Refused(400, "maxTrialCount: give a whole number of trials, at least 1")
            await asyncio.to_thread(writer.set_max_trials, user, ns, name, count)
        except Refused as e:
            return _error(e.status, e.message)
        except errors.ApiError as e:
            return _error(e.status or 500, e.message)
        return JSONResponse({"maxTrialCount": count})

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(request: Request) -> Response:
        ready = cluster.experiments.synced.is_set() and cluster.trials.synced.is_set()
        return PlainTextResponse("ok" if ready else "caches not synced", 200 if ready else 503)

    def page_route(path: str, file: str) -> Route:
        async def handler(request: Request) -> Response:
            request.scope["endpoint_page"] = file
            return await page(request)

        return Route(path, handler)

    routes = [
        page_route("/", "index.html"),
        page_route("/experiments/{namespace}/{name}", "experiment.html"),
        page_route("/trials/{namespace}/{name}", "trial.html"),
        Route("/static/{file}", static),
        Route("/api/experiments", experiments),
        Route("/api/experiments", create, methods=["POST"]),
        Route("/api/experiments/{namespace}/{name}", experiment),
        Route("/api/experiments/{namespace}/{name}", delete, methods=["DELETE"]),
        Route("/api/experiments/{namespace}/{name}/max-trials", restart, methods=["POST"]),
        Route("/api/experiments/{namespace}/{name}/study", study_charts),
        Route("/api/experiments/{namespace}/{name}/importance", importance),
        Route("/api/experiments/{namespace}/{name}/contour", contour),
        Route("/api/trials/{namespace}/{name}", trial),
        Route("/api/trials/{namespace}/{name}/logs", trial_logs),
        Route("/api/events", events),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
    ]
    return Starlette(routes=routes)


def _version(cluster: Cluster, experiment: dict[str, Any]) -> tuple[str, int]:
    """What an experiment's page and study are built from: it and its trials' cache version."""
    meta = experiment["metadata"]
    return str(meta.get("resourceVersion")), cluster.trials_version(meta["namespace"], meta["name"])


def _study_and_json(
    experiment: dict[str, Any], trials: list[dict[str, Any]], limits: insight.Limits
) -> tuple[insight.Study, bytes]:
    study = insight.study_of(experiment, trials)
    data = insight.insight(experiment, study, limits)
    return study, json.dumps(data, separators=(",", ":")).encode()


def _check_write(request: Request) -> None:
    if request.headers.get(WRITE_HEADER) != "1":
        raise Refused(403, f"writes need the {WRITE_HEADER}: 1 header (sent by the UI's page)")


def _parse_experiment(text: str) -> dict[str, Any]:
    """The pasted YAML (or JSON) as one Experiment; a clear error otherwise."""
    try:
        body = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise Refused(400, f"the YAML does not parse: {e}") from e
    if not isinstance(body, dict):
        raise Refused(400, "paste one Experiment: a YAML mapping with apiVersion, kind, metadata")
    if body.get("kind") != "Experiment":
        raise Refused(400, f"kind: {body.get('kind')!r} is not Experiment: set kind: Experiment")
    if not isinstance(body.get("metadata"), dict):
        raise Refused(400, "metadata: missing; set metadata.name")
    return body


def _experiment_of(trial: dict[str, Any]) -> str:
    """The owning Experiment's name; else the experiment label (the name, unless shortened)."""
    meta = trial.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "Experiment":
            return str(ref.get("name"))
    return str((meta.get("labels") or {}).get(naming.LABEL_EXPERIMENT) or "")


def _logs(kube: Kube, trial: dict[str, Any]) -> str:
    """The primary container's log of each of the trial's pods (the newest lines)."""
    meta = trial.get("metadata") or {}
    ns, name = meta.get("namespace", ""), meta.get("name", "")
    container = (trial.get("spec") or {}).get("primaryContainerName")
    pods: list[dict[str, Any]] = []
    try:
        for selector in TRIAL_POD_SELECTORS:
            pods = kube.list_all(PODS, ns, label_selector=selector.format(name))
            if pods:
                break
    except errors.ApiError as e:
        return f"(cannot list the trial's pods: {e.message})"
    if not pods:
        return "(no pods: not started yet, or deleted after the trial ended)"
    parts = []
    for pod in pods:
        pod_name = pod["metadata"]["name"]
        names = [c["name"] for c in pod["spec"]["containers"]]
        chosen = container if container in names else names[0]
        try:
            text = kube.pod_log(pod_name, ns, container=chosen, tail_lines=2000)
        except errors.ApiError as e:
            text = f"(no log: {e.message})"
        parts.append(f"==> {pod_name}/{chosen} <==\n{text}")
    return "\n".join(parts)
