"""Savepoint and export manifests and control results as pydantic models: the JSON on disk and
the Avro record on the wire are what they were; and the exception families."""

import json

import pytest

from blueprint.errors import BlueprintError
from streamlets.errors import StreamletError
from streamlets.runtime.control import RESULT_SCHEMA, ControlResult, _decode, _encode
from streamlets.state.errors import StateError
from streamlets.state.export_files import MANIFEST as EXPORT_MANIFEST
from streamlets.state.export_files import ExportManifest, StateExportError, manifest_entry
from streamlets.state.repartition import RepartitionError
from streamlets.state.savepoint import MANIFEST, SavepointError, SavepointManifest, read_manifest, read_savepoint

# A manifest as release 0.x wrote it (json.dumps(..., indent=2, sort_keys=True))
SAVEPOINT = {
    "app_id": "flights", "checkpoint_root": "/ckpt/flights/delay-stats", "class_name": "app.DelayStats",
    "code_version": "0123456789ab", "created_at": "2026-11-20T10:00:00+00:00", "id": "sp-20261120T100000Z-abcdef",
    "queries": {"main": {"batch_id": 4, "files": 17, "pinned_conf": {"spark.sql.shuffle.partitions": "4"},
                         "query_id": "3f1c9a7e-0000-4000-8000-000000000000", "stateful": True},
                "empty": {"batch_id": None, "files": 1, "pinned_conf": {}, "query_id": None, "stateful": False}},
    "reason": "manual", "schema_fingerprints": {"in": "123", "out": "-456"}, "spark_version": "4.0.0",
    "streamlet": "delay-stats", "version": 1,
}
EXPORT = {
    "version": 1, "checkpoint": "/ckpt/q", "batch_id": 3, "format": "jsonl", "spark_version": "4.0.0",
    "created_at": "2026-11-20T10:00:00+00:00", "query_id": "q-1",
    "operators": [{"operator_id": 0, "operator_name": "stateStoreSave", "store_name": "default", "partitions": 4,
                   "rows": 10, "path": "op-0-default", "key_schema": "struct<k:string>",
                   "value_schema": "struct<count:bigint>", "columns": ["key_k", "value_count", "partition_id"],
                   "schema": {"type": "struct", "fields": []}}],
}


def test_savepoint_manifest_reads_and_writes_the_same_json(tmp_path):
    text = json.dumps(SAVEPOINT, indent=2, sort_keys=True)
    (tmp_path / MANIFEST).write_text(text)
    manifest = read_manifest(str(tmp_path))
    assert manifest.queries["main"].pinned_conf == {"spark.sql.shuffle.partitions": "4"}
    assert manifest.to_json() == text
    assert read_savepoint(str(tmp_path)) == {**SAVEPOINT, "path": str(tmp_path)}


def test_savepoint_manifest_keeps_unknown_keys():
    newer = {**SAVEPOINT, "future_field": [1, 2]}
    assert SavepointManifest.model_validate(newer).model_dump(mode="json") == newer


def test_a_savepoint_manifest_without_a_field_names_it(tmp_path):
    broken = {k: v for k, v in SAVEPOINT.items() if k != "streamlet"}
    (tmp_path / MANIFEST).write_text(json.dumps(broken))
    with pytest.raises(SavepointError, match=r"_savepoint.json is invalid \(streamlet: Field required\)"):
        read_savepoint(str(tmp_path))
    (tmp_path / MANIFEST).write_text("{not json")
    with pytest.raises(SavepointError, match="cannot read _savepoint.json"):
        read_savepoint(str(tmp_path))


def test_export_manifest_round_trips_with_the_schema_key(tmp_path):
    manifest = ExportManifest.model_validate(EXPORT)
    assert manifest.operators[0].spark_schema == {"type": "struct", "fields": []}
    assert json.dumps(manifest.as_dict(), indent=2) == json.dumps(EXPORT, indent=2)  # same keys, same order
    (tmp_path / EXPORT_MANIFEST).write_text(json.dumps(EXPORT))
    root, fmt, entry = manifest_entry(tmp_path, 0, None)
    assert (root, fmt, entry) == (tmp_path.resolve(), "jsonl", EXPORT["operators"][0])


def test_a_broken_export_manifest_is_a_state_export_error(tmp_path):
    (tmp_path / EXPORT_MANIFEST).write_text(json.dumps({**EXPORT, "operators": [{"operator_id": 0}]}))
    with pytest.raises(StateExportError, match=r"operators.0.store_name: Field required"):
        manifest_entry(tmp_path, 0, None)


def test_control_result_is_the_avro_record():
    result = ControlResult(command_id="c1", command="savepoint", streamlet="s", status="ok", message="sp-1",
                           location="/sp/1", batch_ids={"main": 4}, at=1_700_000_000_000)
    decoded = ControlResult.model_validate(_decode(RESULT_SCHEMA, _encode(RESULT_SCHEMA, result.model_dump())))
    assert decoded.model_dump(exclude={"at"}) == result.model_dump(exclude={"at"})
    assert int(decoded.at.timestamp() * 1000) == 1_700_000_000_000
    with pytest.raises(ValueError):
        ControlResult(command_id="c1", command="x", streamlet="s", status="maybe", at=0)


def test_exception_families():
    assert not issubclass(StateError, StreamletError)  # a root of its own (streamlets.state.errors)
    for cls in (SavepointError, StateExportError, RepartitionError):
        assert issubclass(cls, StateError)
    from blueprint.cli.kubectl import Refused
    from blueprint.configcheck import ConfigReadError
    from blueprint.deploy.build import BuildError
    from blueprint.graph import GraphvizError
    from blueprint.loader import BlueprintLoadError, BlueprintReadError
    from blueprint.sandbox.kafka_broker import BrokerError
    from blueprint.sandbox.localconfig import LocalConfigError
    from blueprint.sandbox.run import SandboxError
    for cls in (BlueprintLoadError, BlueprintReadError, BuildError, ConfigReadError, GraphvizError, SandboxError,
                BrokerError, LocalConfigError, Refused):
        assert issubclass(cls, BlueprintError), cls
    assert issubclass(GraphvizError, RuntimeError) and issubclass(LocalConfigError, ValueError)
