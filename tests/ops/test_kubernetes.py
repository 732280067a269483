"""The Kubernetes manifests (deploy/kubernetes/, issue #30), checked offline.

Every object is validated against the Kubernetes API's own JSON schemas in their strict form
(unknown fields refused), bundled by ``kubernetes-validate`` (no cluster, no network), for
the oldest and the newest release the docs name. Then what the schemas cannot know: the
objects refer to each other correctly, every setting they pass is one the product reads,
secrets come only from the Secret, exactly one beat runs, probes hit the product's probe
paths, pods run unprivileged, and the web pods' commands are the image's own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.support.live import ROOT

MANIFESTS = ROOT / "deploy" / "kubernetes"
# The releases docs/kubernetes.md names: the oldest supported one and the newest schemas.
VERSIONS = ["1.30.0", "1.37.0"]
# Settings that hold secrets: only ever from the Secret, never written in a manifest.
SECRETS = {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "MCP_SECRET_KEYS", "MCP_STDIO_BRIDGE_SECRET"}
# Secrets (URLs that may carry a password) a Secret need not hold: each defaults to REDIS_URL.
OPTIONAL_SECRETS = {"CELERY_BROKER_URL", "MCP_RATE_LIMIT_REDIS_URL", "CACHE_REDIS_URL"}
# Read by the platform or by Python, not by the product's settings.
NOT_SETTINGS = {"HOSTNAME"}


def documents() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    found = []
    for name in kustomization["resources"]:
        found.extend(doc for doc in yaml.safe_load_all((MANIFESTS / name).read_text()) if doc)
    return found


def objects(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in documents() if doc["kind"] == kind}


def pod_specs() -> Iterator[tuple[str, dict[str, Any]]]:
    for doc in documents():
        if doc["kind"] in ("Deployment", "Job"):
            yield doc["metadata"]["name"], doc["spec"]["template"]["spec"]


def containers() -> Iterator[tuple[str, dict[str, Any]]]:
    for name, spec in pod_specs():
        for container in spec["containers"]:
            yield name, container


def readme_settings() -> set[str]:
    return set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", (ROOT / "README.md").read_text(), re.M))


def test_every_manifest_file_is_listed_and_nothing_else() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    files = {path.name for path in MANIFESTS.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(kustomization["resources"]) == sorted(files)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_object_is_valid_for_the_kubernetes_api(version: str) -> None:
    docs = documents()
    assert len(docs) >= 15
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise AssertionError(f"{doc['kind']} {doc['metadata']['name']}: {exc}") from None


def test_a_broken_object_is_refused_by_the_validation() -> None:
    """The check above can fail: an unknown field and a wrong type are both refused."""
    web = objects("Deployment")["mcphost-web"]
    misspelled = json.loads(json.dumps(web))
    misspelled["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    wrong_type = json.loads(json.dumps(web))
    wrong_type["spec"]["replicas"] = "two"
    for doc in (misspelled, wrong_type):
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(doc, VERSIONS[-1], strict=True)


def test_selectors_and_references_name_objects_that_exist() -> None:
    deployments = objects("Deployment")
    pod_labels = [doc["spec"]["template"]["metadata"]["labels"] for doc in deployments.values()] + [
        doc["spec"]["template"]["metadata"]["labels"] for doc in objects("Job").values()
    ]

    def selects(selector: dict[str, str]) -> bool:
        return any(selector.items() <= labels.items() for labels in pod_labels)

    for name, doc in deployments.items():
        assert doc["spec"]["selector"]["matchLabels"].items() <= (
            doc["spec"]["template"]["metadata"]["labels"].items()
        ), name
    for kind in ("Service",):
        for name, doc in objects(kind).items():
            assert selects(doc["spec"]["selector"]), name
    for kind in ("PodDisruptionBudget", "NetworkPolicy"):
        for name, doc in objects(kind).items():
            selector = (doc["spec"].get("selector") or doc["spec"]["podSelector"]).get(
                "matchLabels", {}
            )
            assert selects(selector), name
    for name, doc in objects("HorizontalPodAutoscaler").items():
        assert doc["spec"]["scaleTargetRef"]["name"] in deployments, name
    claims = set(objects("PersistentVolumeClaim"))
    config_maps = set(objects("ConfigMap"))
    for name, spec in pod_specs():
        for volume in spec.get("volumes", []):
            if "persistentVolumeClaim" in volume:
                assert volume["persistentVolumeClaim"]["claimName"] in claims, name
        for container in spec["containers"]:
            mounts = {mount["name"] for mount in container.get("volumeMounts", [])}
            assert mounts <= {volume["name"] for volume in spec.get("volumes", [])}, name
            for source in container.get("envFrom", []):
                assert source["configMapRef"]["name"] in config_maps, name
    # Services other pods call by name: the bridge URL the config gives.
    config = objects("ConfigMap")["mcphost"]["data"]
    bridge = re.fullmatch(r"http://([a-z-]+):(\d+)", config["MCP_STDIO_BRIDGE_URL"])
    assert bridge is not None
    service = objects("Service")[bridge[1]]
    assert int(bridge[2]) in [port["port"] for port in service["spec"]["ports"]]


def test_every_setting_passed_is_one_the_product_reads() -> None:
    known = readme_settings()
    assert "DATABASE_URL" in known and len(known) > 50
    passed = set(objects("ConfigMap")["mcphost"]["data"])
    for _, container in containers():
        passed |= {item["name"] for item in container.get("env", [])}
    assert passed - NOT_SETTINGS <= known, passed - known


def test_secrets_come_only_from_the_secret() -> None:
    assert not SECRETS & set(objects("ConfigMap")["mcphost"]["data"])
    assert "Secret" not in {doc["kind"] for doc in documents()}
    for name, container in containers():
        env = {item["name"]: item for item in container.get("env", [])}
        for secret in SECRETS & set(env):
            assert "value" not in env[secret], (name, secret)
            assert env[secret]["valueFrom"]["secretKeyRef"] == {"name": "mcphost", "key": secret}
        # Every process needs these to start and to read its credentials.
        assert {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "MCP_SECRET_KEYS"} <= set(env), name
        # A Redis role split off REDIS_URL reaches every process that may use it.
        assert set(env) >= OPTIONAL_SECRETS, name
        for secret in OPTIONAL_SECRETS:
            reference = {"name": "mcphost", "key": secret, "optional": True}
            assert env[secret]["valueFrom"]["secretKeyRef"] == reference, (name, secret)
    assert not OPTIONAL_SECRETS & set(objects("ConfigMap")["mcphost"]["data"])


def test_exactly_one_beat_runs_and_it_keeps_its_schedule() -> None:
    beat = objects("Deployment")["mcphost-beat"]
    assert beat["spec"]["replicas"] == 1
    # Recreate: the old beat is gone before a new one starts (never two at once).
    assert beat["spec"]["strategy"]["type"] == "Recreate"
    assert "mcphost-beat" not in [
        hpa["spec"]["scaleTargetRef"]["name"] for hpa in objects("HorizontalPodAutoscaler").values()
    ]
    container = beat["spec"]["template"]["spec"]["containers"][0]
    schedule = container["command"][container["command"].index("--schedule") + 1]
    mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
    assert str(Path(schedule).parent) in mounts


def test_web_pods_probe_the_product_and_stop_within_their_grace_period() -> None:
    web = objects("Deployment")["mcphost-web"]["spec"]["template"]["spec"]
    container = web["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    # The probe paths are the ones routed ahead of Django (mcpsite/asgi.py).
    routed = re.search(r're_path\(r"\^\(([a-z|]+)\)\$"', (ROOT / "mcpsite/asgi.py").read_text())
    assert routed is not None and {"healthz", "readyz"} <= set(routed[1].split("|"))
    # uvicorn's graceful shutdown, then the call-log writer's flush, after the preStop pause.
    command = container["command"]
    graceful = float(command[command.index("--timeout-graceful-shutdown") + 1])
    pause = float(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    from mcp_app.services.calllog.writer import EXIT_FLUSH_SECONDS

    assert web["terminationGracePeriodSeconds"] > pause + graceful + EXIT_FLUSH_SECONDS


def test_the_web_command_is_the_images_own() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    cmd = re.search(r"^CMD (\[.*?\])$", dockerfile, re.M | re.S)
    assert cmd is not None
    image_command = json.loads(cmd[1].replace("\\\n", ""))
    assert (
        objects("Deployment")["mcphost-web"]["spec"]["template"]["spec"]["containers"][0]["command"]
        == image_command
    )


def test_every_pod_runs_unprivileged_with_a_read_only_root() -> None:
    uid = re.search(r"useradd --system --uid (\d+)", (ROOT / "Dockerfile").read_text())
    assert uid is not None
    for name, spec in pod_specs():
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["runAsUser"] == int(uid[1]), name
        assert spec["automountServiceAccountToken"] is False, name
        for container in spec["containers"]:
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, name
            assert security["readOnlyRootFilesystem"] is True, name
            assert security["capabilities"]["drop"] == ["ALL"], name
            # A read-only root: the product writes only to /tmp and its var dir.
            mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
            assert {"/tmp", "/var/lib/mcphost"} <= mounts, name
            assert "memory" in container["resources"]["limits"], name


def test_the_docs_describe_every_object() -> None:
    text = (ROOT / "docs" / "kubernetes.md").read_text()
    for doc in documents():
        assert f"`{doc['metadata']['name']}`" in text, (doc["kind"], doc["metadata"]["name"])
