"""blueprint.sandbox.localconfig.load_settings: the sandbox's run config file (HOCON/YAML) and overrides."""

import textwrap
from pathlib import Path

import pytest

from blueprint.configcheck import key_value
from blueprint.sandbox.localconfig import LocalConfigError, load_settings

NAMES = ["stats", "ingress"]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def test_hocon(tmp_path):
    path = write(tmp_path, "conf/local.conf", """
        # Cloudflow-style run config
        streamlets {
          stats.config-parameters.watermark-delay = "2 hours"
          stats.config-parameters { factor = 3, enabled = true, "dotted.key" = x }
          ingress.volume-mounts.source = "data/flights"
          stats.spark { spark.sql.shuffle.partitions = 2, spark.sql.ansi.enabled = false }
        }
    """)
    s = load_settings(path, [], NAMES)
    assert s["stats"].config_parameters == {"watermark-delay": "2 hours", "factor": 3, "enabled": True, "dotted.key": "x"}
    assert s["stats"].spark == {"spark.sql.shuffle.partitions": "2", "spark.sql.ansi.enabled": "false"}
    # relative mount folders resolve against the config file's folder, not the current folder
    assert s["ingress"].volume_mounts == {"source": str((tmp_path / "conf" / "data" / "flights").resolve())}
    assert s["ingress"].config_parameters == {} and s["ingress"].spark == {}


def test_yaml(tmp_path):
    path = write(tmp_path, "local.yaml", """
        streamlets:
          stats:
            config-parameters:
              watermark-delay: 2 hours
              factor: 3
            spark:
              spark.sql.shuffle.partitions: 2
              spark.sql.ansi.enabled: true
          ingress:
            volume-mounts:
              source: /abs/data
    """)
    s = load_settings(path, [], NAMES)
    assert s["stats"].config_parameters == {"watermark-delay": "2 hours", "factor": 3}
    assert s["stats"].spark == {"spark.sql.shuffle.partitions": "2", "spark.sql.ansi.enabled": "true"}
    assert s["ingress"].volume_mounts == {"source": "/abs/data"}


def test_overrides_win(tmp_path, monkeypatch):
    path = write(tmp_path, "local.conf", """
        streamlets.stats.config-parameters { watermark-delay = "2 hours", factor = 3 }
        streamlets.ingress.volume-mounts.source = data
    """)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    s = load_settings(path, ["streamlets.stats.config-parameters.factor = 9",
                             "streamlets.ingress.volume-mounts.source=other",
                             "streamlets.stats.spark.spark.sql.shuffle.partitions=1"], NAMES)
    assert s["stats"].config_parameters == {"watermark-delay": "2 hours", "factor": "9"}
    # an override's relative folder resolves against the current folder
    assert s["ingress"].volume_mounts == {"source": str((elsewhere / "other").resolve())}
    assert s["stats"].spark == {"spark.sql.shuffle.partitions": "1"}


def test_no_file_only_overrides():
    s = load_settings(None, ["streamlets.stats.config-parameters.x=a=b"], NAMES)
    assert s["stats"].config_parameters == {"x": "a=b"}  # only the first '=' separates
    assert set(s) == set(NAMES)


@pytest.mark.parametrize("name, text, words", [
    ("a.conf", "streamlets.nope.config-parameters.x = 1", "no streamlet 'nope' (it has ingress, stats)"),
    ("a.yaml", "streamlets:\n  nope:\n    spark: {x: 1}\n", "no streamlet 'nope'"),
    ("a.conf", "streamlets.stats.settings.x = 1", "unknown section 'settings'; use one of config-parameters, volume-mounts, spark"),
    ("a.conf", "streamlets.stats.config-parameters = 5", "is not of the form streamlets.<name>.<section>.<key>"),
    ("a.conf", "streamlets.stats = 5", "is not of the form"),
    ("a.conf", "runtime.x = 1", "unknown top-level key(s) runtime"),
    ("a.conf", "streamlets { stats {", "not valid HOCON"),
    ("a.yaml", "streamlets: [unclosed", "not valid YAML"),
    ("a.yaml", "- a list\n", "the top level must be a map"),
])
def test_errors_name_the_file(tmp_path, name, text, words):
    path = write(tmp_path, name, text)
    with pytest.raises(LocalConfigError) as e:
        load_settings(path, [], NAMES)
    assert str(e.value).startswith(f"{path}: "), str(e.value)
    assert words in str(e.value)


def test_missing_file(tmp_path):
    with pytest.raises(LocalConfigError, match=r"nope\.conf: cannot read"):
        load_settings(tmp_path / "nope.conf", [], NAMES)


@pytest.mark.parametrize("override, words", [
    ("streamlets.stats.config-parameters.x", "overrides are key=value"),
    ("=1", "overrides are key=value"),
    ("streamlets.nope.spark.x=1", "command line: 'streamlets.nope.spark.x': the blueprint has no streamlet 'nope'"),
    ("stats.config-parameters.x=1", "is not of the form"),
])
def test_bad_overrides(override, words):
    with pytest.raises(LocalConfigError) as e:
        load_settings(None, [override], NAMES)
    assert words in str(e.value)


def test_parse_override():
    assert key_value(" a.b = c d ") == ("a.b", "c d")


def test_a_deploy_config_runs_in_the_sandbox(tmp_path):
    # One file for both: runtime Spark settings apply to every streamlet (a streamlet's own win);
    # pod resources, topic sizes and the Kafka cluster are the operator's and are left alone.
    path = write(tmp_path, "deploy.conf", """
        runtimes.spark.config { spark.sql.shuffle.partitions = 8, spark.ui.enabled = false }
        streamlets.stats.spark.spark.sql.shuffle.partitions = 2
        streamlets.stats.kubernetes.executor { instances = 3, memory = 2g }
        topics.t.partitions = 6
        kafka.bootstrap-servers = "kafka:9092"
    """)
    s = load_settings(path, [], NAMES)
    assert s["stats"].spark == {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}
    assert s["ingress"].spark == {"spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false"}
    assert s["stats"].config_parameters == {} and s["stats"].volume_mounts == {}


def test_progress_tracking_per_streamlet(tmp_path):
    """streamlets.<name>.progress-tracking: sync (default) or async [<checkpoint interval>], in the
    file or an override; the interval in milliseconds, as the run config carries it."""
    s = load_settings(write(tmp_path, "local.conf", "streamlets.stats.progress-tracking = async\n"), [], NAMES)
    assert s["stats"].progress_tracking == "async" and s["ingress"].progress_tracking is None
    assert load_settings(None, ["streamlets.ingress.progress-tracking=sync"], NAMES)["ingress"].progress_tracking == "sync"
    s = load_settings(write(tmp_path, "slow.conf", 'streamlets.stats.progress-tracking = "async 1 minute"\n'), [], NAMES)
    assert s["stats"].progress_tracking == "async 60000 milliseconds"
    with pytest.raises(LocalConfigError, match=r"'fast' is not a progress-tracking mode: use sync or async"):
        load_settings(None, ["streamlets.stats.progress-tracking=fast"], NAMES)


def test_delivery_per_streamlet(tmp_path):
    """streamlets.<name>.delivery: at-least-once opts a streamlet's Kafka outlets out of
    exactly-once (runtime.exactly_once); unset is None (the run config's default, exactly-once)."""
    path = write(tmp_path, "local.conf", "streamlets.stats.delivery = at-least-once\n")
    s = load_settings(path, [], NAMES)
    assert s["stats"].delivery == "at-least-once" and s["ingress"].delivery is None
    assert load_settings(None, ["streamlets.ingress.delivery=exactly-once"], NAMES)["ingress"].delivery == "exactly-once"
    with pytest.raises(LocalConfigError, match=r"'at-most-once' is not a delivery mode \(one of exactly-once, at-least-once\)"):
        load_settings(write(tmp_path, "b.conf", "streamlets.stats.delivery = at-most-once\n"), [], NAMES)
