"""`blueprint run` refuses bad input with one clear message before starting anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

NUMBERS = Path(__file__).resolve().parents[1] / "integration" / "apps" / "numbers"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "blueprint.cli", "run", *args], capture_output=True, text=True, timeout=120)


def test_missing_blueprint_is_a_usage_error(tmp_path):
    result = run(str(tmp_path / "nope.yaml"))
    assert result.returncode == 2
    assert "nope.yaml" in result.stderr and "Traceback" not in result.stderr


def test_unsound_blueprint_starts_nothing(tmp_path):
    bp = tmp_path / "blueprint.yaml"
    bp.write_text((NUMBERS / "blueprint.yaml").read_text().replace("consumers: [files.in]", "consumers: []"))
    (tmp_path / "numbers_app.py").write_text((NUMBERS / "numbers_app.py").read_text())
    result = run(str(bp), "--state-dir", str(tmp_path / "state"))
    assert result.returncode == 1
    assert "files.in" in result.stdout and "nothing was started" in result.stderr
    assert not (tmp_path / "state").exists()


def test_unknown_streamlet_in_override_names_it(tmp_path):
    result = run(str(NUMBERS / "blueprint.yaml"), "--state-dir", str(tmp_path / "state"),
                 "streamlets.nosuch.config-parameters.factor=2")
    assert result.returncode == 1
    assert "nosuch" in result.stderr and "Traceback" not in result.stderr


def test_missing_config_file_is_a_usage_error(tmp_path):
    result = run(str(NUMBERS / "blueprint.yaml"), "--config", str(tmp_path / "missing.conf"))
    assert result.returncode == 2 and "missing.conf" in result.stderr


def test_malformed_restore_and_state_partitions_are_one_usage_line(tmp_path):
    for option, value in (("--restore", "stats"), ("--state-partitions", "stats"), ("--state-partitions", "stats=0")):
        result = run(str(NUMBERS / "blueprint.yaml"), "--state-dir", str(tmp_path / "state"), option, value)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"error: {option} {value!r}: expected STREAMLET=")
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_state_partitions_for_an_unknown_streamlet_starts_nothing(tmp_path):
    result = run(str(NUMBERS / "blueprint.yaml"), "--state-dir", str(tmp_path / "state"), "--state-partitions", "nope=3")
    assert result.returncode == 1
    assert result.stderr.strip() == "error: --state-partitions names no streamlet of the blueprint: nope"
    assert not (tmp_path / "state").exists()


def test_run_checks_its_config_as_verify_does_before_anything_starts(tmp_path):
    """A list as a volume-mount folder or as a Spark setting: `blueprint verify --config` and
    `blueprint run --config` refuse the same file with the same problems, and the run creates
    nothing (no state folder, no folder named "['a', 'b']")."""
    import json

    conf = tmp_path / "run.conf"
    conf.write_text("streamlets {\n  ingress.volume-mounts.source = [a, b]\n"
                    "  multiply.spark { spark.sql.shuffle.partitions = [1, 2] }\n}\n")
    verify = subprocess.run([sys.executable, "-m", "blueprint.cli", "verify", str(NUMBERS / "blueprint.yaml"),
                             "--config", str(conf), "--format", "json"], capture_output=True, text=True, timeout=120)
    assert verify.returncode == 1
    expected = {(p["code"], p["line"], p["column"]) for p in json.loads(verify.stdout)["problems"]}
    assert expected == {("invalid-config-value", 2, 25), ("invalid-config-value", 3, 38)}

    result = run(str(NUMBERS / "blueprint.yaml"), "--config", str(conf), "--state-dir", str(tmp_path / "state"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: {conf}:2:25: streamlets.ingress.volume-mounts.source: a volume mount is set to a folder or a claim "
        "name (text) (and 1 more above); nothing was started"]
    assert "streamlets.multiply.spark.spark.sql.shuffle.partitions: [1, 2] is not a Spark setting's value" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.conf"]


def test_a_list_as_a_spark_override_is_refused_too(tmp_path):
    result = run(str(NUMBERS / "blueprint.yaml"), "--state-dir", str(tmp_path / "state"),
                 "streamlets.multiply.config-parameters.factor=two")
    assert result.returncode == 1
    assert result.stderr.startswith("error: command line: streamlets.multiply.config-parameters.factor: ")
    assert not (tmp_path / "state").exists()


def test_a_read_only_mount_whose_folder_does_not_exist_starts_nothing(tmp_path):
    """A ReadOnlyMany mount is the streamlet's input: a missing folder is an error before Kafka or
    Spark starts (not a folder created for it and a green run that read nothing)."""
    state = tmp_path / "state"
    result = run(str(NUMBERS / "blueprint.yaml"), "--state-dir", str(state))
    assert result.returncode == 1, result.stdout + result.stderr
    folder = state / "volumes" / "ingress" / "source"
    assert result.stderr.strip().splitlines() == [
        f"error: streamlet 'ingress': volume mount 'source' (ReadOnlyMany: its input) maps to {folder}, which does not "
        f"exist; map it to the folder holding the input in the run config (streamlets.ingress.volume-mounts.source = "
        f"<folder>, relative to the config file) or create {folder}"]
    assert not folder.exists() and not (state / "kafka").exists()
    assert "Traceback" not in result.stdout


def test_empty_read_only_mounts_are_named_for_a_warning(tmp_path):
    """`empty_inputs`: a ReadOnlyMany folder with no file Spark reads (hidden `.x` and `_x` names are
    skipped by Spark's file sources) is named; one with a file, and writable mounts, are not."""
    from blueprint.loader import import_streamlets, load_blueprint
    from blueprint.sandbox.localconfig import StreamletSettings
    from blueprint.sandbox.run import empty_inputs, run_config_for

    bp = load_blueprint(NUMBERS / "blueprint.yaml")
    classes = import_streamlets(bp)
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / ".n000.tmp").write_text("{}\n")
    (src / "sub" / "_SUCCESS").write_text("")
    settings = {n: StreamletSettings() for n in bp.streamlets}
    settings["ingress"].volume_mounts["source"] = str(src)
    runs = [run_config_for(bp, n, classes, settings[n], bootstrap="", state_dir=tmp_path / "state", trigger=None)
            for n in bp.streamlets]
    assert empty_inputs(runs, classes) == [
        f"streamlet 'ingress': volume mount 'source' ({src}) is empty: it reads nothing until files arrive there"]
    (src / "sub" / "n001.json").write_text("{}\n")
    assert empty_inputs(runs, classes) == []


def test_kafka_security_settings_are_checked_before_anything_starts(tmp_path):
    """kafka.security.* describes an external broker (--kafka), --broker-security the embedded
    one; an inconsistent combination is a config problem, as verify reports it."""
    bp = str(NUMBERS / "blueprint.yaml")
    result = run(bp, "--state-dir", str(tmp_path / "state"), "kafka.security.protocol=SSL")
    assert result.returncode == 1 and "kafka.security.* says how to reach an external broker" in result.stderr
    result = run(bp, "--state-dir", str(tmp_path / "state"), "--kafka", "127.0.0.1:1", "--broker-security", "mtls")
    assert result.returncode == 1 and "the embedded broker's, and --kafka names an external one" in result.stderr
    result = run(bp, "--state-dir", str(tmp_path / "state"), "--kafka", "127.0.0.1:1", "kafka.security.username=u")
    assert result.returncode == 1 and "need protocol SASL_SSL or SASL_PLAINTEXT" in result.stderr
    assert "nothing was started" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "state" / "checkpoints").exists() and not (tmp_path / "state" / "kafka").exists()
