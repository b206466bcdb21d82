"""deploy/ read as an operator's cluster and compose engine would read it, since no container
engine runs here: every Kubernetes manifest is valid for the API server (kubernetes-validate's
bundled schemas, strict: a misspelt field fails), the compose file is valid against the
compose specification's own JSON schema (vendored by check-jsonschema), and the properties
that decide how the stack behaves in an outage or a release hold."""

from __future__ import annotations

import copy
import json
import re
import threading
import tomllib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from fastapi.testclient import TestClient
from kubernetes_validate import utils as kubernetes

from service.bootstrap import build
from service.config import Settings
from service.entrypoints import probe
from service.entrypoints.api.app import create_app

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
# The oldest Kubernetes this is meant for (CronJob timeZone is GA from 1.27) and the newest
# the validator knows.
KUBERNETES_VERSIONS = ("1.30.0", kubernetes.latest_version())
RECKON_SERVICES = ("migrate", "api", "scheduler")
HTTP_SERVICES = ("api",)

Document = dict[str, Any]


def manifests() -> list[tuple[str, Document]]:
    """Every Kubernetes object in deploy/k8s/, with the file it is in."""
    found = []
    for path in sorted(K8S.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document and document.get("kind") != "Kustomization":
                found.append((path.name, document))
    return found


def applied() -> list[Document]:
    """What `kubectl apply -k deploy/k8s/` sends to the cluster."""
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    return [
        document
        for name in kustomization["resources"]
        for document in yaml.safe_load_all((K8S / name).read_text())
    ]


def pod_specs() -> list[tuple[str, Document]]:
    """(object name, pod spec) of every workload that is applied."""
    specs = []
    for document in applied():
        spec = document.get("spec", {})
        if document["kind"] in ("Deployment", "Job"):
            specs.append((document["metadata"]["name"], spec["template"]["spec"]))
        elif document["kind"] == "CronJob":
            specs.append(
                (document["metadata"]["name"], spec["jobTemplate"]["spec"]["template"]["spec"])
            )
    return specs


def containers() -> list[tuple[str, Document, Document]]:
    """(object/container name, container, its pod spec) for every applied container."""
    return [
        (f"{name}/{container['name']}", container, spec)
        for name, spec in pod_specs()
        for container in (*spec.get("initContainers", []), *spec["containers"])
    ]


def compose() -> Document:
    document = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert isinstance(document, dict)
    return document


def compose_schema() -> Document:
    schema_file = files("check_jsonschema") / "builtin_schemas" / "vendor" / "compose-spec.json"
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    assert isinstance(schema, dict)
    return schema


def compose_errors(document: Document) -> list[str]:
    schema = compose_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [
        f"{list(error.absolute_path)}: {error.message}" for error in validator.iter_errors(document)
    ]


def workload(kind: str) -> Document:
    (document,) = (d for d in applied() if d["kind"] == kind)
    return document


# --- Kubernetes: schema ------------------------------------------------------------------------


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize(
    ("path", "document"), manifests(), ids=[f"{p}:{d['kind']}" for p, d in manifests()]
)
def test_every_manifest_is_valid_for_the_kubernetes_api(
    path: str, document: Document, version: str
) -> None:
    validated = kubernetes.validate(document, version, strict=True)

    assert validated


def test_the_validator_rejects_a_misspelt_field() -> None:
    deployment = copy.deepcopy(workload("Deployment"))
    deployment["spec"]["template"]["spec"]["containers"][0]["resource"] = {}

    with pytest.raises(kubernetes.ValidationError):
        kubernetes.validate(deployment, KUBERNETES_VERSIONS[0], strict=True)


# --- Kubernetes: what applying does ------------------------------------------------------------


def test_applying_the_directory_never_replaces_the_real_secret() -> None:
    kinds = [document["kind"] for document in applied()]

    assert "Secret" not in kinds
    assert (K8S / "secret.example.yaml").is_file()


def test_the_kustomization_applies_every_other_manifest() -> None:
    listed = set(yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"])
    present = {path.name for path in K8S.glob("*.yaml")}

    assert listed == present - {"kustomization.yaml", "secret.example.yaml"}


def test_the_example_alert_rule_parses_names_the_at_risk_metric_and_is_not_applied() -> None:
    """deploy/alerts/ is for Prometheus, not for `kubectl apply -k deploy/k8s/`."""
    path = DEPLOY / "alerts" / "reckon-at-risk.rules.yml"
    rules = [
        rule for group in yaml.safe_load(path.read_text())["groups"] for rule in group["rules"]
    ]
    exposed = (ROOT / "service" / "presenters" / "metrics.py").read_text()

    assert any("reckon_running_slip_seconds" in rule["expr"] for rule in rules)
    assert all({"alert", "expr", "labels", "annotations"} <= set(rule) for rule in rules)
    assert "reckon-at-risk" not in (K8S / "kustomization.yaml").read_text()
    for rule in rules:
        for metric in re.findall(r"reckon_[a-z_]+", rule["expr"]):
            assert f'"{metric}"' in exposed, metric  # a metric /metrics does expose


def test_the_workloads_read_the_secret_the_example_describes() -> None:
    (secret,) = yaml.safe_load_all((K8S / "secret.example.yaml").read_text())

    for name, container, _spec in containers():
        sources = container.get("envFrom", [])
        assert {"secretRef": {"name": secret["metadata"]["name"]}} in sources, name


def test_a_database_outage_takes_pods_out_of_service_without_restarting_them() -> None:
    (api,) = workload("Deployment")["spec"]["template"]["spec"]["containers"]

    assert api["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert api["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert api.get("startupProbe", {}).get("httpGet", {}).get("path", "/livez") == "/livez"


def test_the_probed_paths_are_routes_of_the_app_and_liveness_needs_no_database() -> None:
    (api,) = workload("Deployment")["spec"]["template"]["spec"]["containers"]
    probed = {api[key]["httpGet"]["path"] for key in ("livenessProbe", "readinessProbe")}
    broken = Settings(database_url="postgresql+psycopg://nobody@127.0.0.1:9/none")

    with TestClient(create_app(build(broken))) as client:
        answers = {path: client.get(path).status_code for path in probed}

    assert answers == {"/livez": 200, "/healthz": 503}


def test_every_container_has_cpu_and_memory_requests_and_limits() -> None:
    for name, container, _spec in containers():
        resources = container.get("resources", {})
        for bound in ("requests", "limits"):
            assert set(resources.get(bound, {})) >= {"cpu", "memory"}, f"{name}: {bound}"


def test_every_pod_runs_under_the_restricted_security_profile() -> None:
    for name, container, spec in containers():
        pod = spec.get("securityContext", {})
        own = container.get("securityContext", {})
        assert own.get("runAsNonRoot", pod.get("runAsNonRoot")) is True, name
        seccomp = own.get("seccompProfile", pod.get("seccompProfile", {}))
        assert seccomp.get("type") == "RuntimeDefault", name
        assert own.get("allowPrivilegeEscalation") is False, name
        assert own.get("capabilities", {}).get("drop") == ["ALL"], name
        assert own.get("readOnlyRootFilesystem") is True, name
        assert spec.get("automountServiceAccountToken") is False, name


def test_every_writable_path_is_a_scratch_volume() -> None:
    for name, container, spec in containers():
        volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
        for mount in container.get("volumeMounts", []):
            assert "emptyDir" in volumes[mount["name"]], f"{name}: {mount['mountPath']}"
        assert "/tmp" in {mount["mountPath"] for mount in container.get("volumeMounts", [])}, name


def test_the_migration_job_can_be_applied_again_next_release() -> None:
    job = workload("Job")

    # A finished Job is deleted by the cluster, so the next `kubectl apply -k` creates it anew
    # rather than failing on its immutable pod template; under Helm it is a replaced hook.
    assert 0 < job["spec"]["ttlSecondsAfterFinished"] <= 3600
    annotations = job["metadata"]["annotations"]
    assert "pre-upgrade" in annotations["helm.sh/hook"]
    assert "before-hook-creation" in annotations["helm.sh/hook-delete-policy"]
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "reckon",
        "db",
        "upgrade",
    ]


# --- compose -----------------------------------------------------------------------------------


def test_the_compose_file_is_valid_against_the_compose_specification() -> None:
    errors = compose_errors(compose())

    assert errors == []


def test_the_compose_schema_rejects_a_misspelt_key() -> None:
    broken = compose()
    broken["services"]["api"]["env_files"] = ["reckon.env"]

    assert compose_errors(broken)


def test_compose_passes_the_whole_env_file_to_every_reckon_container() -> None:
    services = compose()["services"]

    for name in RECKON_SERVICES:
        env_files = [entry["path"] for entry in services[name]["env_file"]]
        assert env_files[0] == "reckon.env.example", name
        assert "reckon.env" in env_files, name
        assert all((DEPLOY / path).is_file() for path in env_files[:1])
        # only the stack's own addresses are fixed in the file itself
        assert set(services[name]["environment"]) == {"RECKON_DATABASE_URL", "MLFLOW_TRACKING_URI"}


def test_the_env_example_names_every_setting_reckon_reads() -> None:
    text = (DEPLOY / "reckon.env.example").read_text()
    named = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", text, re.M))
    prefix = Settings.model_config.get("env_prefix", "")

    expected = {
        str(field.validation_alias)
        if isinstance(field.validation_alias, str)
        else f"{prefix}{name}".upper()
        for name, field in Settings.model_fields.items()
    }
    assert expected - named == set()


def test_compose_bounds_and_locks_down_every_reckon_container() -> None:
    services = compose()["services"]

    for name in RECKON_SERVICES:
        service = services[name]
        limits = service["deploy"]["resources"]["limits"]
        assert {"cpus", "memory"} <= set(limits), name
        assert service["read_only"] is True and "/tmp" in service["tmpfs"], name
        assert service["cap_drop"] == ["ALL"], name
        assert "no-new-privileges:true" in service["security_opt"], name
        assert not str(service["user"]).startswith("0"), name
    for name, service in services.items():
        assert "limits" in service.get("deploy", {}).get("resources", {}), name


def test_only_the_http_services_keep_the_image_health_check() -> None:
    services = compose()["services"]

    for name in RECKON_SERVICES:
        disabled = services[name].get("healthcheck", {}).get("disable", False)
        assert disabled is (name not in HTTP_SERVICES), name


# --- the image ---------------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = (DEPLOY / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    return [
        (match.group(1).upper(), match.group(2).strip())
        for match in re.finditer(r"^\s*([A-Za-z]+)\s+(.*)$", joined, re.M)
    ]


def final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile_instructions()
    last_from = max(i for i, (name, _args) in enumerate(instructions) if name == "FROM")
    return instructions[last_from:]


def test_the_image_checks_liveness_with_the_probe_module() -> None:
    (healthcheck,) = [args for name, args in final_stage() if name == "HEALTHCHECK"]

    command = json.loads(healthcheck.split("CMD", 1)[1])
    assert command[:3] == ["python", "-m", "service.entrypoints.probe"]
    assert command[3].endswith("/livez")


def test_the_image_runs_as_a_numeric_non_root_user() -> None:
    users = [args for name, args in final_stage() if name == "USER"]

    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0


def test_the_build_stage_copies_every_tree_the_wheel_is_built_from() -> None:
    instructions = dockerfile_instructions()
    last_from = max(i for i, (name, _args) in enumerate(instructions) if name == "FROM")
    copied = {
        source.rstrip("/")
        for name, args in instructions[:last_from]
        if name == "COPY"
        for source in args.split()[:-1]
    }
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    trees = {"service", *(d.split("/")[0] for d in setuptools["package-dir"].values())}

    assert trees | {"pyproject.toml", "README.md"} <= copied


def test_the_image_installs_a_wheel_and_copies_no_source_tree_into_the_runtime() -> None:
    copies = [args for name, args in final_stage() if name == "COPY"]

    assert copies and all(args.startswith("--from=") for args in copies)


# --- the health-check command ------------------------------------------------------------------


class _Status(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(int(self.path.rsplit("/", 1)[-1]))
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def status_server() -> Iterator[str]:
    """A server answering /status/N with HTTP N."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Status)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.mark.parametrize(("status", "code"), [(200, 0), (204, 0), (503, 1), (404, 1)])
def test_the_probe_exits_zero_only_for_a_success(
    status_server: str, status: int, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    result = probe.main([f"{status_server}/status/{status}"])

    assert result == code
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and str(status) in out


def test_the_probe_fails_in_one_line_when_nothing_listens(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), _Status) as server:
        port = server.server_address[1]  # bound, then closed: nothing listens there

    result = probe.main([f"http://127.0.0.1:{port}/livez"])

    assert result == 1
    assert capsys.readouterr().out.count("\n") == 1


def test_compose_publishes_unauthenticated_services_on_this_machine_only() -> None:
    """reckon.env.example leaves RECKON_API_TOKEN empty and the stack's MLflow has no auth:
    what compose publishes must not be reachable from other machines."""
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    example = (DEPLOY / "reckon.env.example").read_text()
    assert "\nRECKON_API_TOKEN=\n" in example  # the premise: no token by default
    published = [
        (name, port) for name, service in compose["services"].items()
        for port in service.get("ports", [])
    ]  # fmt: skip
    assert published and all(str(port).startswith("127.0.0.1:") for _, port in published)
