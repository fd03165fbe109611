"""deploy/ as an operator uses it, checked without Docker or Kubernetes (neither runs
here): the compose file, the manifests, the Dockerfile and the systemd unit are parsed;
every file they reference exists; ports and variables agree with what
``solrace-server --help`` says; both nginx configurations pass ``nginx -t``; the
example-certificate script writes a matching pair."""

from __future__ import annotations

import ipaddress
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from solrace.net.server import DRAIN_HAND_OFF_MIN_S, DRAIN_LIMIT_S

from tests.deploy.conftest import DEPLOY, REPO
from tests.support.server_process import SERVER_SCRIPT

#: The longest a node's drain takes (docs/server.md, "Shutdown"): what every stop
#: timeout in deploy/ must exceed.
_DRAIN_MOST_S: Final = DRAIN_LIMIT_S + DRAIN_HAND_OFF_MIN_S

NODES = ("solrace-1", "solrace-2", "solrace-3")


@pytest.fixture(scope="module")
def server_help() -> str:
    done = subprocess.run(
        [str(SERVER_SCRIPT), "--help"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return " ".join(done.stdout.split())


@pytest.fixture(scope="module")
def variables(server_help: str) -> set[str]:
    found = set(re.findall(r"\$?(SOLRACE_[A-Z_]+)", server_help))
    assert {"SOLRACE_PORT", "SOLRACE_HOST", "SOLRACE_REDIS_URL"} <= found
    return found


@pytest.fixture(scope="module")
def default_port(server_help: str) -> int:
    match = re.search(r"\$SOLRACE_PORT, default (\d+)", server_help)
    assert match, server_help
    return int(match.group(1))


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return data


def _manifests() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    docs: list[dict[str, Any]] = []
    for name in kustomization["resources"]:
        path = DEPLOY / "k8s" / name
        assert path.is_file(), f"kustomization names a missing file: {name}"
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    listed = {p.name for p in (DEPLOY / "k8s").glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == set(kustomization["resources"]), "every manifest is in the kustomization"
    return docs


def _kind(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"one {kind} expected, found {len(found)}"
    return found[0]


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def _nginx_ports(conf: str) -> set[int]:
    return {int(p) for p in re.findall(r"^\s*server\s+[\w.\-]+:(\d+)", conf, re.M)}


# ---------------------------------------------------------------- compose


def test_compose_services_and_referenced_files() -> None:
    compose = _compose()
    services = compose["services"]
    assert set(services) == {"redis", "nginx", *NODES}
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists() or source.startswith("./tls/example."), (
                    f"{name} mounts a missing file: {source}"
                )
        build = service.get("build")
        if build:
            context = (DEPLOY / build["context"]).resolve()
            assert context == REPO
            assert (context / build["dockerfile"]).is_file()
    # The certificate nginx mounts is what the documented script writes.
    script = (DEPLOY / "tls" / "make-example-cert.sh").read_text()
    for volume in services["nginx"]["volumes"]:
        if "/tls/" in volume:
            assert Path(volume.split(":")[0]).name in script


def test_compose_redis_runs_deploy_redis_conf_with_its_data_in_a_volume() -> None:
    redis = _compose()["services"]["redis"]
    conf_mount = next(v for v in redis["volumes"] if v.startswith("./redis.conf:"))
    assert redis["command"][:2] == ["redis-server", conf_mount.split(":")[1]]
    assert "--dir" in redis["command"]
    data_dir = redis["command"][redis["command"].index("--dir") + 1]
    assert any(v.endswith(f":{data_dir}") and not v.startswith(".") for v in redis["volumes"])
    assert "ports" not in redis


def test_compose_nodes_ports_and_variables_agree_with_the_server(
    variables: set[str], default_port: int
) -> None:
    compose = _compose()
    conf = (DEPLOY / "nginx" / "compose.conf").read_text()
    for name in NODES:
        node = compose["services"][name]
        env = node["environment"]
        assert set(env) <= variables, f"{name}: unknown variables {set(env) - variables}"
        port = int(env["SOLRACE_PORT"])
        assert port == default_port
        assert env["SOLRACE_HOST"] == "0.0.0.0"
        redis_url = env["SOLRACE_REDIS_URL"]
        assert redis_url.startswith("redis://redis:6379/")
        assert "ports" not in node, "nodes (and their /metrics) stay inside"
        assert f"server {name}:{port} " in conf
        assert int(re.sub(r"\D", "", node["stop_grace_period"])) > _DRAIN_MOST_S
    assert _nginx_ports(conf) == {default_port}


def test_compose_nginx_publishes_only_80_and_443_and_the_backend_is_internal() -> None:
    compose = _compose()
    assert compose["services"]["nginx"]["ports"] == ["80:80", "443:443"]
    assert compose["networks"]["backend"]["internal"] is True
    for name in ("redis", *NODES):
        assert compose["services"][name]["networks"] == ["backend"]


@pytest.mark.parametrize("conf", ["nginx/compose.conf", "nginx.conf"])
def test_nginx_redirects_80_terminates_tls_upgrades_and_refuses_metrics(conf: str) -> None:
    text = (DEPLOY / conf).read_text()
    assert re.search(r"listen 80;.*?return 301 https://\$host\$request_uri;", text, re.S)
    assert "listen 443 ssl;" in text
    assert re.search(r"location = /metrics \{\s*return 403;\s*\}", text)
    assert "proxy_set_header Upgrade $http_upgrade;" in text
    assert "proxy_set_header Connection $connection_upgrade;" in text


@pytest.mark.parametrize("conf", ["nginx/compose.conf", "nginx.conf"])
def test_nginx_tells_the_nodes_it_took_https(conf: str) -> None:
    """A browser at https://… is told the command that races there
    (docs/server.md, "HTTP on the same port"): ``wss://`` only when the TLS proxy says
    it took https (``X-Forwarded-Proto``). compose.conf sent it; the host's nginx.conf
    did not, and a browser at https://solrace.example.org/ was told ``solrace quick
    --server ws://solrace.example.org`` (port 80, which only redirects: an audit)."""
    text = (DEPLOY / conf).read_text()
    assert "proxy_set_header X-Forwarded-Proto $scheme;" in text


# ------------------------------------------------------------- nginx -t


def _nginx_t(site: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():  # .ci/run installs it: missing is a failure
        pytest.fail("nginx is not installed (bash .ci/run installs it)")
    (tmp_path / "site.conf").write_text(site)
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log stderr;\nevents {{}}\n"
        f"http {{\n  access_log off;\n  include {tmp_path}/site.conf;\n}}\n"
    )
    return subprocess.run(
        [nginx, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
        capture_output=True,
        text=True,
        timeout=30,
    )


def _with_example_cert(text: str, tmp_path: Path) -> str:
    subprocess.run(
        ["bash", str(DEPLOY / "tls" / "make-example-cert.sh"), str(tmp_path / "tls")],
        check=True,
        capture_output=True,
    )
    text = re.sub(r"ssl_certificate\s+\S+;", f"ssl_certificate {tmp_path}/tls/example.crt;", text)
    return re.sub(
        r"ssl_certificate_key\s+\S+;", f"ssl_certificate_key {tmp_path}/tls/example.key;", text
    )


def test_compose_nginx_conf_passes_nginx_t(tmp_path: Path) -> None:
    # The compose service names resolve only inside compose: loopback stands in.
    text = (DEPLOY / "nginx" / "compose.conf").read_text()
    for name in NODES:
        text = text.replace(f"server {name}:", "server 127.0.0.1:")
    done = _nginx_t(_with_example_cert(text, tmp_path), tmp_path)
    assert done.returncode == 0, done.stderr
    assert "test is successful" in done.stderr


def test_host_nginx_conf_passes_nginx_t(tmp_path: Path) -> None:
    text = (DEPLOY / "nginx.conf").read_text()
    done = _nginx_t(_with_example_cert(text, tmp_path), tmp_path)
    assert done.returncode == 0, done.stderr


def test_example_certificate_script_writes_a_matching_pair(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(DEPLOY / "tls" / "make-example-cert.sh"), str(tmp_path), "solrace.test"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "example only" in done.stdout
    crt, key = tmp_path / "example.crt", tmp_path / "example.key"
    assert key.stat().st_mode & 0o077 == 0, "the private key is readable by its owner only"

    def modulus(*args: str) -> str:
        return subprocess.run(
            ["openssl", *args, "-noout", "-modulus"], capture_output=True, text=True, check=True
        ).stdout

    assert modulus("x509", "-in", str(crt)) == modulus("rsa", "-in", str(key))
    text = subprocess.run(
        ["openssl", "x509", "-in", str(crt), "-noout", "-text"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "DNS:solrace.test" in text and "IP Address:127.0.0.1" in text
    # No private key is committed: the generated files are ignored.
    paths = ["deploy/tls/example.key", "deploy/tls/example.crt"]
    ignored = subprocess.run(
        ["git", "check-ignore", *paths], cwd=REPO, capture_output=True, text=True
    )
    assert ignored.stdout.split() == paths


# ------------------------------------------------------------- Dockerfile


def test_dockerfile_multi_stage_non_root_healthcheck_and_sigterm(default_port: int) -> None:
    steps = _dockerfile()
    stages = [args for op, args in steps if op == "FROM"]
    assert len(stages) >= 2 and " AS build" in stages[0]
    final = steps[max(i for i, (op, _) in enumerate(steps) if op == "FROM") :]
    users = [args for op, args in final if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    health = [args for op, args in final if op == "HEALTHCHECK"]
    assert health and "/healthz" in health[0]
    assert [args for op, args in final if op == "EXPOSE"] == [str(default_port)]
    assert ("STOPSIGNAL", "SIGTERM") in final
    assert ("ENTRYPOINT", '["solrace-server"]') in final  # exec form: PID 1 gets SIGTERM
    env = " ".join(args for op, args in final if op == "ENV")
    assert f"SOLRACE_PORT={default_port}" in env and "SOLRACE_HOST=0.0.0.0" in env
    # Without a Redis URL the embedded engine needs a data directory the user can write
    # (its home is /nonexistent): one is made, owned by the user, and is a volume.
    data = re.search(r"SOLRACE_DATA_DIR=(\S+)", env)
    assert data is not None
    made = " ".join(args for op, args in final if op == "RUN")
    assert f"mkdir -p {data[1]}" in made and f"chown solrace:solrace {data[1]}" in made
    assert any(op == "VOLUME" and data[1] in args for op, args in final)
    for op, args in steps:  # every COPY from the context exists (context: the repo root)
        if op == "COPY" and not args.startswith("--from"):
            for source in args.split()[:-1]:
                assert (REPO / source).exists(), source
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    for op, args in steps:
        if op == "COPY" and not args.startswith("--from"):
            for source in args.split()[:-1]:
                assert f"!{source}" in ignore or f"!{source}/**" in ignore, source


def test_main_drains_on_sigterm() -> None:
    # What the image's STOPSIGNAL, compose's stop_signal and the unit rely on.
    main = (REPO / "server" / "solrace" / "net" / "main.py").read_text()
    assert "signal.SIGTERM" in main and "server.drain()" in main


# ------------------------------------------------------------- Kubernetes


def test_k8s_has_every_kind_and_the_selectors_match() -> None:
    docs = _manifests()
    kinds = {d["kind"] for d in docs}
    assert {
        "Deployment",
        "Service",
        "ConfigMap",
        "PodDisruptionBudget",
        "HorizontalPodAutoscaler",
    } <= kinds
    deployment = _kind(docs, "Deployment")
    # docs/deploy.md: two releases on one Redis are not supported (it was RollingUpdate)
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert _kind(docs, "Service")["spec"]["selector"].items() <= labels.items()
    pdb = _kind(docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    hpa = _kind(docs, "HorizontalPodAutoscaler")
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]
    assert hpa["spec"]["minReplicas"] >= 2 and pdb["spec"]["maxUnavailable"] == 1


def test_k8s_ports_probes_and_variables_agree_with_the_server(
    variables: set[str], default_port: int
) -> None:
    docs = _manifests()
    config = _kind(docs, "ConfigMap")
    assert set(config["data"]) <= variables
    assert int(config["data"]["SOLRACE_PORT"]) == default_port
    assert config["data"]["SOLRACE_HOST"] == "0.0.0.0"
    spec = _kind(docs, "Deployment")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["envFrom"] == [{"configMapRef": {"name": config["metadata"]["name"]}}]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"ws": default_port}
    ready, alive = container["readinessProbe"]["httpGet"], container["livenessProbe"]["httpGet"]
    assert (ready["path"], ready["port"]) == ("/healthz", "ws")
    assert (alive["path"], alive["port"]) == ("/healthz?probe=live", "ws")
    assert _kind(docs, "Service")["spec"]["ports"][0]["targetPort"] == "ws"
    annotations = _kind(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(default_port)
    # preStop, then the drain (at most DRAIN_LIMIT_S, the hand-off a second more),
    # inside the grace period.
    sleep = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert spec["terminationGracePeriodSeconds"] > sleep + _DRAIN_MOST_S
    assert container["resources"]["requests"]["cpu"]  # the HPA's utilisation base
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0


async def test_liveness_probe_answers_while_readiness_says_unavailable() -> None:
    # /healthz?probe=live does not depend on Redis; /healthz does (k8s/deployment.yaml).
    import asyncio
    import urllib.error
    import urllib.request

    from tests.support.server_process import solrace_server

    def get(url: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    async with solrace_server(args=["--redis-url", "redis://127.0.0.1:1/0"]) as server:
        base = server.url.replace("ws://", "http://")
        assert await asyncio.to_thread(get, base + "/healthz?probe=live") == (200, "alive\n")
        assert await asyncio.to_thread(get, base + "/healthz") == (503, "unavailable\n")


# ------------------------------------------------------------- systemd


def _unit() -> dict[str, list[str]]:
    entries: dict[str, list[str]] = {}
    for line in (DEPLOY / "solrace@.service").read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            entries.setdefault(key.strip(), []).append(value.strip())
    return entries


def test_systemd_unit_env_file_and_the_documented_steps(variables: set[str]) -> None:
    unit = _unit()
    readme = (DEPLOY / "README.md").read_text()
    (exec_start,) = unit["ExecStart"]
    venv = exec_start.removesuffix(" --port %i").removesuffix("/bin/solrace-server")
    assert f"python3 -m venv {venv}" in readme
    (env_file,) = unit["EnvironmentFile"]
    assert f"deploy/solrace.env {env_file}" in readme  # the step that creates it
    assert unit["User"] == ["solrace"] and "useradd --system" in readme
    assert unit["KillSignal"] == ["SIGTERM"] and int(unit["TimeoutStopSec"][0]) > _DRAIN_MOST_S
    # the node alone gets the SIGTERM (its solver workers are its to stop: an audit)
    assert unit["KillMode"] == ["mixed"]
    # The instance's port as a flag: the env file could override a variable (an audit).
    assert exec_start.endswith(" --port %i") and "Environment" not in unit
    # A bad flag or variable (status 2) is not restarted again and again.
    assert unit["Restart"] == ["on-failure"] and unit["RestartPreventExitStatus"] == ["2"]
    env = dict(
        line.split("=", 1)
        for line in (DEPLOY / "solrace.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert set(env) <= variables and "SOLRACE_REDIS_URL" in env
    ports = _nginx_ports((DEPLOY / "nginx.conf").read_text())
    assert f"solrace@{min(ports)}" in readme
    for port in ports:
        assert f"solrace@{port}" in readme


def test_systemd_unit_verifies(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:  # a parse is all that can be done; the test above did it
        return
    unit = tmp_path / "solrace@8765.service"
    unit.write_text((DEPLOY / "solrace@.service").read_text())
    done = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True)
    # The only complaint allowed: the venv of the steps is not installed on this machine.
    problems = [
        line
        for line in done.stderr.splitlines()
        if line.strip() and "/opt/solrace/.venv/bin/solrace-server is not executable" not in line
    ]
    assert problems == []


def _deployed_environments() -> dict[str, dict[str, str]]:
    """Every place deploy/ sets solrace-server's variables, and what it sets them to."""
    compose = _compose()
    found = {f"compose.yaml {n}": dict(compose["services"][n]["environment"]) for n in NODES}
    found["k8s ConfigMap"] = dict(_kind(_manifests(), "ConfigMap")["data"])
    found["solrace.env"] = dict(
        line.split("=", 1)
        for line in (DEPLOY / "solrace.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    env = " ".join(args for op, args in _dockerfile() if op == "ENV")
    found["Dockerfile"] = dict(re.findall(r"(SOLRACE_[A-Z_]+)=(\S+)", env))
    return found


def test_every_variable_deploy_sets_is_one_the_server_takes_with_a_value_it_takes() -> None:
    """Names and values alike: a value the node refuses (``SOLRACE_LOG_FORMAT=JSON``) is
    exit status 2 at the first start of the service. Checked as the node checks them,
    with ``resolve`` (the operator audit: the Dockerfile's variables were not checked)."""
    from solrace.net import main as server_main

    names = {s.variable for s in server_main.settings()}
    no_flags = server_main.build_parser().parse_args([])
    for where, env in _deployed_environments().items():
        assert set(env) <= names, (where, set(env) - names)
        server_main.resolve(no_flags, {k: str(v) for k, v in env.items()})  # raises if not


#: Where each deployment's proxy reaches the nodes from: docker's default address pool
#: (compose's backend network), a pod network (ingress-nginx), nginx on the host.
PROXY_SEEN_FROM: Final = {
    "compose.yaml": "172.18.0.5",
    "k8s ConfigMap": "10.244.1.7",
    "solrace.env": "127.0.0.1",
}


def test_every_deployments_proxy_is_a_trusted_one() -> None:
    """A node trusts loopback alone by default (a LAN client is no proxy): a deployment
    whose proxy reaches the nodes from a container or pod network names that network,
    or every client behind its nginx shares one cap of 64 connections and 12 rooms a
    minute, and one seat in a public room."""
    from solrace.net import main as server_main
    from solrace.net.admission import Admission

    no_flags = server_main.build_parser().parse_args([])
    for where, env in _deployed_environments().items():
        seen_from = next((a for w, a in PROXY_SEEN_FROM.items() if where.startswith(w)), None)
        if seen_from is None:
            continue  # the image's own defaults: no proxy of its own
        args = server_main.resolve(no_flags, {k: str(v) for k, v in env.items()})
        admission = Admission(100, trusted=args.trusted_proxies)
        assert admission.is_trusted(ipaddress.ip_address(seen_from)), where
