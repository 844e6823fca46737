"""The operator's pure parts: manifests rendered from the flight-delays StreamletApplication,
spec hashes (what an update redeploys), validation, topics wanted, status and conditions."""

import base64
import copy
import json
from pathlib import Path

import pyspark
import pytest
import yaml
from typer.testing import CliRunner

from blueprint.cli import app as blueprint_cli
from streamlets.runtime.runconfig import StreamletRunConfig
from streamlets_operator import render, status, topics

ROOT = Path(__file__).resolve().parents[2]
STREAMLETS = ["flights", "weather", "enrich", "stats", "files"]


@pytest.fixture(scope="module")
def built() -> dict:
    result = CliRunner().invoke(blueprint_cli, ["build", str(ROOT / "examples" / "flight-delays" / "blueprint.yaml"),
                                                "--image", "registry.example/fd:1", "--kafka", "kafka:9092"])
    assert result.exit_code == 0, result.output
    body = yaml.safe_load(result.stdout)
    body["metadata"].update(namespace="apps", uid="0000-1111", generation=1)
    return body


def streamlet(body, name):
    return next(s for s in body["spec"]["streamlets"] if s["name"] == name)


def hashes(body):
    return {n: sa["metadata"]["annotations"][render.ANNOTATION_HASH]
            for n, (_, sa) in render.render_all(body, env={})["streamlets"].items()}


def test_children_of_the_example(built):
    out = render.render_all(built, env={})
    assert sorted(out["streamlets"]) == sorted(STREAMLETS)
    claim = out["claim"]
    assert claim["metadata"]["name"] == "flight-delays-checkpoints"
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    secret, sa = out["streamlets"]["enrich"]
    for child in (claim, secret, sa):
        (ref,) = child["metadata"]["ownerReferences"]
        assert ref == {"apiVersion": "streamlets.io/v1alpha1", "kind": "StreamletApplication", "name": "flight-delays",
                       "uid": "0000-1111", "controller": True, "blockOwnerDeletion": True}
        assert child["metadata"]["labels"]["app.kubernetes.io/part-of"] == "flight-delays"
        assert child["metadata"]["namespace"] == "apps"
    assert sa["metadata"]["name"] == "flight-delays-enrich" and secret["metadata"]["name"] == "flight-delays-enrich-config"
    assert sa["metadata"]["labels"]["streamlets.io/streamlet"] == "enrich"
    spec = sa["spec"]
    assert (spec["type"], spec["pythonVersion"], spec["mode"], spec["sparkVersion"]) == ("Python", "3", "cluster", pyspark.__version__)
    assert spec["mainApplicationFile"] == "local:///opt/streamlets/runner.py"
    assert spec["arguments"] == ["--config", "/etc/streamlets/run.json"]
    # the connectors are in the image's $SPARK_HOME/jars: a pod resolves and downloads nothing
    assert not any(key.startswith(("spark.jars", "spark.files")) for key in spec["sparkConf"])
    assert spec["restartPolicy"]["type"] == "OnFailure"
    assert {"name": "checkpoints", "mountPath": "/checkpoints"} in spec["driver"]["volumeMounts"]
    assert {"name": "streamlet-config", "mountPath": "/etc/streamlets", "readOnly": True} in spec["driver"]["volumeMounts"]
    assert {"name": "checkpoints", "mountPath": "/checkpoints"} in spec["executor"]["volumeMounts"]
    assert spec["executor"]["instances"] == 1

    run = StreamletRunConfig.model_validate_json(base64.b64decode(secret["data"]["run.json"]))
    assert run.app_id == "flight-delays" and run.streamlet == "enrich"
    assert run.class_name == "flight_delays.enrich.FlightWeatherJoin"
    assert run.topics == streamlet(built, "enrich")["portTopics"]
    assert run.checkpoint_root == "/checkpoints/flight-delays/enrich"
    assert run.bootstrap_servers == "kafka:9092" and run.dead_letter_topic == "flight-delays.dead-letters"
    assert run.config_parameters == {"watermark-delay": "21600000ms"}

    # an undeclared claim for a volume mount: a folder of the checkpoint claim
    _, flights = out["streamlets"]["flights"]
    assert {"name": "checkpoints", "mountPath": "/mnt/flights", "subPath": "volumes/flights/source"} \
        in flights["spec"]["driver"]["volumeMounts"]
    assert json.loads(base64.b64decode(out["streamlets"]["flights"][0]["data"]["run.json"]))["volume_mounts"] == \
        {"source": "/mnt/flights"}


def test_a_config_change_changes_one_hash_and_scaling_one_field(built):
    before = hashes(built)
    changed = copy.deepcopy(built)
    streamlet(changed, "enrich")["configParameters"]["watermark-delay"] = "1h"
    after = hashes(changed)
    assert {n for n in STREAMLETS if before[n] != after[n]} == {"enrich"}

    scaled = copy.deepcopy(built)
    streamlet(scaled, "stats")["scale"]["executors"] = 4
    assert {n for n, h in hashes(scaled).items() if before[n] != h} == {"stats"}
    old = render.render_all(built, env={})["streamlets"]["stats"][1]["spec"]
    new = render.render_all(scaled, env={})["streamlets"]["stats"][1]["spec"]
    assert new["executor"].pop("instances") == 4 and old["executor"].pop("instances") == 1
    assert new == old
    assert hashes(copy.deepcopy(built)) == before  # deterministic


def test_storage_resources_and_scale_to_zero(built):
    body = copy.deepcopy(built)
    body["spec"]["storage"] = {"existingClaim": "shared"}
    s = streamlet(body, "stats")
    s.update(driver={"cores": "500m", "memory": "2g", "coreLimit": "1"}, executor={"cores": "2", "memoryOverhead": "512m"})
    s["scale"]["executors"] = 0
    s["volumeMounts"] = {}
    out = render.render_all(body, env={})
    assert out["claim"] is None
    spec = out["streamlets"]["stats"][1]["spec"]
    assert spec["volumes"][0] == {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "shared"}}
    assert {k: spec["driver"][k] for k in ("cores", "coreRequest", "coreLimit", "memory")} == \
        {"cores": 1, "coreRequest": "500m", "coreLimit": "1", "memory": "2g"}
    assert (spec["executor"]["cores"], spec["executor"]["memoryOverhead"]) == (2, "512m")
    assert spec["suspend"] is True and spec["executor"]["instances"] == 1

    body["spec"]["storage"] = {"size": "1Gi", "storageClassName": "fast"}
    claim = render.render_claim(body, env={"STREAMLETS_STORAGE_ACCESS_MODE": "ReadWriteMany"})
    assert claim["spec"] == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}},
                             "storageClassName": "fast"}

    mounted = copy.deepcopy(built)
    streamlet(mounted, "flights")["volumeMounts"] = {"source": "flight-files"}
    spec = render.render_all(mounted, env={})["streamlets"]["flights"][1]["spec"]
    assert {"name": "mount-0", "persistentVolumeClaim": {"claimName": "flight-files", "readOnly": True}} in spec["volumes"]
    assert {"name": "mount-0", "mountPath": "/mnt/flights", "readOnly": True} in spec["executor"]["volumeMounts"]


@pytest.mark.parametrize("change, message", [
    (lambda s: s["streamlets"][2]["descriptor"]["inlets"][0].update(schema="{nope"), "is not JSON"),
    (lambda s: s["streamlets"][3]["portTopics"].update({"in": "elsewhere"}), "which spec.topics does not list"),
    (lambda s: s["streamlets"][3]["portTopics"].update({"side": "flight-delays.delay-stats"}), "does not declare"),
    (lambda s: s["streamlets"].append(copy.deepcopy(s["streamlets"][0])), "is used twice"),
    (lambda s: s["streamlets"][2]["configParameters"].update({"speed": "1"}), "config parameter 'speed'"),
    (lambda s: s["streamlets"][0].update(volumeMounts={"target": "x"}), "volume mount 'target'"),
    (lambda s: s["streamlets"][2].update(writerSchemas={"flights": "[oops"}), "writer schema"),
])
def test_invalid_specs(built, change, message):
    body = copy.deepcopy(built)
    change(body["spec"])
    problems = render.validate(body["spec"])
    assert any(message in p for p in problems), problems
    with pytest.raises(render.SpecError):
        render.render_all(body, env={})


def test_valid_spec_has_no_problems(built):
    assert render.validate(built["spec"]) == []


def test_desired_topics(built):
    spec = copy.deepcopy(built["spec"])
    spec["kafka"]["topicDefaults"] = {"partitions": 6, "replicationFactor": 2}
    spec["topics"][0].pop("partitions")
    spec["topics"][1]["managed"] = False
    wanted = {t.name: t for t in topics.desired_topics(spec)}
    assert wanted["flight-delays.flight-events"].partitions == 6
    assert wanted["flight-delays.flight-events"].replication == 2
    assert wanted["flight-delays.weather-observations"].managed is False
    assert wanted["flight-delays.delay-stats"].config == {"cleanup.policy": "compact"}
    dead = wanted["flight-delays.dead-letters"]
    assert (dead.managed, dead.partitions, dead.replication) == (True, 6, 2)


def test_unreachable_kafka_is_a_topic_error():
    with pytest.raises(topics.TopicError, match="cannot list topics"):
        topics.ensure_topics("127.0.0.1:1", [topics.Topic("t", "t", 1, 1)], timeout=1)


def test_status(built):
    body = copy.deepcopy(built)
    apps = {n: None for n in STREAMLETS}
    apps["enrich"] = {"metadata": {"annotations": {render.ANNOTATION_HASH: "abc"}, "creationTimestamp": "2026-01-01T00:00:00Z"}}
    st = status.deployed_status(body, apps, topics=[{"name": "a", "state": "Created"}])
    assert st["phase"] == "Deploying" and st["ready"] == "0/5" and st["streamletCount"] == 5
    assert st["streamlets"]["enrich"] == {"sparkApplication": "flight-delays-enrich", "specHash": "abc",
                                          "state": "SUBMITTED", "executors": 0, "restarts": 0,
                                          "lastDeployed": "2026-01-01T00:00:00Z"}
    assert st["streamlets"]["flights"]["state"] == "PENDING"
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds["Deployed"]["status"] == "False" and conds["TopicsReady"]["status"] == "True"
    assert all(c["observedGeneration"] == 1 for c in conds.values())

    # a condition keeps its transition time while its status stays
    body["status"] = {**st, "conditions": [{**c, "lastTransitionTime": "2020-01-01T00:00:00Z"} for c in st["conditions"]],
                      "streamlets": {**st["streamlets"], "gone": {"state": "RUNNING"}}}
    running = {"status": {"applicationState": {"state": "RUNNING"}, "executorState": {"e1": "RUNNING", "e2": "PENDING"}},
               "metadata": {"annotations": {}}}
    st2 = status.deployed_status(body, {n: running for n in STREAMLETS})
    conds2 = {c["type"]: c for c in st2["conditions"]}
    assert st2["phase"] == "Running" and st2["ready"] == "5/5" and st2["streamlets"]["enrich"]["executors"] == 1
    assert conds2["Valid"]["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    assert conds2["Ready"]["lastTransitionTime"] != "2020-01-01T00:00:00Z"
    assert conds2["TopicsReady"]["lastTransitionTime"] == "2020-01-01T00:00:00Z"  # kept as it was
    assert st2["streamlets"]["gone"] is None  # removed by the merge patch

    assert status.phase_of(["RUNNING", "FAILED"]) == "Degraded"
    failed = status.failed_status(body, "InvalidSpec", "bad")
    assert failed["phase"] == "Failed"
    assert {c["type"]: c["status"] for c in failed["conditions"]}["Valid"] == "False"


def run_config_of(body, name):
    secret, _ = render.render_all(body, env={})["streamlets"][name]
    return StreamletRunConfig.model_validate_json(base64.b64decode(secret["data"]["run.json"]))


def test_savepoint_settings_restore_and_upgrade_modes(built):
    body = copy.deepcopy(built)
    cfg = run_config_of(body, "stats")
    assert (cfg.savepoint_root, cfg.state_dump_root) == ("/checkpoints/savepoints", "/checkpoints/dumps")
    assert cfg.restore_from is None and cfg.reset_state_token is None  # last-state: the checkpoints carry on

    body["spec"]["savepoints"] = {"directory": "s3a://bucket/sp", "maxCount": 3, "maxAgeSeconds": 86400}
    streamlet(body, "stats")["restoreFrom"] = "s3a://bucket/sp/flight-delays/stats/sp-1"
    before = hashes(body)
    cfg = run_config_of(body, "stats")
    assert (cfg.savepoint_root, cfg.savepoint_max_count, cfg.savepoint_max_age_seconds) == ("s3a://bucket/sp", 3, 86400)
    assert cfg.restore_from == "s3a://bucket/sp/flight-delays/stats/sp-1"
    assert run_config_of(body, "files").restore_from is None

    # stateless: a token of what runs; a config change changes it, scaling does not
    body["spec"]["upgradeMode"] = "stateless"
    token = run_config_of(body, "stats").reset_state_token
    assert token and token != run_config_of(body, "files").reset_state_token
    streamlet(body, "stats")["scale"] = {"executors": 4}
    assert run_config_of(body, "stats").reset_state_token == token
    streamlet(body, "stats")["configParameters"] = {"watermark-delay": "2 hours"}
    assert run_config_of(body, "stats").reset_state_token != token
    assert hashes(body)["stats"] != before["stats"]


def test_state_partitions_reach_the_driver_and_a_fresh_query(built):
    body = copy.deepcopy(built)
    assert run_config_of(body, "stats").state_partitions is None
    streamlet(body, "stats")["statePartitions"] = 8
    assert run_config_of(body, "stats").state_partitions == 8
    apps = render.render_all(body, env={})["streamlets"]
    spark_conf = apps["stats"][1]["spec"]["sparkConf"]
    assert spark_conf["spark.sql.shuffle.partitions"] == "8"  # a first batch pins the same number
    assert "spark.sql.shuffle.partitions" not in apps["files"][1]["spec"]["sparkConf"]
    streamlet(body, "stats")["sparkConf"] = {"spark.sql.shuffle.partitions": "5"}  # statePartitions wins: they agree
    assert render.render_all(body, env={})["streamlets"]["stats"][1]["spec"]["sparkConf"]["spark.sql.shuffle.partitions"] == "8"
    # rescaling is not a new application: upgrade mode stateless keeps the state
    body["spec"]["upgradeMode"] = "stateless"
    token = run_config_of(body, "stats").reset_state_token
    streamlet(body, "stats")["statePartitions"] = 2
    assert run_config_of(body, "stats").reset_state_token == token


def test_control_topics_are_wanted_and_bindable(built):
    spec = copy.deepcopy(built["spec"])
    wanted = {t.name: t for t in topics.desired_topics(spec)}
    for name in ("flight-delays.control", "flight-delays.control-results"):
        assert wanted[name].managed and wanted[name].partitions == 1
    streamlet({"spec": spec}, "stats")["portTopics"]["control"] = "flight-delays.control"
    assert not [p for p in render.validate(spec) if "which spec.topics does not list" in p]


def test_command_requests_and_savepoint_entries():
    from streamlets_operator import commands

    req = commands.parse_request('{"command": "dump-state", "target": "stats", "args": {"format": "csv"}}')
    assert (req["command"], req["target"], req["args"]) == ("dump-state", "stats", {"format": "csv"}) and req["id"]
    assert req["timeout"] == commands.TIMEOUT  # the operator's own when the request names none
    assert commands.parse_request('{"command": "savepoint", "timeout": 10}')["timeout"] == 10.0
    for bad, words in (("{nope", "not JSON"), ('{"command": "explode"}', "one of"), ('{"command": "ping", "args": [1]}', "args"),
                       *((f'{{"command": "ping", "timeout": {t}}}', "timeout must be a number of seconds")
                         for t in ('"10"', "0", "-5", "3601", "true", "null"))):
        with pytest.raises(commands.RequestError, match=words):
            commands.parse_request(bad)
    entries = [{"id": "c1", "command": "savepoint", "streamlet": "stats", "status": "ok", "location": "/checkpoints/savepoints/a/stats/sp-1",
                "batchIds": {"out": 7}, "time": "t"},
               {"id": "c1", "command": "savepoint", "streamlet": "files", "status": "no-answer", "time": "t"}]
    (sp,) = commands.savepoint_entries(entries, "periodic")
    assert (sp["name"], sp["batchIds"], sp["reason"], sp["commandId"]) == ("sp-1", {"out": 7}, "periodic", "c1")
    assert len(commands.appended({"savepoints": [{}] * 60}, "savepoints", [sp])) == commands.KEEP


def test_driver_and_executors_bound_avro_allocations(built, monkeypatch):
    """Both JVMs get Avro's limits as javaOptions; the user's own JVM options in sparkConf are
    kept (the Spark Operator's javaOptions would replace them); STREAMLETS_MAX_VALUE_BYTES moves
    the ceiling."""
    from streamlets import avro_limits

    monkeypatch.delenv(avro_limits.ENV, raising=False)
    body = copy.deepcopy(built)
    spec = render.render_all(body, env={})["streamlets"]["enrich"][1]["spec"]
    for pod in ("driver", "executor"):
        options = spec[pod]["javaOptions"].split()
        assert options == [f"-D{p}=1048588" for p in avro_limits.PROPERTIES]
    streamlet(body, "enrich")["sparkConf"] = {"spark.executor.extraJavaOptions": "-XX:+UseG1GC"}
    monkeypatch.setenv(avro_limits.ENV, "4194304")
    spec = render.render_all(body, env={})["streamlets"]["enrich"][1]["spec"]
    assert spec["executor"]["javaOptions"].endswith(" -XX:+UseG1GC")
    assert spec["sparkConf"]["spark.executor.extraJavaOptions"] == spec["executor"]["javaOptions"]
    assert "-Dorg.apache.avro.limits.string.maxLength=4194304" in spec["executor"]["javaOptions"].split()
    assert "-XX:+UseG1GC" not in spec["driver"]["javaOptions"]


# --- metrics ------------------------------------------------------------------------------------

def test_driver_pods_expose_our_metrics_and_sparks(built):
    """Every SparkApplication turns on Spark's PrometheusServlet (driver UI port) and declares the
    driver's /metrics endpoint: the prometheus.io annotations and a named container port, from
    the one place the driver takes its default port from (streamlets.runtime.runconfig)."""
    from streamlets.runtime import runconfig

    for name, (_, sa) in render.render_all(built, env={})["streamlets"].items():
        spec = sa["spec"]
        conf = spec["sparkConf"]
        assert conf["spark.ui.enabled"] == "true" and conf["spark.ui.prometheus.enabled"] == "true", name
        assert conf["spark.metrics.conf.*.sink.prometheusServlet.class"] == "org.apache.spark.metrics.sink.PrometheusServlet"
        assert conf["spark.metrics.conf.*.sink.prometheusServlet.path"] == "/metrics/prometheus"
        assert conf["spark.metrics.conf.master.sink.prometheusServlet.path"] == "/metrics/master/prometheus"
        assert conf["spark.metrics.conf.applications.sink.prometheusServlet.path"] == "/metrics/applications/prometheus"
        assert spec["driver"]["annotations"] == {"prometheus.io/scrape": "true", "prometheus.io/port": "9464",
                                                 "prometheus.io/path": "/metrics"}
        assert spec["driver"]["ports"] == [{"name": "metrics", "containerPort": 9464, "protocol": "TCP"}]
        # Spark names the UI's container port `spark-ui` itself: a second one would make the pod invalid
        assert render.SPARK_UI_PORT_NAME not in {p["name"] for p in spec["driver"]["ports"]}
        assert "annotations" not in spec["executor"] and "ports" not in spec["executor"]
    assert runconfig.metrics_port({}) == runconfig.METRICS_PORT == 9464
    assert runconfig.scrape_annotations()["prometheus.io/port"] == str(runconfig.metrics_port({}))


def test_the_streamlets_own_settings_win_over_the_metrics_defaults(built):
    body = copy.deepcopy(built)
    enrich = streamlet(body, "enrich")
    enrich["annotations"] = {"prometheus.io/scrape": "false", "team": "flights"}
    enrich["sparkConf"] = {"spark.ui.prometheus.enabled": "false"}
    spec = render.render_all(body, env={})["streamlets"]["enrich"][1]["spec"]
    assert spec["driver"]["annotations"] == {"prometheus.io/scrape": "false", "prometheus.io/port": "9464",
                                             "prometheus.io/path": "/metrics", "team": "flights"}
    assert spec["executor"]["annotations"] == {"prometheus.io/scrape": "false", "team": "flights"}
    assert spec["sparkConf"]["spark.ui.prometheus.enabled"] == "false"
    assert spec["sparkConf"]["spark.ui.enabled"] == "true"


def test_spark_applications_match_the_spark_operator_crd(built, kube_env):
    """Every rendered SparkApplication against the Spark Operator v2.5.1 CRD's schema, objects
    closed (a field the CRD does not declare would be pruned by the API server)."""
    import jsonschema

    from support.crd_schema import to_json_schema

    assert kube_env["spark_operator_version"] == "v2.5.1"
    crd_doc = yaml.safe_load(Path(kube_env["spark_application_crd"]).read_text())
    (version,) = [v for v in crd_doc["spec"]["versions"] if v["name"] == render.SPARK_VERSION]
    validator = jsonschema.Draft7Validator(to_json_schema(version["schema"]["openAPIV3Schema"]))
    body = copy.deepcopy(built)
    streamlet(body, "stats")["annotations"] = {"team": "flights"}
    for name, (_, sa) in render.render_all(body, env={})["streamlets"].items():
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(sa)]
        assert errors == [], name
    bad = copy.deepcopy(sa)
    bad["spec"]["driver"]["ports"] = [{"name": "metrics", "containerPort": 9464}]  # protocol is required
    assert list(validator.iter_errors(bad))


def test_driver_service_account(built):
    """The chart's Spark ServiceAccount ($STREAMLETS_SPARK_SERVICE_ACCOUNT) unless the application
    names its own; none at all leaves Spark's default (the namespace's `default` account)."""
    def driver_account(body, env):
        return {n: sa["spec"]["driver"].get("serviceAccount")
                for n, (_, sa) in render.render_all(body, env=env)["streamlets"].items()}
    assert set(driver_account(built, {}).values()) == {None}
    assert set(driver_account(built, {"STREAMLETS_SPARK_SERVICE_ACCOUNT": "ops-spark"}).values()) == {"ops-spark"}
    own = copy.deepcopy(built)
    own["spec"]["serviceAccountName"] = "team-spark"
    assert set(driver_account(own, {"STREAMLETS_SPARK_SERVICE_ACCOUNT": "ops-spark"}).values()) == {"team-spark"}


def test_status_of_a_crash_looping_streamlet_is_never_running(built):
    """`enrich` fails again and again (restartPolicy OnFailure): through every state its
    SparkApplication passes in a crash loop, its RUNNING spells right after a restart included,
    the application is never Running or Ready; once it has run SETTLE_SECONDS since its last
    restart it is running again."""
    import datetime as dt

    at = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.timezone.utc)

    def sa(state: str, attempts: int = 1, submitted_ago: float | None = None) -> dict:
        st: dict = {"applicationState": {"state": state}, "submissionAttempts": attempts}
        if submitted_ago is not None:
            st["lastSubmissionAttemptTime"] = (at - dt.timedelta(seconds=submitted_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"status": st, "metadata": {"annotations": {}}}

    healthy = sa("RUNNING", 1, submitted_ago=3600)
    loop = [sa("FAILING", 2, 40), sa("PENDING_RERUN", 2, 50), sa("SUBMITTED", 3, 1), sa("RUNNING", 3, 5),
            sa("RUNNING", 3, status.SETTLE_SECONDS - 1), sa("FAILING", 3, status.SETTLE_SECONDS + 5)]
    for enrich in loop:
        st = status.deployed_status(copy.deepcopy(built), {n: healthy for n in STREAMLETS} | {"enrich": enrich}, at=at)
        ready = {c["type"]: c for c in st["conditions"]}["Ready"]
        assert st["phase"] != "Running" and st["streamlets"]["enrich"]["state"] != "RUNNING", (enrich, st)
        assert ready["status"] == "False" and st["ready"] == "4/5", ready
    restarting = status.deployed_status(copy.deepcopy(built), {n: healthy for n in STREAMLETS} | {"enrich": sa("PENDING_RERUN", 2)},
                                         at=at)
    ready = {c["type"]: c for c in restarting["conditions"]}["Ready"]
    assert (restarting["phase"], ready["reason"]) == ("Degraded", "StreamletsRestarting") and "restarting: enrich" in ready["message"]
    assert restarting["streamlets"]["enrich"]["state"] == "RESTARTING"

    settled = sa("RUNNING", 3, status.SETTLE_SECONDS + 1)
    assert status.streamlet_status("flight-delays", "enrich", settled, at=at)["state"] == "RUNNING"
    # without a submission time (an operator that does not report it) a restarted RUNNING app counts as running
    assert status.streamlet_status("flight-delays", "enrich", sa("RUNNING", 3), at=at)["state"] == "RUNNING"


def test_a_read_write_once_checkpoint_claim_keeps_the_application_on_one_node(built):
    """A ReadWriteOnce volume is attached to one node: every driver and executor of the
    application (they all mount the checkpoint claim) gets a pod affinity to the node of the
    application's other pods; a ReadWriteMany claim lets them run anywhere."""
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"streamlets.io/app": "flight-delays"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    for name, (_, sa) in render.render_all(built, env={})["streamlets"].items():  # the default: ReadWriteOnce
        assert sa["spec"]["driver"]["affinity"] == affinity, name
        assert sa["spec"]["executor"]["affinity"] == affinity, name
        assert sa["spec"]["driver"]["labels"]["streamlets.io/app"] == "flight-delays"  # what the term matches
    rwx = copy.deepcopy(built)
    rwx["spec"]["storage"] = {"accessMode": "ReadWriteMany"}
    out = render.render_all(rwx, env={})
    assert out["claim"]["spec"]["accessModes"] == ["ReadWriteMany"]
    for _, sa in out["streamlets"].values():
        assert "affinity" not in sa["spec"]["driver"] and "affinity" not in sa["spec"]["executor"]
    # the chart's default mode counts as well
    for _, sa in render.render_all(built, env={"STREAMLETS_STORAGE_ACCESS_MODE": "ReadWriteMany"})["streamlets"].values():
        assert "affinity" not in sa["spec"]["executor"]
    # an existing claim: its modes as read from the cluster decide (unknown ones: no constraint)
    existing = copy.deepcopy(built)
    existing["spec"]["storage"] = {"existingClaim": "shared"}
    _, sa = render.render_all(existing, env={})["streamlets"]["stats"]
    assert "affinity" not in sa["spec"]["executor"]
    _, sa = render.render_all(existing, env={}, claim_modes=["ReadWriteOnce"])["streamlets"]["stats"]
    assert sa["spec"]["executor"]["affinity"] == affinity
    _, sa = render.render_all(built, env={}, claim_modes=["ReadWriteMany"])["streamlets"]["stats"]
    assert "affinity" not in sa["spec"]["executor"]  # the claim as it is wins over the default


@pytest.mark.parametrize("modes", [["ReadWriteOncePod"], ["ReadOnlyMany"]])
def test_a_checkpoint_claim_that_several_pods_cannot_write_is_refused_with_the_fix(built, modes):
    existing = copy.deepcopy(built)
    existing["spec"]["storage"] = {"existingClaim": "shared"}
    with pytest.raises(render.SpecError) as e:
        render.render_all(existing, env={}, claim_modes=modes)
    message = str(e.value)
    assert "shared" in message and modes[0] in message
    assert "ReadWriteMany" in message and "ReadWriteOnce" in message and "object store" in message


def test_a_read_write_once_volume_mount_keeps_its_streamlet_on_one_node(built):
    body = copy.deepcopy(built)
    body["spec"]["storage"] = {"accessMode": "ReadWriteMany"}
    flights = streamlet(body, "flights")
    flights["descriptor"]["volume_mounts"][0]["access_mode"] = "ReadWriteOnce"
    flights["volumeMounts"] = {"source": "flight-files"}
    apps = render.render_all(body, env={})["streamlets"]
    term, = apps["flights"][1]["spec"]["executor"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["labelSelector"]["matchLabels"]["streamlets.io/streamlet"] == "flights"
    assert apps["flights"][1]["spec"]["driver"]["affinity"] == apps["flights"][1]["spec"]["executor"]["affinity"]
    assert "affinity" not in apps["stats"][1]["spec"]["executor"]  # the others run anywhere


def test_several_executors_of_a_streamlet_are_spread_over_the_nodes_unless_pinned_to_one(built):
    """A streamlet with several executors asks Kubernetes to put them on different nodes (preferred:
    fewer nodes than executors still run them all), its executors only; a ReadWriteOnce claim's
    pinning to one node wins."""
    body = copy.deepcopy(built)
    body["spec"]["storage"] = {"accessMode": "ReadWriteMany"}
    streamlet(body, "enrich")["scale"]["executors"] = 2
    apps = render.render_all(body, env={})["streamlets"]
    spec = apps["enrich"][1]["spec"]
    assert spec["executor"]["instances"] == 2 and "affinity" not in spec["driver"]
    (term,) = spec["executor"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    selector = term["podAffinityTerm"]["labelSelector"]["matchLabels"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname" and term["weight"] == 100
    # the term matches enrich's executor pods (labels Spark and our render put on them), not its driver
    assert selector.pop("spark-role") == "executor"
    assert selector.items() <= spec["executor"]["labels"].items()
    assert selector["streamlets.io/streamlet"] == "enrich"
    assert "affinity" not in apps["stats"][1]["spec"]["executor"]  # one executor: nothing to spread
    pinned = render.render_all(body, env={}, claim_modes=["ReadWriteOnce"])["streamlets"]["enrich"][1]["spec"]
    assert "podAntiAffinity" not in pinned["executor"]["affinity"] and "podAffinity" in pinned["executor"]["affinity"]


def test_an_active_autoscaler_spreads_from_the_start_and_changes_neither_state_nor_pods(built):
    """Executors the autoscaler adds in place come from the same pod template: an active one that
    may run several gets the spread from its first executor. Its settings are not in the run config
    or the stateless token (a change of them resets no state and resubmits nothing else)."""
    body = copy.deepcopy(built)
    body["spec"]["storage"] = {"accessMode": "ReadWriteMany"}
    before = copy.deepcopy(body)
    plain = render.render_all(body, env={})["streamlets"]
    streamlet(body, "enrich")["autoscaling"] = {"mode": "active", "maxExecutors": 3}
    streamlet(body, "stats")["autoscaling"] = {"mode": "active", "maxExecutors": 1}
    streamlet(body, "files")["autoscaling"] = {"mode": "passive"}
    apps = render.render_all(body, env={})["streamlets"]
    assert apps["enrich"][1]["spec"]["executor"]["instances"] == 1
    assert "podAntiAffinity" in apps["enrich"][1]["spec"]["executor"]["affinity"]
    for name in ("stats", "files"):  # at most one executor, or passive: nothing more to place
        assert apps[name][1]["spec"] == plain[name][1]["spec"], name
    for name in ("enrich", "stats", "files"):
        assert apps[name][0]["data"] == plain[name][0]["data"]  # the run config (the Secret)
        assert render.stateless_token(body["spec"], streamlet(body, name)) == \
            render.stateless_token(before["spec"], streamlet(before, name))
    streamlet(body, "enrich")["autoscaling"]["maxExecutors"] = 0
    assert any("autoscaling.max-executors" in p or "maxExecutors" in p for p in render.validate(body["spec"]))


# --- the state on an object store (spec.storage.checkpoints) ------------------------------------

S3_ROOT = "s3a://streamlets/prod"
ON_S3 = {"checkpoints": S3_ROOT, "s3a": {"endpoint": "http://minio.storage:9000", "pathStyleAccess": True},
         "secretRef": {"name": "s3-credentials"}}
MOUNT_CLAIMS = {"flights": {"source": "flight-files"}, "weather": {"source": "weather-files"},
                "files": {"output": "stats-files"}}


def on_object_store(built, storage=ON_S3):
    body = copy.deepcopy(built)
    body["spec"]["storage"] = copy.deepcopy(storage)
    for name, mounts in MOUNT_CLAIMS.items():  # no checkpoint claim to hold the volume mounts' folders
        streamlet(body, name)["volumeMounts"] = dict(mounts)
    return body


def test_state_on_an_object_store_has_no_claim_and_s3a_roots(built):
    body = on_object_store(built)
    out = render.render_all(body, env={"STREAMLETS_STORAGE_ACCESS_MODE": "ReadWriteOnce"})
    assert out["claim"] is None
    secret, sa = out["streamlets"]["stats"]
    cfg = StreamletRunConfig.model_validate_json(base64.b64decode(secret["data"]["run.json"]))
    assert cfg.checkpoint_root == f"{S3_ROOT}/checkpoints/flight-delays/stats"
    assert (cfg.savepoint_root, cfg.state_dump_root) == (f"{S3_ROOT}/savepoints", f"{S3_ROOT}/dumps")
    spec = sa["spec"]
    assert all(v.get("persistentVolumeClaim", {}).get("claimName") != "flight-delays-checkpoints" for v in spec["volumes"])
    for pod in ("driver", "executor"):
        assert not any(m["mountPath"] == "/checkpoints" for m in spec[pod]["volumeMounts"])
        assert "affinity" not in spec[pod]  # no ReadWriteOnce claim: the pods go to any node
        # the credentials by secretKeyRef: the resource names the Secret, never a key's value
        assert spec[pod]["env"] == [
            {"name": "AWS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {"name": "s3-credentials", "key": "AWS_ACCESS_KEY_ID"}}},
            {"name": "AWS_SECRET_ACCESS_KEY",
             "valueFrom": {"secretKeyRef": {"name": "s3-credentials", "key": "AWS_SECRET_ACCESS_KEY"}}}]
    conf = spec["sparkConf"]
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://minio.storage:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith("EnvironmentVariableCredentialsProvider")
    # the files egress's own claim is mounted where its descriptor says
    files = out["streamlets"]["files"][1]["spec"]
    claims = {v["persistentVolumeClaim"]["claimName"] for v in files["volumes"] if "persistentVolumeClaim" in v}
    assert claims == {"stats-files"}


def test_the_streamlets_own_spark_settings_win_over_the_stores(built):
    body = on_object_store(built)
    streamlet(body, "stats")["sparkConf"] = {"spark.hadoop.fs.s3a.connection.maximum": "200",
                                             "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1"}
    conf = render.render_all(body, env={})["streamlets"]["stats"][1]["spec"]["sparkConf"]
    assert (conf["spark.hadoop.fs.s3a.connection.maximum"], conf["spark.hadoop.fs.s3a.endpoint.region"]) == ("200", "eu-west-1")


@pytest.mark.parametrize("change, words", [
    (lambda st, b: st.pop("secretRef"), ["secretRef.name", "AWS_ACCESS_KEY_ID"]),
    (lambda st, b: st.update(size="5Gi"), ["size", "checkpoint claim", "one or the other"]),
    (lambda st, b: streamlet(b, "files").pop("volumeMounts"), ["'files'", "'output'", "no claim of its own",
                                                               "streamlets.files.volume-mounts.output"]),
])
def test_an_object_store_spec_that_cannot_work_is_refused_with_the_fix(built, change, words):
    body = on_object_store(built)
    change(body["spec"]["storage"], body)
    with pytest.raises(render.SpecError) as e:
        render.render_all(body, env={})
    for w in words:
        assert w in str(e.value)


def test_an_s3a_uri_that_is_not_one_is_refused_by_the_schema(built):
    body = on_object_store(built, {**ON_S3, "checkpoints": "s3://streamlets/prod"})
    assert any("spec.storage.checkpoints" in p for p in render.validate(body["spec"], env={}))


def test_the_operators_object_store_default_applies_to_a_spec_without_storage(built):
    env = {"STREAMLETS_STORAGE_CHECKPOINTS": S3_ROOT, "STREAMLETS_STORAGE_S3A_ENDPOINT": "https://s3.internal",
           "STREAMLETS_STORAGE_S3A_PATH_STYLE": "true", "STREAMLETS_STORAGE_S3A_REGION": "eu-central-1",
           "STREAMLETS_STORAGE_SECRET": "state-store"}
    body = on_object_store(built, {})
    body["spec"].pop("storage")
    out = render.render_all(body, env=env)
    assert out["claim"] is None
    secret, sa = out["streamlets"]["enrich"]
    assert json.loads(base64.b64decode(secret["data"]["run.json"]))["checkpoint_root"] == \
        f"{S3_ROOT}/checkpoints/flight-delays/enrich"
    conf = sa["spec"]["sparkConf"]
    assert (conf["spark.hadoop.fs.s3a.endpoint"], conf["spark.hadoop.fs.s3a.endpoint.region"],
            conf["spark.hadoop.fs.s3a.connection.ssl.enabled"]) == ("https://s3.internal", "eu-central-1", "true")
    assert sa["spec"]["driver"]["env"][1]["valueFrom"]["secretKeyRef"]["name"] == "state-store"
    # a spec that asks for a claim keeps one; the default's Secret missing is refused
    claimed = copy.deepcopy(body)
    claimed["spec"]["storage"] = {"accessMode": "ReadWriteMany"}
    assert render.render_all(claimed, env=env)["claim"]["spec"]["accessModes"] == ["ReadWriteMany"]
    with pytest.raises(render.SpecError, match="secretRef"):
        render.render_all(body, env={k: v for k, v in env.items() if k != "STREAMLETS_STORAGE_SECRET"})


# --- Kafka security (spec.kafka.security) -------------------------------------------------------

MTLS = {"protocol": "SSL", "ca": {"name": "cluster-ca", "key": "ca.crt"}, "certificate": {"name": "app-user", "key": "user.crt"},
        "key": {"name": "app-user", "key": "user.key"}}


def test_kafka_secrets_are_mounted_files_the_run_config_names(built):
    body = copy.deepcopy(built)
    body["spec"]["kafka"]["security"] = MTLS
    secret, sa = render.render_all(body, env={})["streamlets"]["stats"]
    cfg = StreamletRunConfig.model_validate_json(base64.b64decode(secret["data"]["run.json"]))
    assert (cfg.kafka_security.protocol, cfg.kafka_security.ca_file, cfg.kafka_security.cert_file,
            cfg.kafka_security.key_file) == ("SSL", "/etc/streamlets/secrets/cluster-ca/ca.crt",
                                             "/etc/streamlets/secrets/app-user/user.crt", "/etc/streamlets/secrets/app-user/user.key")
    assert cfg.kafka_security.verify_hostname is True
    spec = sa["spec"]
    secret_volumes = {v["secret"]["secretName"]: v for v in spec["volumes"] if "secret" in v and
                      v["secret"]["secretName"] in ("cluster-ca", "app-user")}
    assert secret_volumes["app-user"]["secret"]["items"] == [{"key": "user.crt", "path": "user.crt"},
                                                            {"key": "user.key", "path": "user.key"}]
    for pod in ("driver", "executor"):  # Spark's Kafka source and sink read them in both JVMs
        paths = {m["mountPath"]: m["name"] for m in spec[pod]["volumeMounts"]}
        for name, volume in secret_volumes.items():
            assert paths[f"/etc/streamlets/secrets/{name}"] == volume["name"]


def test_the_charts_kafka_security_applies_to_a_spec_without_one(built):
    default = {"protocol": "SASL_SSL", "saslMechanism": "SCRAM-SHA-512", "username": "streamlets",
               "password": {"name": "kafka-user", "key": "password"}}
    secret, _ = render.render_all(copy.deepcopy(built), env={"STREAMLETS_KAFKA_SECURITY": json.dumps(default)})["streamlets"]["flights"]
    cfg = StreamletRunConfig.model_validate_json(base64.b64decode(secret["data"]["run.json"]))
    assert (cfg.kafka_security.sasl_mechanism, cfg.kafka_security.password_file) == (
        "SCRAM-SHA-512", "/etc/streamlets/secrets/kafka-user/password")
    own = copy.deepcopy(built)
    own["spec"]["kafka"]["security"] = {"protocol": "PLAINTEXT"}  # the spec's own wins
    secret, _ = render.render_all(own, env={"STREAMLETS_KAFKA_SECURITY": json.dumps(default)})["streamlets"]["flights"]
    assert StreamletRunConfig.model_validate_json(base64.b64decode(secret["data"]["run.json"])).kafka_security.protocol == "PLAINTEXT"


@pytest.mark.parametrize("security, words", [
    ({"protocol": "SASL_SSL", "saslMechanism": "PLAIN", "username": "u"}, ["SASL_SSL needs", "password"]),
    ({"protocol": "SSL", "certificate": {"name": "u", "key": "user.crt"}}, ["cert-file and key-file go together"]),
    ({"protocol": "PLAINTEXT", "ca": {"name": "c", "key": "ca.crt"}}, ["ca-file", "SSL or SASL_SSL"]),
])
def test_an_inconsistent_kafka_security_is_refused(built, security, words):
    body = copy.deepcopy(built)
    body["spec"]["kafka"]["security"] = security
    problems = " ".join(render.validate(body["spec"], env={}))
    for w in words:
        assert w in problems and "spec.kafka.security" in problems, problems
