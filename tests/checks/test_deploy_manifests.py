"""The deployment files (cluster/, docker/) checked against the project, so they cannot
drift: Python and Ray versions, console scripts, ports, NUMTUNE_* settings, image tags,
token auth, ScalingSpec-sized resources, and the rules that keep Ray's ports private.

No Docker engine or Kubernetes runs on the project's machines: these checks read the
files; they do not build the images or apply the manifests.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from typing import Any

import pytest
import yaml

from jobs.spec import ScalingSpec, load_job_spec
from service.serving.api import ServeConfig
from service.settings import Settings
from tests.support.manifests import (
    CLUSTER,
    ROOT,
    SECRETISH,
    SERVICES,
    docs,
    env_map,
    kuberay,
    pod_containers,
)

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
RAY_PORTS = {"gcs-server": 6379, "dashboard": 8265, "client": 10001, "serve": 8000}
MANIFESTS = sorted([*ROOT.glob("cluster/**/*.yaml"), ROOT / "docker" / "compose.yaml"])
DOCKERFILES = {name: ROOT / "docker" / f"Dockerfile.{name}" for name in ("ray", "service")}
RAY_UP = docs(ROOT / "cluster" / "ray-up" / "aws.yaml")[0]


def ray_pin() -> str:
    pins = [d for d in PYPROJECT["project"]["dependencies"] if re.match(r"ray\[.*\]==", d)]
    assert len(pins) == 1, "pyproject.toml must pin ray exactly once"
    return pins[0].split("==")[1]


def dockerfile(name: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILES[name].read_text())
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    return [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1]) for ln in lines]


def instr(name: str, op: str) -> list[str]:
    return [args for o, args in dockerfile(name) if o == op]


def numtune_images() -> list[str]:
    """Every numtune/* image reference in manifests, compose and Dockerfile comments."""
    texts = [p.read_text() for p in [*MANIFESTS, *DOCKERFILES.values()]]
    return [m for t in texts for m in re.findall(r"numtune/[a-z-]+:[\w.-]+", t)]


def known_settings() -> set[str]:
    """NUMTUNE_* names the code reads: the service's Settings and the serving config."""
    names = set()
    for cls in (Settings, ServeConfig):
        prefix = cls.model_config.get("env_prefix", "")
        names |= {f"{prefix}{field}".upper() for field in cls.model_fields}
    return names


def test_every_manifest_parses_and_names_its_kind() -> None:
    assert len(MANIFESTS) >= 6
    for path in MANIFESTS:
        for doc in docs(path):
            assert isinstance(doc, dict), path
            if "kuberay" in str(path):
                versions = ("ray.io/v1", "v1", "networking.k8s.io/v1", "kueue.x-k8s.io/v1beta2")
                assert doc["apiVersion"] in versions and doc["kind"], path


def test_python_version_matches_requires_python() -> None:
    minimum = re.fullmatch(r">=(\d+\.\d+)", PYPROJECT["project"]["requires-python"])
    assert minimum, "requires-python must read >=X.Y"
    bases = {name: instr(name, "ARG")[0] for name in DOCKERFILES}
    assert len(set(bases.values())) == 1, f"Dockerfiles use different bases: {bases}"
    base = next(iter(bases.values()))
    # An exact patch release pinned by digest, never a floating tag.
    pinned = r"PYTHON_IMAGE=python:(\d+\.\d+)\.\d+-slim-bookworm@sha256:[0-9a-f]{64}"
    match = re.fullmatch(pinned, base)
    assert match and match.group(1) == minimum.group(1), base
    for name in DOCKERFILES:
        assert instr(name, "FROM") == ["${PYTHON_IMAGE}"], name


def test_versions_and_pins_agree_with_the_project() -> None:
    pin = ray_pin()
    assert CLUSTER["rayVersion"] == pin
    assert kuberay("RayService")["spec"]["rayClusterConfig"]["rayVersion"] == pin
    import ray

    assert ray.__version__ == pin, "the venv's Ray is not the pinned one"
    makefile = (ROOT / "Makefile").read_text()
    install = (ROOT / "docker" / "install.sh").read_text()
    torch = re.search(r"install -q (torch==[\d.]+)", makefile)
    assert torch and f'TORCH_VERSION="{torch.group(1).split("==")[1]}"' in install
    assets = re.search(r"^ASSETS := (.*?)(?<!\\)$", makefile, re.M | re.S)
    assert assets, "Makefile: ASSETS not found"
    wanted = set(assets.group(1).replace("\\", " ").split())
    assert set(re.search(r'ASSETS="(.*)"', install).group(1).split()) == wanted  # type: ignore[union-attr]


def test_images_are_tagged_with_the_project_version() -> None:
    refs = numtune_images()
    assert {r.split(":")[0] for r in refs} == {"numtune/ray", "numtune/service"}
    bad = [r for r in refs if r.split(":")[1] not in (VERSION, f"{VERSION}-gpu")]
    assert not bad, f"image tags not {VERSION}: {bad}"
    for service, image in (("ray-head", "ray"), ("ray-worker", "ray"), ("service", "service")):
        assert SERVICES[service]["image"] == f"numtune/{image}:{VERSION}"
        assert SERVICES[service]["build"]["dockerfile"] == f"docker/Dockerfile.{image}"
    for other in ("postgres", "minio"):  # third-party images: exact tags and digests
        image = SERVICES[other]["image"]
        assert re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", image), other
        assert not image.split("@")[0].endswith(":latest")


def run_console(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Call the [project.scripts] target for argv[0] as the installed script would."""
    target = PYPROJECT["project"]["scripts"][argv[0]]
    module, _, attr = target.partition(":")
    main = getattr(__import__(module, fromlist=[attr]), attr)
    old, sys.argv = sys.argv, argv
    try:
        with pytest.raises(SystemExit) as exit_:
            main()
    finally:
        sys.argv = old
    out = capsys.readouterr()
    assert exit_.value.code in (0, None), f"{shlex.join(argv)} failed:\n{out.err}"
    return out.out


def test_service_image_runs_the_api_console_script(capsys: pytest.CaptureFixture[str]) -> None:
    cmd = yaml.safe_load(instr("service", "CMD")[0])
    assert SERVICES["service"]["command"] == cmd
    assert cmd[:2] == ["numtune", "api"] and cmd[0] in PYPROJECT["project"]["scripts"]
    help_text = run_console([*cmd[:2], "--help"], capsys)
    assert "--host" in help_text and "--port" in help_text
    port = int(cmd[cmd.index("--port") + 1])
    assert port == Settings.model_fields["port"].default
    assert instr("service", "EXPOSE") == [str(port)]
    assert SERVICES["service"]["ports"] == [f"${{NUMTUNE_BIND:-127.0.0.1}}:{port}:{port}"]


def test_rayjob_runs_a_shipped_spec_that_fits_the_cluster() -> None:
    words = shlex.split(kuberay("RayJob")["spec"]["entrypoint"])
    assert words[:4] == ["python", "-m", "jobs", "run"]
    from jobs.__main__ import main as jobs_main

    with pytest.raises(SystemExit) as exit_:
        jobs_main(["run", "--help"])
    assert exit_.value.code == 0
    # Dockerfile.ray copies examples/ to /opt/numtune/examples.
    assert "/opt/numtune" in instr("ray", "WORKDIR")
    assert "examples ./examples" in instr("ray", "COPY")
    spec = load_job_spec(ROOT / words[4].removeprefix("/opt/numtune/"))
    cpu = next(g for g in CLUSTER["workerGroupSpecs"] if g["groupName"] == "cpu")
    per_pod = float(cpu["rayStartParams"]["num-cpus"])
    assert spec.scaling.num_workers * spec.scaling.cpus_per_worker <= cpu["maxReplicas"] * per_pod


def test_worker_groups_match_scaling_defaults() -> None:
    cpu_default, gpu_default = ScalingSpec(), ScalingSpec(use_gpu=True)
    groups = {g["groupName"]: g for g in CLUSTER["workerGroupSpecs"]}
    assert set(groups) == {"cpu", "gpu"}
    cpu, gpu = groups["cpu"], groups["gpu"]
    assert float(cpu["rayStartParams"]["num-cpus"]) == cpu_default.cpus_per_worker
    assert cpu["minReplicas"] >= cpu_default.num_workers
    assert float(gpu["rayStartParams"]["num-gpus"]) == gpu_default.worker_gpus
    for group, gpus in ((cpu, 0.0), (gpu, gpu_default.worker_gpus)):
        (container,) = group["template"]["spec"]["containers"]
        for bound in ("requests", "limits"):
            res = container["resources"][bound]
            assert float(res["cpu"]) == float(group["rayStartParams"]["num-cpus"])
            assert float(res.get("nvidia.com/gpu", 0)) == gpus
    assert "num-gpus" not in cpu["rayStartParams"]
    assert CLUSTER["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"


def without_db_url(spec: dict[str, Any]) -> dict[str, Any]:
    """A copy of a RayCluster spec whose containers lack NUMTUNE_DB_URL."""
    spec = yaml.safe_load(yaml.safe_dump(spec))
    for container in pod_containers(spec):
        container["env"] = [e for e in container["env"] if e["name"] != "NUMTUNE_DB_URL"]
    return spec


def test_rayservice_runs_the_same_cluster_and_the_serving_app() -> None:
    spec = kuberay("RayService")["spec"]
    # The same cluster, plus the database URL serving needs to check tokens.
    assert without_db_url(spec["rayClusterConfig"]) == CLUSTER, "rayservice.yaml drifted"
    serving = pod_containers(spec["rayClusterConfig"])
    assert all("NUMTUNE_DB_URL" in env_map(c["env"]) for c in serving)
    serve = yaml.safe_load(spec["serveConfigV2"])
    assert serve["http_options"]["port"] == RAY_PORTS["serve"]
    assert serve["http_options"]["port"] == Settings.model_fields["serve_port"].default
    (app,) = serve["applications"]
    module, _, attr = app["import_path"].partition(":")
    import importlib

    builder = getattr(importlib.import_module(module), attr, None)
    assert callable(builder), f"{app['import_path']} does not exist"


def test_token_auth_on_every_ray_process() -> None:
    secret = kuberay("Secret")
    assert secret["stringData"], "a Secret with no token"
    assert all(v == "REPLACE_ME" for v in secret["stringData"].values()), "real secret?"
    job = kuberay("RayJob")["spec"]["submitterPodTemplate"]["spec"]["containers"]
    for container in [*pod_containers(CLUSTER), *job]:
        env = env_map(container["env"])
        assert env["RAY_AUTH_MODE"] == "token", container["name"]
        ref = env["RAY_AUTH_TOKEN"]["secretKeyRef"]
        assert ref["name"] == secret["metadata"]["name"] and ref["key"] in secret["stringData"]
        for name, value in env.items():
            if SECRETISH.search(name):
                assert isinstance(value, dict) and "secretKeyRef" in value, name
    for service in ("ray-head", "ray-worker", "service"):
        env = SERVICES[service]["environment"]
        assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN"].startswith("${")
    starts = [c for c in RAY_UP["head_start_ray_commands"] + RAY_UP["worker_start_ray_commands"]]
    for command in (c for c in starts if "ray start" in c):
        assert "RAY_AUTH_MODE=token" in command and "RAY_AUTH_TOKEN_PATH=" in command


def test_ray_ports_never_leave_the_cluster_network() -> None:
    published = {name for name, svc in SERVICES.items() if "ports" in svc}
    assert published == {"service"}, "only the API may publish a port"
    assert not any(svc.get("network_mode") == "host" for svc in SERVICES.values())
    head = " ".join(SERVICES["ray-head"]["command"])
    for flag, name in (("--port", "gcs-server"), ("--dashboard-port", "dashboard")):
        assert f"{flag}={RAY_PORTS[name]}" in head
    assert f"--ray-client-server-port={RAY_PORTS['client']}" in head
    assert SERVICES["service"]["environment"]["NUMTUNE_RAY_ADDRESS"] == "http://ray-head:8265"
    (head_container,) = CLUSTER["headGroupSpec"]["template"]["spec"]["containers"]
    assert {p["name"]: p["containerPort"] for p in head_container["ports"]} == RAY_PORTS
    assert {int(p) for p in instr("ray", "EXPOSE")[0].split()} == set(RAY_PORTS.values())
    for kind in ("RayCluster", "RayService"):
        text = yaml.safe_dump(kuberay(kind))
        assert "hostPort" not in text and "hostNetwork" not in text, kind
        assert "NodePort" not in text and "LoadBalancer" not in text, kind
    assert CLUSTER["headGroupSpec"]["serviceType"] == "ClusterIP"
    kinds = {d["kind"] for p in ROOT.glob("cluster/**/*.yaml") for d in docs(p) if "kind" in d}
    assert not kinds & {"Ingress", "Route", "Gateway", "HTTPRoute"}
    rules = RAY_UP["provider"]["security_group"]["IpPermissions"]
    assert [(r["FromPort"], r["ToPort"]) for r in rules] == [(22, 22)]
    assert all(ip["CidrIp"] != "0.0.0.0/0" for r in rules for ip in r["IpRanges"])
    assert any("--dashboard-host=127.0.0.1" in c for c in RAY_UP["head_start_ray_commands"])


def test_numtune_env_vars_are_ones_the_code_reads() -> None:
    known = known_settings()
    texts = [p.read_text() for p in [*MANIFESTS, *DOCKERFILES.values()]]
    used = {m for t in texts for m in re.findall(r"\bNUMTUNE_[A-Z_]+\b", t)}
    # NUMTUNE_BIND is compose's own (the published address), read by no code.
    assert used - {"NUMTUNE_BIND"} <= known, f"unknown settings: {used - known}"
    needed = {"NUMTUNE_DB_URL", "NUMTUNE_RAY_ADDRESS", "NUMTUNE_STORAGE", "NUMTUNE_ADMIN_TOKEN"}
    assert needed <= set(SERVICES["service"]["environment"])
    assert SERVICES["service"]["environment"]["NUMTUNE_DB_URL"].startswith("postgresql+psycopg")


def test_images_run_as_non_root_and_bake_in_no_secret() -> None:
    for name in DOCKERFILES:
        user = instr(name, "USER")[-1]
        assert user.split(":")[0] not in ("root", "0"), name
        for op in ("ENV", "ARG"):
            for args in instr(name, op):
                names = re.findall(r"([A-Z_]+)=", args)
                assert not [n for n in names if SECRETISH.search(n)], f"{name}: {args}"
    for svc in SERVICES.values():
        env = svc.get("environment", {})
        for key, value in env.items():
            if SECRETISH.search(key):
                assert "${" in str(value), f"literal secret in compose: {key}"
    example = (ROOT / "docker" / ".env.example").read_text()
    for key, value in re.findall(r"^([A-Z_]+)=(.*)$", example, re.M):
        assert not SECRETISH.search(key) or value == "REPLACE_ME", key
    for kind in ("RayCluster",):
        assert kuberay(kind)["spec"]["headGroupSpec"]["template"]["spec"]["securityContext"][
            "runAsNonRoot"
        ]


def test_local_sh_is_valid_bash_and_never_runs_ray_stop() -> None:
    script = ROOT / "cluster" / "local.sh"
    assert script.stat().st_mode & 0o111, "cluster/local.sh must be executable"
    subprocess.run(["bash", "-n", str(script)], check=True)
    code = [ln for ln in script.read_text().splitlines() if not ln.lstrip().startswith("#")]
    assert not [ln for ln in code if re.search(r"\bray\b[\"' ]*\s+stop\b|\bpkill\b|killall", ln)]
    assert any("RAY_AUTH_MODE=token" in ln for ln in code)
    assert any("--dashboard-host 127.0.0.1" in ln for ln in code)


def test_build_local_sh_builds_both_images_with_build_args_only() -> None:
    """docker/build-local.sh (make images) changes the Dockerfiles' build args, never the
    Dockerfiles: every --build-arg it passes is an ARG both declare, and it builds each
    Dockerfile under the compose tag."""
    script = ROOT / "docker" / "build-local.sh"
    assert script.stat().st_mode & 0o111, "docker/build-local.sh must be executable"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    code = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    assert "set -euo pipefail" in code
    passed = set(re.findall(r'--build-arg "([A-Z_]+)=', text))
    assert passed == {"PYTHON_IMAGE", "TORCH_INDEX_URL"}, passed
    for name in DOCKERFILES:
        declared = {a.split("=")[0] for a in instr(name, "ARG")}
        assert passed <= declared, f"Dockerfile.{name} lacks {passed - declared}"
    # Its builds: docker/Dockerfile.$name -> numtune/$name:$VERSION, for both files.
    assert '-f "$ROOT/docker/Dockerfile.$name" -t "numtune/$name:$VERSION"' in text
    assert '"$ROOT/docker/Dockerfile.$name.dockerignore"' in text
    assert set(DOCKERFILES) == set(re.findall(r'^timed "build \w+" build (\w+)$', text, re.M))
    assert "sed -n 's/^version = " in text and "TORCH_VERSION=" in text
    # It checks the route the API serves, on loopback only, and never runs Ray on the host
    # network or publishes a port beyond 127.0.0.1.
    from service.health.routes import router

    assert "/healthz" in {r.path for r in router.routes}  # type: ignore[attr-defined]
    assert '"http://127.0.0.1:$CHECK_PORT/healthz"' in text
    publishes = [
        ln for ln in code if re.search(r"(^|\s)(-p|--publish)\s", ln) and "mkdir" not in ln
    ]
    assert publishes and all('-p "127.0.0.1:' in ln for ln in publishes)
    assert not [ln for ln in code if "podman run" in ln and "--network host" in ln]
    assert not [ln for ln in code if re.search(r"\bpkill\b|killall", ln)]


def test_make_images_is_separate_from_make_test() -> None:
    makefile = (ROOT / "Makefile").read_text()
    target = re.search(r"^images:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert target and "docker/build-local.sh" in target.group(1)
    phony = re.search(r"^\.PHONY:(.*)$", makefile, re.M)
    assert phony and "images" in phony.group(1).split()
    for other in ("test", "lint", "setup", "unit"):
        line = re.search(rf"^{other}:(.*)$", makefile, re.M)
        assert line and "images" not in line.group(1).split(), other
