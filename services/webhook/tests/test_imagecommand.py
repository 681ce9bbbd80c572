"""Reading an image's ENTRYPOINT and CMD from a real registry (distribution's, started here)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import oci_registry
import pytest
from webhook_cases import NS, StaticCluster, job, pod, review, trial

from kubetune import config as katib_config
from kubetune.clock import ManualClock
from kubetune_webhook import injecting, patching, reviewing
from kubetune_webhook.imagecommand import (
    Credentials,
    ImageCommand,
    RegistryClient,
    RegistryError,
    credentials_from_secret,
    merge_credentials,
    parse_image,
)

USER, PASSWORD = "puller", "s3cret-pw"


@pytest.fixture(scope="module")
def public(tmp_path_factory: pytest.TempPathFactory) -> Iterator[oci_registry.Registry]:
    with oci_registry.serving(tmp_path_factory.mktemp("public-registry")) as registry:
        yield registry


@pytest.fixture(scope="module")
def private(tmp_path_factory: pytest.TempPathFactory) -> Iterator[oci_registry.Registry]:
    directory: Path = tmp_path_factory.mktemp("private-registry")
    with oci_registry.serving(directory, {USER: PASSWORD}) as registry:
        yield registry


def pull_secret(registry: str, user: str, password: str) -> dict[str, object]:
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    config = {"auths": {registry: {"auth": auth}}}
    data = base64.b64encode(json.dumps(config).encode()).decode()
    return {"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": data}}


def test_an_image_with_an_entrypoint(public: oci_registry.Registry) -> None:
    oci_registry.push_image(
        public, "train/entry", "v1", entrypoint=["python3", "/app/train.py"], cmd=["--epochs=1"]
    )
    command = RegistryClient().image_command(f"{public.host}/train/entry:v1")
    assert command == ImageCommand(("python3", "/app/train.py"), ("--epochs=1",))
    # ENTRYPOINT, then the container's args when it has some, else the image's CMD.
    assert command.argv(None) == ["python3", "/app/train.py", "--epochs=1"]
    assert command.argv(["--lr=0.1"]) == ["python3", "/app/train.py", "--lr=0.1"]


def test_an_image_with_only_a_cmd(public: oci_registry.Registry) -> None:
    oci_registry.push_image(public, "train/cmd", "v1", cmd=["python3", "-c", "print(1)"])
    command = RegistryClient().image_command(f"{public.host}/train/cmd:v1")
    assert command == ImageCommand((), ("python3", "-c", "print(1)"))
    assert command.argv([]) == ["python3", "-c", "print(1)"]
    assert command.argv(["python3", "other.py"]) == ["python3", "other.py"]


def test_an_image_by_digest(public: oci_registry.Registry) -> None:
    digest, _ = oci_registry.push_image(public, "train/pinned", None, entrypoint=["/bin/run"])
    command = RegistryClient().image_command(f"{public.host}/train/pinned:ignored@{digest}")
    assert command.entrypoint == ("/bin/run",)


def test_a_private_image_needs_its_pull_secret(private: oci_registry.Registry) -> None:
    oci_registry.push_image(private, "team/secret-train", "v2", entrypoint=["/train"], cmd=["-v"])
    image = f"{private.host}/team/secret-train:v2"
    with pytest.raises(RegistryError) as refused:
        RegistryClient().image_command(image)
    assert image in str(refused.value) and private.host in str(refused.value)
    assert "imagePullSecret" in str(refused.value) and not refused.value.transient
    wrong = merge_credentials([pull_secret(private.host, USER, "wrong")])
    key = f"http://{private.host}/v2/"  # a scheme and a path, as `docker login` may write
    with pytest.raises(RegistryError, match=r"401.*with the pull secret's credentials"):
        RegistryClient().image_command(image, wrong)
    # The pod's own secret first, then its ServiceAccount's: the first naming a registry wins.
    right = merge_credentials(
        [pull_secret("other.example", "x", "y"), pull_secret(key, USER, PASSWORD)]
    )
    assert RegistryClient().image_command(image, right) == ImageCommand(("/train",), ("-v",))


def test_a_multi_arch_index_resolves_to_the_platform(public: oci_registry.Registry) -> None:
    amd = oci_registry.push_image(public, "train/multi", None, entrypoint=["/amd64/run"])
    arm = oci_registry.push_image(
        public, "train/multi", None, entrypoint=["/arm64/run"], platform=("linux", "arm64")
    )
    oci_registry.push_index(
        public, "train/multi", "v1", {("linux", "arm64"): arm, ("linux", "amd64"): amd}
    )
    client = RegistryClient()
    image = f"{public.host}/train/multi:v1"
    assert client.image_command(image).entrypoint == ("/amd64/run",)
    assert client.image_command(image, platform=("linux", "arm64")).entrypoint == ("/arm64/run",)
    with pytest.raises(RegistryError, match=r"no linux/s390x image.*linux/arm64, linux/amd64"):
        client.image_command(image, platform=("linux", "s390x"))


def test_a_missing_image_is_a_clear_error(public: oci_registry.Registry) -> None:
    image = f"{public.host}/nobody/pushed-this:v9"
    with pytest.raises(RegistryError) as missing:
        RegistryClient().image_command(image)
    message = str(missing.value)
    assert f"image {image!r}" in message and f"registry {public.host}" in message
    assert "HTTP 404" in message and "UNKNOWN" in message and not missing.value.transient


def test_an_unreachable_registry_is_transient() -> None:
    with pytest.raises(RegistryError, match=r"127\.0\.0\.1:9.*unreachable") as down:
        RegistryClient(connect_seconds=1).image_command("127.0.0.1:9/some/image:v1")
    assert down.value.transient


def test_a_lookup_past_its_deadline_is_transient(public: oci_registry.Registry) -> None:
    oci_registry.push_image(public, "train/slow", "v1", entrypoint=["/x"])
    client = RegistryClient(deadline_seconds=0, clock=ManualClock())
    with pytest.raises(RegistryError, match="no answer within 0 s; retry") as late:
        client.image_command(f"{public.host}/train/slow:v1")
    assert late.value.transient


def test_a_tag_is_kept_for_its_ttl_a_digest_for_ever(public: oci_registry.Registry) -> None:
    clock = ManualClock()
    client = RegistryClient(tag_seconds=60, clock=clock)
    image = f"{public.host}/train/moving:latest"
    oci_registry.push_image(public, "train/moving", "latest", entrypoint=["/old"])
    assert client.image_command(image).entrypoint == ("/old",)
    oci_registry.push_image(public, "train/moving", "latest", entrypoint=["/new"])
    assert client.image_command(image).entrypoint == ("/old",), "the tag is cached"
    clock.advance(61)
    assert client.image_command(image).entrypoint == ("/new",), "the tag expired"


def test_a_response_over_the_size_limit_is_refused(public: oci_registry.Registry) -> None:
    oci_registry.push_image(public, "train/big", "v1", entrypoint=["/x"])
    with pytest.raises(RegistryError, match="over 64 bytes"):
        RegistryClient(max_bytes=64).image_command(f"{public.host}/train/big:v1")


@pytest.mark.parametrize(
    "image",
    [
        "127.0.0.1:5000/UPPER/case:v1",
        "127.0.0.1:5000/a/../b:v1",
        "127.0.0.1:5000/a/b:bad/tag",
        "127.0.0.1:5000/a/b@sha256:short",
        "127.0.0.1:5000/a%2fb:v1",
        "evil host/a:v1",
    ],
)
def test_a_name_outside_the_distribution_grammar_never_reaches_a_url(image: str) -> None:
    with pytest.raises(RegistryError, match=r"cannot be looked up.*fix the container's image"):
        parse_image(image)


def test_docker_hub_names_are_normalised() -> None:
    ref = parse_image("python:3.12")
    assert (ref.registry, ref.repository, ref.reference) == ("docker.io", "library/python", "3.12")
    assert ref.host == "registry-1.docker.io"
    ref = parse_image("index.docker.io/kubeflowkatib/mxnet-mnist:v1")
    assert (ref.registry, ref.repository) == ("docker.io", "kubeflowkatib/mxnet-mnist")
    ref = parse_image("localhost:5000/x/y")
    assert (ref.registry, ref.repository, ref.reference) == ("localhost:5000", "x/y", "latest")


def test_pull_secret_auth_keys_name_registries() -> None:
    found = credentials_from_secret(pull_secret("https://index.docker.io/v1/", "u", "p"))
    assert found == {"docker.io": Credentials("u", "p")}
    legacy = base64.b64encode(json.dumps({"reg.example:5000": {"username": "a", "password": "b"}})
                              .encode()).decode()  # fmt: skip
    assert credentials_from_secret({"data": {".dockercfg": legacy}}) == {
        "reg.example:5000": Credentials("a", "b")
    }
    assert credentials_from_secret({"data": {".dockerconfigjson": "not base64!"}}) == {}


# --- the pod webhook: a trial pod without command ------------------------------------------


def _admit(cluster: StaticCluster, obj: dict[str, Any], config: Any = None) -> dict[str, Any]:
    admission = reviewing.Admission(config or katib_config.default(), cluster)
    status, answer = admission.handle("/mutate-pod", json.dumps(review(obj, "Pod")).encode())
    assert status == 200
    response: dict[str, Any] = answer["response"]
    return response


def _owned(**kw: Any) -> StaticCluster:
    objects = {("Job", NS, "random-abc"): job(), ("Trial", NS, "random-abc"): trial()}
    return StaticCluster(objects=objects, **kw)


def test_a_pod_without_command_runs_its_private_images_entrypoint_wrapped(
    private: oci_registry.Registry,
) -> None:
    """The pull secret comes from the pod's ServiceAccount; the container's args replace CMD."""
    oci_registry.push_image(
        private, "team/trainer", "v1", entrypoint=["python3", "/app/train.py"], cmd=["--help"]
    )
    image = f"{private.host}/team/trainer:v1"
    trial_pod = pod({"name": "training-container", "image": image, "args": ["--lr=0.1"]})
    trial_pod["spec"]["serviceAccountName"] = "trainer"
    cluster = _owned(
        service_accounts={(NS, "trainer"): {"imagePullSecrets": [{"name": "regcred"}]}},
        secrets={(NS, "regcred"): pull_secret(private.host, USER, PASSWORD)},
    )
    response = _admit(cluster, trial_pod)
    assert response["allowed"] is True, response
    mutated = patching.apply(trial_pod, json.loads(base64.b64decode(response["patch"])))
    training = mutated["spec"]["containers"][0]
    assert training["command"] == injecting.wrapped_command(
        ["python3", "/app/train.py", "--lr=0.1"], "StdOut"
    )
    assert "args" not in training
    assert cluster.reads == [("ServiceAccount", NS, "trainer"), ("Secret", NS, "regcred")]


def test_a_pod_whose_image_cannot_be_read_is_refused_naming_it(
    public: oci_registry.Registry,
) -> None:
    image = f"{public.host}/nobody/pushed-this:v1"
    trial_pod = pod({"name": "training-container", "image": image})
    response = _admit(_owned(), trial_pod)
    assert response["allowed"] is False and response["status"]["code"] == 400
    message = response["status"]["message"]
    assert f"image {image!r}" in message and f"registry {public.host}" in message


def test_pull_secrets_are_read_only_when_a_command_is_missing() -> None:
    cluster = _owned()
    response = _admit(cluster, pod())
    assert response["allowed"] is True
    assert cluster.reads == []


def test_with_the_lookup_off_a_missing_command_is_refused_and_no_secret_read(
    public: oci_registry.Registry,
) -> None:
    oci_registry.push_image(public, "train/offline", "v1", entrypoint=["/run"])
    off = katib_config.parse(
        katib_config.default_yaml().replace("imageCommandLookup: true", "imageCommandLookup: false")
    )
    cluster = _owned()
    trial_pod = pod({"name": "training-container", "image": f"{public.host}/train/offline:v1"})
    response = _admit(cluster, trial_pod, off)
    assert response["allowed"] is False
    assert "init.controller.imageCommandLookup" in response["status"]["message"]
    assert cluster.reads == []


def test_a_registry_that_wants_a_bearer_token_gets_an_anonymous_one(
    tmp_path: Path,
) -> None:
    """The `WWW-Authenticate: Bearer realm=...,service=...,scope=...` flow, as Docker Hub asks."""
    with oci_registry.serving(tmp_path, tokens=True) as registry:
        assert registry.issuer is not None
        oci_registry.push_image(registry, "library/tokened", "v1", cmd=["/bin/true"])
        registry.issuer.asked.clear()
        command = RegistryClient().image_command(f"{registry.host}/library/tokened:v1")
        assert command == ImageCommand((), ("/bin/true",))
        # One token for the lookup, for pulling this repository only.
        assert registry.issuer.asked == ["repository:library/tokened:pull"]
