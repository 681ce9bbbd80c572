"""Trial pod injection: the contract with pns-collector, idempotency, the denials."""

from __future__ import annotations

import copy
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from webhook_cases import NS, StaticCluster, job, pod, trial

from kubetune import config as katib_config
from kubetune import naming, procwait, wrapperscript
from kubetune_webhook import injecting, patching

CONFIG = katib_config.default()


def _inject(p: dict[str, Any], t: dict[str, Any] | None = None) -> dict[str, Any]:
    return injecting.inject(p, t or trial(), NS, CONFIG)


def _container(p: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in p["spec"]["containers"] if c["name"] == name)


def test_stdout_pod_gets_everything_the_contract_names() -> None:
    out = _inject(pod())
    meta = out["metadata"]
    assert meta["labels"][naming.LABEL_TRIAL] == "random-abc"
    assert meta["labels"][naming.LABEL_EXPERIMENT] == "random"
    assert meta["annotations"][naming.ISTIO_INJECT] == "false"
    spec = out["spec"]
    assert spec["shareProcessNamespace"] is True
    assert {"name": "metrics-volume", "emptyDir": {}} in spec["volumes"]
    training = _container(out, "training-container")
    assert injecting.trial_name_env("random-abc") in training["env"]
    assert training["command"][:2] == ["sh", "-c"]
    assert "args" not in training
    assert {"name": "metrics-volume", "mountPath": "/var/log/katib"} in training["volumeMounts"]
    sidecar = _container(out, "metrics-logger-and-collector")
    assert sidecar["image"] == katib_config.COLLECTOR_IMAGE
    assert sidecar["resources"] == katib_config.COLLECTOR_RESOURCES
    assert sidecar["args"] == [
        "--trial-name",
        "random-abc",
        "--namespace",
        NS,
        "--objective-metric",
        "accuracy",
        "--objective-type",
        "maximize",
        "--additional-metrics",
        "loss",
        "--metric-strategies",
        "accuracy=max;loss=max",
        "--collector-kind",
        "StdOut",
        "--metrics-path",
        "/var/log/katib/metrics.log",
        "--format",
        "TEXT",
        "--log-dir",
        "/var/log/katib",
        "--expected-processes",
        "1",
    ]
    assert sidecar["volumeMounts"] == [{"name": "metrics-volume", "mountPath": "/var/log/katib"}]


def test_file_collector_flags_filters_rules_and_the_user_dir() -> None:
    t = trial(
        metricsCollector={
            "collector": {"kind": "File"},
            "source": {
                "fileSystemPath": {"kind": "File", "path": "/katib/mnist.log", "format": "TEXT"},
                "filter": {"metricsFormat": ["(a)=(b)", "(c):(d)"]},
            },
        },
        earlyStoppingRules=[
            {"name": "accuracy", "value": "0.6", "comparison": "less", "startStep": 4}
        ],
    )
    out = _inject(pod(), t)
    args = _container(out, "metrics-logger-and-collector")["args"]
    assert args[args.index("--metrics-path") + 1] == "/katib/mnist.log"
    assert args[args.index("--format") + 1] == "TEXT"
    assert [args[i + 1] for i, a in enumerate(args) if a == "--filter"] == ["(a)=(b)", "(c):(d)"]
    assert args[args.index("--early-stop-rule") + 1] == "accuracy;0.6;less;4"
    for name in ("training-container", "metrics-logger-and-collector"):
        mounts = {m["mountPath"] for m in _container(out, name)["volumeMounts"]}
        assert mounts == {"/var/log/katib", "/katib"}
    script = _container(out, "training-container")["command"][2]
    assert "tee -a" not in script  # the File collector reads the user's own file


def test_tfevent_directory_inside_log_dir_needs_no_second_mount() -> None:
    t = trial(
        metricsCollector={
            "collector": {"kind": "TensorFlowEvent"},
            "source": {"fileSystemPath": {"kind": "Directory", "path": "/var/log/katib/tfevent/"}},
        }
    )
    out = _inject(pod(), t)
    args = _container(out, "metrics-logger-and-collector")["args"]
    assert args[args.index("--metrics-path") + 1] == "/var/log/katib/tfevent/"
    assert "--format" not in args
    assert [m["mountPath"] for m in _container(out, "training-container")["volumeMounts"]] == [
        "/var/log/katib"
    ]


@pytest.mark.parametrize("kind", ["StdOut", "File", "TensorFlowEvent", "Push", "Custom"])
def test_mutating_twice_equals_once(kind: str) -> None:
    spec: dict[str, Any] = {"collector": {"kind": kind}}
    if kind == "Custom":
        spec["collector"]["customCollector"] = {"name": "my-collector", "image": "me/collector:1"}
    if kind == "File":
        spec["source"] = {
            "fileSystemPath": {"kind": "File", "path": "/out/m.log", "format": "JSON"}
        }
    t = trial(metricsCollector=spec)
    once = _inject(pod(), t)
    assert injecting.inject(once, t, NS, CONFIG) == once
    assert patching.diff(once, injecting.inject(once, t, NS, CONFIG)) == []


def test_push_gets_labels_env_and_a_token_for_db_manager_only() -> None:
    """No sidecar; the reporting container gets a pod-bound token for db-manager's audience
    (db-manager accepts a report only from the Trial's own pod)."""
    out = _inject(pod(), trial(metricsCollector={"collector": {"kind": "Push"}}))
    assert [c["name"] for c in out["spec"]["containers"]] == ["training-container"]
    assert "shareProcessNamespace" not in out["spec"]
    assert out["metadata"]["labels"][naming.LABEL_TRIAL] == "random-abc"
    training = _container(out, "training-container")
    assert training["env"] == [
        injecting.trial_name_env("random-abc"),
        {"name": "KUBETUNE_DB_MANAGER_TOKEN_FILE", "value": naming.DB_MANAGER_TOKEN_FILE},
    ]
    (volume,) = out["spec"]["volumes"]
    assert volume["projected"]["sources"] == [
        {
            "serviceAccountToken": {
                "audience": "kubetune-db-manager",
                "expirationSeconds": 3600,
                "path": "token",
            }
        }
    ]
    assert training["volumeMounts"] == [
        {"name": volume["name"], "mountPath": naming.DB_MANAGER_TOKEN_DIR, "readOnly": True}
    ]
    assert naming.DB_MANAGER_TOKEN_FILE == naming.DB_MANAGER_TOKEN_DIR + "/token"


def test_other_collectors_get_no_db_manager_token() -> None:
    out = _inject(pod(), trial())
    assert naming.DB_MANAGER_TOKEN_VOLUME not in [v["name"] for v in out["spec"]["volumes"]]


def test_custom_collector_is_added_verbatim_without_wrapping() -> None:
    custom = {"name": "my-collector", "image": "me/collector:1", "args": ["-x"]}
    t = trial(metricsCollector={"collector": {"kind": "Custom", "customCollector": custom}})
    out = _inject(pod(), t)
    sidecar = _container(out, "my-collector")
    assert sidecar["image"] == "me/collector:1" and sidecar["args"] == ["-x"]
    assert _container(out, "training-container")["command"] == ["python3", "train.py"]
    # It reports to db-manager: it gets the pod's token for it, as the training does.
    for container in (sidecar, _container(out, "training-container")):
        token_env = {"name": naming.DB_MANAGER_TOKEN_ENV, "value": naming.DB_MANAGER_TOKEN_FILE}
        assert token_env in container["env"]


def test_istio_annotation_the_user_set_is_kept() -> None:
    p = pod()
    p["metadata"]["annotations"] = {naming.ISTIO_INJECT: "true"}
    assert _inject(p)["metadata"]["annotations"][naming.ISTIO_INJECT] == "true"
    p = pod(labels={naming.ISTIO_INJECT: "true"})
    assert naming.ISTIO_INJECT not in (_inject(p)["metadata"].get("annotations") or {})


def test_non_primary_pod_gets_labels_but_no_sidecar() -> None:
    t = trial(primaryPodLabels={"training.kubeflow.org/job-role": "master"})
    out = _inject(pod(labels={"training.kubeflow.org/job-role": "worker"}), t)
    assert [c["name"] for c in out["spec"]["containers"]] == ["training-container"]
    assert out["metadata"]["labels"][naming.LABEL_TRIAL] == "random-abc"
    primary = _inject(pod(labels={"training.kubeflow.org/job-role": "master"}), t)
    assert len(primary["spec"]["containers"]) == 2


def test_only_the_primary_container_is_wrapped() -> None:
    sidecar = {"name": "istio-proxy", "image": "istio", "command": ["pilot-agent"]}
    training = {"name": "training-container", "image": "x", "command": ["python3", "t.py"]}
    out = _inject(pod(training, sidecar))
    assert _container(out, "istio-proxy") == sidecar
    assert _container(out, "training-container")["command"][:2] == ["sh", "-c"]


def test_no_command_is_denied_with_the_fix() -> None:
    with pytest.raises(injecting.Denied, match="set `command` on container 'training-container'"):
        _inject(pod({"name": "training-container", "image": "x", "args": ["--lr=1"]}))


def test_missing_primary_container_is_denied() -> None:
    with pytest.raises(
        injecting.Denied, match=r"primary container 'training-container' .* not in this pod"
    ):
        _inject(pod({"name": "main", "image": "x", "command": ["a"]}))


def test_find_trial_walks_owners() -> None:
    t = trial()
    cluster = StaticCluster(
        objects={("Job", NS, "random-abc"): job(), ("Trial", NS, "random-abc"): t}
    )
    assert injecting.find_trial(pod(), NS, cluster) == t
    assert injecting.find_trial(pod(), NS, StaticCluster()) is None
    orphan = pod()
    orphan["metadata"].pop("ownerReferences")
    assert injecting.find_trial(orphan, NS, cluster) is None


# --- the wrapped command, run by a real sh -----------------------------------------------------


def _k8s_expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: `$$` -> `$`, `$(NAME)` -> value if defined, else verbatim."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = text.find(")", i + 2)
                if end != -1:
                    name = text[i + 2 : end]
                    out.append(env.get(name, text[i : end + 1]))
                    i = end + 1
                    continue
        out.append(text[i])
        i += 1
    return "".join(out)


def _run_expanded(command: list[str], log_dir: Path, env: dict[str, str]) -> Any:
    """Run a wrapped container command as the kubelet would: `$(VAR)` expanded per element."""
    command = [c.replace(procwait.DEFAULT_LOG_DIR, str(log_dir)) for c in command]
    return subprocess.run(
        [_k8s_expand(c, env) for c in command],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "HOME": "/home/u"},
    )


@pytest.mark.parametrize("kind", ["StdOut", "File"])
@pytest.mark.parametrize("code", [0, 3])
def test_wrapped_script_runs_records_and_keeps_user_variables(kind: str, code: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = Path(tmp)
        argv = ["sh", "-c", f'echo "loss=0.5 lr=$(LR) home=$$HOME"; exit {code}']
        result = _run_expanded(injecting.wrapped_command(argv, kind), log_dir, {"LR": "0.1"})
        assert result.returncode == code, result.stderr
        assert "loss=0.5 lr=0.1 home=/home/u" in result.stdout
        records = {p.name: p.read_text().strip() for p in log_dir.glob("*.pid")}
        assert list(records.values()) == ["completed" if code == 0 else f"exit {code}"]
        metrics = log_dir / "metrics.log"
        if kind == "StdOut":
            assert "loss=0.5 lr=0.1 home=/home/u" in metrics.read_text()
        else:
            assert not metrics.exists()


def test_katibs_nas_arguments_reach_the_program_as_katibs_joined_sh_line() -> None:
    """Katib joins command and args into one `sh -c` line: enas-cpu's quoted JSON arrives
    without its quotes, `$(VAR)` is Kubernetes', `$$HOME` the shell's."""
    code = "import json, sys; print(json.dumps(sys.argv[1:]))"
    argv = [
        sys.executable,
        "-c",
        shlex.quote(code),
        '--architecture="[[36], [0, 1]]"',
        "--nn_config=\"{'num_layers': 2, 'input_sizes': [32, 32, 3]}\"",
        "--lr=$(LR)",
        "--home=$$HOME",
    ]
    env = {"LR": "0.1"}
    with tempfile.TemporaryDirectory() as tmp:
        result = _run_expanded(injecting.wrapped_command(argv, "StdOut"), Path(tmp), env)
    katib = subprocess.run(
        ["sh", "-c", " ".join(_k8s_expand(a, env) for a in argv)],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": "/home/u"},
    )
    assert (result.returncode, result.stdout) == (0, katib.stdout), result.stderr
    assert json.loads(result.stdout) == [
        "--architecture=[[36], [0, 1]]",
        "--nn_config={'num_layers': 2, 'input_sizes': [32, 32, 3]}",
        "--lr=0.1",
        "--home=/home/u",
    ]


def test_user_dollar_references_survive_escaping() -> None:
    argv = ["python3", "t.py", "--lr=$(LR)", "--cost=$$5"]
    command = injecting.wrapped_command(argv, "StdOut")
    # The user's argv as written (expanded by Kubernetes as it would be unwrapped), each
    # argument its own element after the wrapper's $0.
    assert command[3:] == [wrapperscript.WRAPPER_ARGV0, *argv]
    # Kubernetes' expansion of the wrapper's script gives back exactly procwait's script.
    line, _ = wrapperscript.sh_run_line(argv)
    expected = wrapperscript.sh_wrap(
        line, procwait.DEFAULT_LOG_DIR, metrics_file="/var/log/katib/metrics.log"
    )
    assert command[:2] == ["sh", "-c"]
    assert _k8s_expand(command[2], {"LR": "x"}) == expected


def _training(command: list[str], args: list[str]) -> dict[str, Any]:
    return {"name": "training-container", "image": "python:3.12", "command": command, "args": args}


def test_an_argv_over_128_kib_stays_split_and_runs() -> None:
    """2,000 parameters once made one `sh -c` string over Linux's 128 KiB per argument."""
    params = [f"--p{i}=$(LR)" + "x" * 100 for i in range(2000)]
    code = "import sys; a = sys.argv[1:]; print(len(a), a[0][:9], a[-1][-3:])"
    c = _container(
        _inject(pod(_training([sys.executable, "-c", shlex.quote(code)], params))),
        "training-container",
    )
    assert "args" not in c
    assert sum(len(a) for a in c["command"]) > 128 * 1024
    assert max(len(a.encode()) for a in c["command"]) < 16 * 1024
    with tempfile.TemporaryDirectory() as tmp:
        result = _run_expanded(c["command"], Path(tmp), {"LR": "0.1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout == "2000 --p0=0.1x xxx\n"


def test_an_argument_linux_cannot_exec_is_refused_naming_it() -> None:
    huge = "x" * (wrapperscript.MAX_ARG_BYTES + 1)
    with pytest.raises(injecting.Denied, match=r"argument 2 of command\+args is 131072 bytes"):
        _inject(pod(_training(["python3", "t.py"], [huge])))


def test_mutation_does_not_touch_its_input() -> None:
    p = pod()
    before = copy.deepcopy(p)
    _inject(p)
    assert p == before


def test_trial_name_env_comes_from_the_trial_label_as_upstream_injects_it() -> None:
    assert injecting.trial_name_env("random-abc") == {
        "name": "KATIB_TRIAL_NAME",
        "valueFrom": {
            "fieldRef": {
                "apiVersion": "v1",
                "fieldPath": "metadata.labels['katib.kubeflow.org/trial']",
            }
        },
    }
    # A name too long for a label value would be shortened there: the exact name, literally.
    long_name = "x" * 70
    assert injecting.trial_name_env(long_name) == {"name": "KATIB_TRIAL_NAME", "value": long_name}


@pytest.mark.parametrize(
    ("http_get", "url"),
    [
        ({"path": "/metrics", "port": 8080}, "http://127.0.0.1:8080/metrics"),
        ({"path": "/m", "port": "9090", "scheme": "HTTPS"}, "https://127.0.0.1:9090/m"),
        ({"path": "/m", "port": 9090, "host": "::1"}, "http://[::1]:9090/m"),
    ],
)
def test_prometheus_pod_is_wrapped_and_the_sidecar_scrapes_the_endpoint(
    http_get: dict[str, Any], url: str
) -> None:
    mc = {"collector": {"kind": "PrometheusMetric"}, "source": {"httpGet": http_get}}
    out = _inject(pod(), trial(metricsCollector=mc))
    training = _container(out, "training-container")
    assert injecting.is_wrapped(training)
    assert "metrics.log" not in training["command"][2], "the endpoint is the source, not stdout"
    args = _container(out, "metrics-logger-and-collector")["args"]
    assert args[args.index("--collector-kind") + 1] == "PrometheusMetric"
    assert args[args.index("--metrics-url") + 1] == url
    assert out["spec"]["shareProcessNamespace"] is True


def _two_trainers(annotation: str) -> dict[str, Any]:
    p = pod()
    p["metadata"]["annotations"] = {naming.ANNOTATION_TRAINING_CONTAINERS: annotation}
    p["spec"]["containers"] += [
        {"name": "evaluator", "image": "python:3.11", "command": ["python3", "eval.py"]},
        {"name": "proxy", "image": "envoy", "command": ["envoy"]},
    ]
    return p


def test_annotated_training_containers_are_wrapped_and_all_waited_for() -> None:
    out = _inject(_two_trainers(" evaluator, training-container "))
    training, evaluator = (_container(out, n) for n in ("training-container", "evaluator"))
    assert injecting.is_wrapped(training) and injecting.is_wrapped(evaluator)
    assert "metrics.log" in training["command"][2], "the primary's output is the metrics source"
    assert "metrics.log" not in evaluator["command"][2]
    assert {"name": "metrics-volume", "mountPath": "/var/log/katib"} in evaluator["volumeMounts"]
    assert _container(out, "proxy")["command"] == ["envoy"], "an unlisted sidecar is untouched"
    args = _container(out, "metrics-logger-and-collector")["args"]
    assert args[args.index("--expected-processes") + 1] == "2"
    assert _inject(out) == out, "idempotent"


def test_an_annotated_container_that_is_not_in_the_pod_is_refused() -> None:
    with pytest.raises(injecting.Denied, match=r"names container 'scorer'.*not in this pod"):
        _inject(_two_trainers("scorer"))


def test_wait_all_processes_false_waits_for_the_primary_only() -> None:
    config = katib_config.parse(
        "runtime:\n  metricsCollectors:\n"
        "    - {kind: StdOut, image: c:1, waitAllProcesses: false}\n"
    )
    out = injecting.inject(_two_trainers("evaluator"), trial(), NS, config)
    assert not injecting.is_wrapped(_container(out, "evaluator"))
    args = _container(out, "metrics-logger-and-collector")["args"]
    assert args[args.index("--expected-processes") + 1] == "1"
