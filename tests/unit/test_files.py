"""streamlets.files without Spark: the JSON form of values, the batch files, the latest row per
key, and the class checks of the file streamlets."""

from __future__ import annotations

import json
import os
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from streamlets import AvroInlet, AvroOutlet, VolumeMount
from streamlets.files import (FileIngress, JsonLinesEgress, batch_file, iso_utc, json_value, latest_per_key,
                              write_batch_file)

UTC = timezone.utc
SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}


def test_json_values_are_exact_text_for_what_json_lacks():
    t = datetime(2013, 1, 1, 10, tzinfo=UTC)
    assert json_value(t) == "2013-01-01T10:00:00.000Z"
    assert json_value(t + timedelta(microseconds=7)) == "2013-01-01T10:00:00.000007Z"
    assert json_value(datetime(2013, 1, 1, 5, tzinfo=timezone(timedelta(hours=-5)))) == "2013-01-01T10:00:00.000Z"
    assert json_value(date(2013, 1, 2)) == "2013-01-02"
    assert json_value(Decimal("12345678901234567890.123")) == "12345678901234567890.123"
    assert json_value(b"\x00\xff") == "AP8="
    assert json_value({"a": [t, None, 1.5], "b": {"c": True}}) == {"a": ["2013-01-01T10:00:00.000Z", None, 1.5],
                                                                   "b": {"c": True}}


def test_a_naive_datetime_is_local_time(monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")
    import time

    time.tzset()
    try:
        assert iso_utc(datetime(2013, 1, 1, 5)) == "2013-01-01T10:00:00.000Z"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_latest_per_key_keeps_the_newest_version_in_key_order_nulls_first():
    rows = [{"k": "b", "v": 2, "n": 1}, {"k": "a", "v": 1, "n": 2}, {"k": "b", "v": 1, "n": 3},
            {"k": "b", "v": 2, "n": 4}, {"k": None, "v": 0, "n": 5}]
    assert [r["n"] for r in latest_per_key(rows, ("k",), "v")] == [5, 2, 4]  # equal versions: the later
    assert [r["n"] for r in latest_per_key(rows, ("k",), None)] == [5, 2, 4]


def test_a_batch_file_is_complete_or_absent_and_a_replay_replaces_it(tmp_path):
    rows = [{"id": 1, "at": datetime(2013, 1, 1, tzinfo=UTC)}, {"id": 2, "at": None}]
    path = write_batch_file(tmp_path / "out", 3, rows)
    assert path == batch_file(tmp_path / "out", 3) == tmp_path / "out" / "batch-00000003.jsonl"
    assert path.read_text() == '{"id":1,"at":"2013-01-01T00:00:00.000Z"}\n{"id":2,"at":null}\n'
    inode = os.stat(path).st_ino
    write_batch_file(tmp_path / "out", 3, rows[:1])  # the replay: renamed over, never appended
    assert [json.loads(x)["id"] for x in path.read_text().splitlines()] == [1]
    assert os.stat(path).st_ino != inode
    assert write_batch_file(tmp_path / "out", 4, []) is None
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["batch-00000003.jsonl"]  # no temporary left


def test_the_bases_are_abstract_and_their_subclasses_are_not():
    assert FileIngress.is_abstract() and JsonLinesEgress.is_abstract()

    class Ingress(FileIngress):
        source = VolumeMount("source", "/mnt/in", "ReadOnlyMany")
        outlet = AvroOutlet("out", SCHEMA)
        file_schema = "id LONG"

    class Egress(JsonLinesEgress):
        inlet = AvroInlet("in", SCHEMA)
        output = VolumeMount("output", "/mnt/out")

    assert not Ingress.is_abstract() and not Egress.is_abstract()


@pytest.mark.parametrize("body, message", [
    ("outlet = AvroOutlet('out', SCHEMA)", "declares exactly one ReadOnlyMany volume mount (found: none)"),
    ("source = VolumeMount('source', '/mnt/in', 'ReadOnlyMany')", "declares exactly one outlet (found: none)"),
    ("source = VolumeMount('source', '/mnt/in', 'ReadOnlyMany'); outlet = AvroOutlet('out', SCHEMA)",
     "set file_schema, the files' columns in Spark DDL"),
])
def test_an_incomplete_ingress_names_what_it_lacks_at_start(body, message):
    from streamlets.errors import StreamletError

    namespace = {"FileIngress": FileIngress, "VolumeMount": VolumeMount, "AvroOutlet": AvroOutlet, "SCHEMA": SCHEMA}
    exec(f"class Broken(FileIngress):\n    {body}\n", namespace)
    with pytest.raises(StreamletError, match=message.replace("(", r"\(").replace(")", r"\)")):
        namespace["Broken"]().create_logic(ctx=None)  # checked before the context is used
