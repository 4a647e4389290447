"""`zync build`: the chart of demo/invoices/etl.yaml passes `helm lint` and renders with
`helm template` for local Spark, a spark:// master, Spark on Kubernetes, SASL_SSL with
mutual TLS and an s3:// lake; every manifest validates against Kubernetes' OpenAPI schemas
of two versions (kubernetes-validate, offline); a changed rule restarts the etl pod only;
what the chart cannot deploy is refused in one line naming the key, by `zync build` and
by helm (values.schema.json). helm is the one `zync setup` built (engine/gotools)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.chart.build import plan_chart, write_chart
from engine.chart.values import ChartError
from engine.gotools.tools import GoToolError, require

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "demo" / "invoices" / "etl.yaml"
#: the oldest Kubernetes the chart takes (Chart.yaml's kubeVersion) and the newest known
KUBE_VERSIONS = ("1.30.0", "1.37.0")

BASE: dict[str, Any] = {
    "image": {"repository": "registry.example.com/data/zync", "tag": "0.1.0"},
    "kafka": {"bootstrapServers": "kafka-0.kafka:9092,kafka-1.kafka:9092"},
    "schemaRegistry": {"url": "http://registry.kafka:8081"},
    "lake": {"url": "s3://analytics-lake/zync", "s3": {"region": "eu-west-1"}},
}
SCENARIOS: dict[str, dict[str, Any]] = {
    "local-spark": {},
    "standalone-spark": {"spark": {"mode": "standalone", "master": "spark://spark-master.spark:7077"}},
    "spark-on-kubernetes": {
        "spark": {"mode": "kubernetes", "kubernetes": {"executors": 3, "executorMemory": "4g"}},
        "imagePullSecrets": [{"name": "regcred"}],
        "lake": {"url": "/lake", "volume": {"claimName": "zync-lake"}},
        "metrics": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}},
    },
    "sasl-ssl-mtls": {
        "kafka": {
            "securityProtocol": "SASL_SSL",
            "sasl": {"mechanism": "SCRAM-SHA-512", "username": "zync",
                     "passwordSecret": {"name": "zync-kafka-user", "key": "password"}},
            "tls": {"secretName": "zync-kafka-tls", "clientAuth": True},
        },
        "schemaRegistry": {"url": "https://registry.kafka:8081", "user": "zync",
                           "passwordSecret": {"name": "zync-registry"}},
        "api": {"controlTokenSecret": {"name": "zync-control"}},
    },
    "s3-lake": {
        "lake": {"url": "s3://analytics-lake/zync", "s3": {
            "endpoint": "http://minio.storage:9000", "allowHttp": True,
            "credentialsSecret": {"name": "zync-lake-keys"}}},
        "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/zync"}},
        "fromKafka": {"replicas": 3},
    },
}  # fmt: skip


@pytest.fixture(scope="module")
def helm() -> Path:
    try:
        return require("helm")  # built by `zync setup`, never here
    except GoToolError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("chart") / "zync-invoices"
    write_chart(plan_chart(CONFIG), out)
    return out


def _values(tmp_path: Path, name: str, values: dict[str, Any]) -> Path:
    from engine.chart.values import merge

    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(merge(BASE, values)))
    return path


def _helm(helm: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120, check=False)
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def render(helm: Path, chart: Path, values: Path, *extra: str) -> list[dict[str, Any]]:
    out = _helm(helm, "template", "inv", str(chart), "-n", "data", "-f", str(values), *extra).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def _named(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def _check_deployment(dep: dict[str, Any]) -> None:
    spec = dep["spec"]["template"]["spec"]
    container = _container(dep)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    args = container["args"]
    assert container["command"] == ["zync"]
    assert args[:2] == ["run", "/etc/zync/pipeline/etl.yaml"]
    assert args[args.index("--http") + 1] == f"0.0.0.0:{ports['http-api']}"
    assert "--http-public-read" in args  # probes and scrapes without the token
    for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"),
                        ("readinessProbe", "/readyz")):  # fmt: skip
        assert container[probe]["httpGet"] == {"path": path, "port": "http-api"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"]
    assert security["runAsNonRoot"]
    assert not security["allowPrivilegeEscalation"]
    assert spec["securityContext"]["runAsUser"] != 0
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    for path in ("/var/lib/zync", "/tmp"):  # the only places it writes
        assert "emptyDir" in volumes[mounts[path]]
    env = {e["name"]: e for e in container["env"]}
    assert env["ZYNC_HOME"]["value"] == "/var/lib/zync"
    for name, entry in env.items():  # a secret only ever as a reference to a Secret
        if re.search(r"PASSWORD|SECRET|TOKEN", name):
            assert set(entry) == {"name", "valueFrom"}, entry
    assert spec["terminationGracePeriodSeconds"] >= 60
    annotations = dep["spec"]["template"]["metadata"]["annotations"]
    assert re.fullmatch(r"[0-9a-f]{64}", annotations["checksum/pipeline"])


def _validate_all(docs: list[dict[str, Any]], promtool: Callable[[dict[str, Any]], None]) -> None:
    import kubernetes_validate

    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            if doc["kind"] == "PrometheusRule":
                promtool(doc["spec"])
            continue
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                where = ".".join(str(p) for p in exc.path)
                pytest.fail(f"{doc['kind']} {doc['metadata']['name']} on {version}: {where}: {exc.message}")


@pytest.fixture(scope="module")
def check_rules(tmp_path_factory: pytest.TempPathFactory) -> Callable[[dict[str, Any]], None]:
    promtool = require("promtool")
    where = tmp_path_factory.mktemp("rules") / "rules.yaml"

    def check(spec: dict[str, Any]) -> None:
        where.write_text(yaml.safe_dump(spec))
        done = subprocess.run([str(promtool), "check", "rules", str(where)], capture_output=True,
                              text=True, timeout=60, check=False)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr

    return check


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_chart_lints_renders_and_validates(
    scenario: str, helm: Path, chart: Path, tmp_path: Path, check_rules: Callable[[dict[str, Any]], None]
) -> None:
    values = _values(tmp_path, scenario, SCENARIOS[scenario])
    lint = _helm(helm, "lint", str(chart), "--strict", "-f", str(values))
    assert "0 chart(s) failed" in lint.stdout
    docs = render(helm, chart, values)
    _validate_all(docs, check_rules)
    deployments = _named(docs, "Deployment")
    assert set(deployments) == {
        "inv-zync-invoices-from-kafka", "inv-zync-invoices-etl",
        "inv-zync-invoices-to-kafka-newinvoices", "inv-zync-invoices-to-kafka-invoicechanges",
        "inv-zync-invoices-apply",
    }  # fmt: skip
    for dep in deployments.values():
        _check_deployment(dep)
        role = dep["metadata"]["labels"]["app.kubernetes.io/component"]
        strategy = dep["spec"]["strategy"]["type"]
        assert strategy == ("RollingUpdate" if role == "from-kafka" else "Recreate")
        if role != "from-kafka":
            assert dep["spec"]["replicas"] == 1
    ingest = deployments["inv-zync-invoices-from-kafka"]
    assert ingest["spec"]["replicas"] == SCENARIOS[scenario].get("fromKafka", {}).get("replicas", 1)
    (pdb,) = _named(docs, "PodDisruptionBudget").values()
    assert pdb["spec"]["selector"]["matchLabels"] == ingest["spec"]["selector"]["matchLabels"]
    spark = json.loads(_named(docs, "ConfigMap")["inv-zync-invoices-spark"]["data"]["spark.json"])
    etl = deployments["inv-zync-invoices-etl"]
    _SCENARIO_CHECKS.get(scenario, lambda *_: None)(docs, etl, spark)


def _local(docs: list[dict[str, Any]], etl: dict[str, Any], spark: dict[str, Any]) -> None:
    assert spark["master"] == "local[*]"
    assert etl["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    assert not _named(docs, "Role")


def _standalone(docs: list[dict[str, Any]], etl: dict[str, Any], spark: dict[str, Any]) -> None:
    assert spark["master"] == "spark://spark-master.spark:7077"
    env = {e["name"]: e for e in _container(etl)["env"]}
    assert env["SPARK_LOCAL_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"


def _kubernetes(docs: list[dict[str, Any]], etl: dict[str, Any], spark: dict[str, Any]) -> None:
    conf = spark["conf"]
    assert spark["master"].startswith("k8s://https://kubernetes.default.svc")
    assert conf["spark.kubernetes.container.image"] == "registry.example.com/data/zync:0.1.0"
    assert conf["spark.kubernetes.namespace"] == "data"
    assert conf["spark.executor.instances"] == "3"
    assert conf["spark.executor.memory"] == "4g"
    assert etl["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    template = yaml.safe_load(_named(docs, "ConfigMap")["inv-zync-invoices-spark"]["data"]["executor-pod.yaml"])
    import kubernetes_validate

    for version in KUBE_VERSIONS:
        kubernetes_validate.validate(template, version, strict=True)
    (executor,) = template["spec"]["containers"]
    assert executor["command"] == ["zync-spark-executor"]
    assert executor["name"] == conf["spark.kubernetes.executor.podTemplateContainerName"]
    (role,) = _named(docs, "Role").values()
    assert {"pods", "configmaps"} <= set(role["rules"][0]["resources"])
    (monitor,) = _named(docs, "ServiceMonitor").values()
    (service,) = _named(docs, "Service").values()
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "zync"  # job="zync"
    (rules,) = _named(docs, "PrometheusRule").values()
    shipped = yaml.safe_load((ROOT / "deploy" / "monitoring" / "zync-alerts.yaml").read_text())
    assert rules["spec"] == shipped  # the same rules, not a copy that drifts


def _sasl_tls(docs: list[dict[str, Any]], etl: dict[str, Any], spark: dict[str, Any]) -> None:
    container = _container(etl)
    env = {e["name"]: e for e in container["env"]}
    assert env["ZYNC_KAFKA_SECURITY_PROTOCOL"]["value"] == "SASL_SSL"
    assert env["ZYNC_KAFKA_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "zync-kafka-user", "key": "password"}
    assert env["ZYNC_REGISTRY_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "zync-registry"
    assert env["ZYNC_CONTROL_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "zync-control"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    for key, file in (("ZYNC_KAFKA_TLS_SERVER_CA_CERT_FILE", "ca.crt"),
                      ("ZYNC_KAFKA_TLS_CLIENT_CERT_FILE", "tls.crt"),
                      ("ZYNC_KAFKA_TLS_CLIENT_KEY_FILE", "tls.key")):  # fmt: skip
        assert env[key]["value"] == f"{mounts['kafka-tls']}/{file}"
    volumes = {v["name"]: v for v in etl["spec"]["template"]["spec"]["volumes"]}
    assert volumes["kafka-tls"]["secret"]["secretName"] == "zync-kafka-tls"


def _s3(docs: list[dict[str, Any]], etl: dict[str, Any], spark: dict[str, Any]) -> None:
    env = {e["name"]: e for e in _container(etl)["env"]}
    assert env["ZYNC_LAKE"]["value"] == "s3://analytics-lake/zync"
    assert env["AWS_ENDPOINT_URL"]["value"] == "http://minio.storage:9000"
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "zync-lake-keys"
    (account,) = _named(docs, "ServiceAccount").values()
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam")


_SCENARIO_CHECKS = {
    "local-spark": _local, "standalone-spark": _standalone, "spark-on-kubernetes": _kubernetes,
    "sasl-ssl-mtls": _sasl_tls, "s3-lake": _s3,
}  # fmt: skip


def _checksums(docs: list[dict[str, Any]]) -> dict[str, str]:
    return {
        name.removeprefix("inv-zync-invoices-"): dep["spec"]["template"]["metadata"]["annotations"]["checksum/pipeline"]
        for name, dep in _named(docs, "Deployment").items()
    }


def test_a_changed_configuration_restarts_only_the_roles_that_read_the_change(
    helm: Path, chart: Path, tmp_path: Path
) -> None:
    values = _values(tmp_path, "base", {})
    before = _checksums(render(helm, chart, values))
    text = CONFIG.read_text()

    def changed(new_text: str) -> set[str]:
        edited = tmp_path / "etl.yaml"
        edited.write_text(new_text)
        after = _checksums(render(helm, chart, values, "--set-file", f"pipeline.config={edited}"))
        return {role for role in before if after[role] != before[role]}

    assert changed(text + "\n# a comment changes nothing\n") == set()
    assert changed(text.replace("expire-after: 1h", "expire-after: 2h")) == {"etl"}
    assert changed(text.replace("- {topic: InvoiceStatus, pool: Raw}",
                                "- {topic: InvoiceStatus, pool: Raw2}")) == {"from-kafka", "etl"}  # fmt: skip
    assert changed(text.replace("envelope: debezium", "envelope: differential")) == {
        "to-kafka-invoicechanges", "etl", "apply"}  # fmt: skip
    assert changed(text.replace("keys: [ID]}", "keys: [ID], history: true}")) == {"etl", "apply"}
    # a configuration without tables: no apply pod
    without = text[: text.index("\ntables:")] + "\n"
    edited = tmp_path / "no-tables.yaml"
    edited.write_text(without)
    docs = render(helm, chart, values, "--set-file", f"pipeline.config={edited}")
    assert "inv-zync-invoices-apply" not in _named(docs, "Deployment")


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"spark": {"mode": "yarn"}}, "'/spark/mode'"),
        ({"image": {"repository": ""}}, "'/image/repository'"),
        ({"kafka": {"securityProtocol": "SASL_SSL"}}, "'/kafka/sasl"),
        ({"lake": {"url": "/lake"}}, "'/lake"),
        ({"fromKafka": {"replicas": -1}}, "'/fromKafka/replicas'"),
        ({"toKafka": {"groups": [{"name": "Bad_Name", "outputs": ["NewInvoices"]}]}}, "'/toKafka/groups/0/name'"),
    ],
)
def test_helm_refuses_values_that_break_the_schema(
    values: dict[str, Any], key: str, helm: Path, chart: Path, tmp_path: Path
) -> None:
    path = _values(tmp_path, "bad", values)
    for command in (("template", "inv", str(chart)), ("lint", str(chart))):
        done = _helm(helm, *command, "-f", str(path), check=False)
        assert done.returncode != 0, done.stdout
        assert "values don't meet the specifications of the schema" in done.stdout + done.stderr
        assert key in done.stdout + done.stderr


def test_a_to_kafka_group_naming_no_output_is_refused_at_install(helm: Path, chart: Path, tmp_path: Path) -> None:
    path = _values(tmp_path, "bad", {"toKafka": {"groups": [{"name": "x", "outputs": ["Nope"]}]}})
    done = _helm(helm, "template", "inv", str(chart), "-f", str(path), check=False)
    assert done.returncode != 0
    assert "toKafka.groups[0].outputs: \"Nope\" is not an output of pipeline invoices" in done.stderr


def _config_with(tmp_path: Path, old: str, new: str) -> Path:
    path = tmp_path / "etl.yaml"
    text = CONFIG.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.parametrize(
    ("edit", "sets", "expected"),
    [
        (("- {topic: InvoiceStatus, pool: Raw}", "- {topic: InvoiceStatus, pool: Staging}"), [],
         r"inputs\.1\.pool: 'Staging' is the outputs' staging pool"),
        (("- {topic: NewInvoices, pool: Staging}", "- {pool: Staging}"), [],
         r"`outputs\.0\.topic` is missing"),
        (None, ["spark.mode=yarn"], r"^values: spark\.mode: 'yarn' is not one of"),
        (None, ["kafka.bootstrapServers=broker"], r"^values: kafka\.bootstrapServers: 'broker' is not host:port"),
        (None, ["fromKafka.replica=2"], r"^values: fromKafka: unknown key 'replica' \(did you mean 'replicas'\?\)"),
        (None, ["toKafka.groups=[{name: a, outputs: [NewInvoices]}]"],
         r"^values: toKafka\.groups: no group delivers output 'InvoiceChanges'"),
        (None, ["toKafka.groups=[{name: a, outputs: [" + ", ".join(f"t{n:04}" for n in range(901)) + "]}]"],
         r"^values: toKafka\.groups\.0\.outputs: 901 outputs; one to-kafka process delivers at most 900"),
    ],
)  # fmt: skip
def test_zync_build_refuses_what_it_cannot_deploy_in_one_line(
    edit: tuple[str, str] | None, sets: list[str], expected: str, tmp_path: Path
) -> None:
    config = _config_with(tmp_path, *edit) if edit else CONFIG
    with pytest.raises(Exception, match=expected) as caught:
        plan_chart(config, sets=sets)
    assert "\n" not in str(caught.value)


def test_profiles_give_the_connection_values_and_never_a_secret(tmp_path: Path) -> None:
    (tmp_path / "kafka.json").write_text(json.dumps({
        "bootstrap_servers": "b1.example.com:9093", "security_protocol": "SASL_SSL",
        "sasl_mechanisms": "SCRAM-SHA-512", "sasl_username": "zync", "sasl_password": "hunter2"}))
    (tmp_path / "storage.json").write_text(json.dumps({
        "lake": "s3://lake/zync", "AWS_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "s3cr3t"}))  # fmt: skip
    for path in tmp_path.iterdir():
        path.chmod(0o600)
    plan = plan_chart(CONFIG, profiles=tmp_path, sets=["kafka.sasl.passwordSecret.name=zync-kafka"])
    text = plan.values_yaml()
    assert "hunter2" not in text
    assert "s3cr3t" not in text
    assert plan.values["kafka"]["bootstrapServers"] == "b1.example.com:9093"
    assert plan.values["kafka"]["sasl"]["username"] == "zync"
    assert plan.values["lake"] == {**plan.values["lake"], "url": "s3://lake/zync"}
    assert any("sasl_password is not copied" in note for note in plan.notes)
    assert plan.unset == ["image.repository"]
    (tmp_path / "kafka.json").write_text(json.dumps({"bootstrap_servers": "127.0.0.1:9092"}))
    with pytest.raises(ChartError, match=r"kafka\.json: bootstrap_servers 127\.0\.0\.1:9092: 127\.0\.0\.1 is this machine's loopback"):
        plan_chart(CONFIG, profiles=tmp_path)


def test_the_cli_writes_the_chart_and_prints_its_values(tmp_path: Path) -> None:
    def zync(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "zync_tui.cli", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=120, check=False)  # fmt: skip

    listed = zync("build", str(CONFIG), "--values-only")
    assert listed.returncode == 0, listed.stderr
    assert yaml.safe_load(listed.stdout)["toKafka"]["groups"][0] == {"name": "newinvoices", "outputs": ["NewInvoices"]}
    assert "# Pods in the consumer group" in listed.stdout
    out = tmp_path / "chart"
    built = zync("build", str(CONFIG), "-o", str(out), "--set", "image.repository=r.example.com/zync")
    assert built.returncode == 0, built.stderr
    assert "set kafka.bootstrapServers, lake.url" in built.stderr
    assert yaml.safe_load((out / "values.yaml").read_text())["image"]["repository"] == "r.example.com/zync"
    assert (out / "files" / "etl.yaml").read_text() == CONFIG.read_text()
    refused = zync("build", str(CONFIG), "-o", str(out), "--set", "spark.mode=yarn")
    assert refused.returncode == 1
    assert refused.stderr.strip().count("\n") == 0
    assert "spark.mode" in refused.stderr
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    taken = zync("build", str(CONFIG), "-o", str(other))
    assert taken.returncode == 1
    assert "not a chart `zync build` wrote" in taken.stderr


def test_the_image_is_built_by_the_readmes_script_and_fits_the_chart(helm: Path, chart: Path, tmp_path: Path) -> None:
    """deploy/image/Containerfile: Java 17, non-root, built by scripts/venv.sh (the script
    the README's commands and the test command run) from the runtime part of the lock at
    the lock's versions; the paths the chart's pods use are the image's."""
    from tests.pods import CONTAINERFILE

    text = CONTAINERFILE.read_text().replace("\\\n", " ")
    assert "openjdk-17-jre-headless" in text
    run = next(line for line in text.splitlines() if "scripts/venv.sh" in line and not line.startswith("#"))
    assert run.startswith("RUN ")
    assert "ZYNC_LOCK=requirements-runtime.lock" in run
    assert "ZYNC_SETUP_ARGS=\"--with s3\"" in run  # the s3a jars baked in: pods start offline
    user = re.search(r"^USER (\d+):(\d+)$", text, re.M)
    assert user is not None
    assert int(user[1]) != 0
    env = dict(re.findall(r"(\w+)=(\S+)", " ".join(line[4:] for line in text.splitlines() if line.startswith("ENV "))))
    assert env["PATH"].startswith("/opt/zync/.venv/bin:")  # `zync`, the pods' command
    assert "install -m 0755 deploy/image/spark-executor.sh /usr/local/bin/zync-spark-executor" in run

    def pins(path: Path) -> dict[str, str]:
        return dict(re.findall(r"^([a-z0-9_.-]+)==(\S+)", path.read_text(), re.M))

    full, runtime = pins(ROOT / "requirements.lock"), pins(ROOT / "requirements-runtime.lock")
    assert {k: full.get(k) for k in runtime} == runtime  # what the tests ran, no more
    assert "pytest" not in runtime
    assert "pyspark" in runtime
    docs = render(helm, chart, _values(tmp_path, "image", {}))
    for dep in _named(docs, "Deployment").values():
        container = _container(dep)
        env_of = {e["name"]: e.get("value") for e in container["env"]}
        assert env_of["ZYNC_HOME"] == env["ZYNC_HOME"] == env["HOME"]  # the pods' emptyDir
        assert dep["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == int(user[1])
    assert subprocess.run(["bash", "-n", str(ROOT / "deploy" / "image" / "spark-executor.sh")], check=False).returncode == 0


def test_zync_run_delivers_only_the_outputs_it_is_given(tmp_path: Path) -> None:
    """`zync run --only to-kafka --output TOPIC` (a to-kafka group's pod): that output only;
    a topic that is not an output of the configuration is refused in one line."""
    from engine.lake.pools import Lake
    from engine.services.pipeline import Pipeline
    from engine.services.service import ServiceError
    from engine.settings.kafka import KafkaProfile

    kafka = KafkaProfile(bootstrap_servers="kafka.invalid:9092")
    lake = Lake(tmp_path / "lake")
    pipeline = Pipeline(CONFIG, lake, kafka=kafka, outputs=["InvoiceChanges"])
    assert [o.topic for o in pipeline.to_kafka.outputs] == ["InvoiceChanges"]
    with pytest.raises(ServiceError, match=r"^output 'Bogus' is not an output of .*etl\.yaml \(outputs: NewInvoices, InvoiceChanges\)$"):
        Pipeline(CONFIG, lake, kafka=kafka, outputs=["Bogus"])
