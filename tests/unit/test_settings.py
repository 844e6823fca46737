"""streamlets.settings: the one table of a streamlet's single settings, and what takes it."""

import pytest

from blueprint.scopes import STREAMLET_SETTINGS, scope_of, setting_value
from blueprint.sandbox.localconfig import StreamletSettings
from streamlets.runtime import exactly_once, progress_tracking, quarantine
from streamlets.runtime.runconfig import StreamletRunConfig
from streamlets.settings import SETTINGS


def test_every_setting_is_a_run_config_field_with_its_default():
    fields = StreamletRunConfig.model_fields
    for s in SETTINGS.values():
        assert s.field in fields, s.key
        assert fields[s.field].default == s.default
        assert s.doc in (fields[s.field].description or "")


def test_the_config_scopes_and_the_runtime_take_the_table():
    assert STREAMLET_SETTINGS == {k: s.values for k, s in SETTINGS.items()}
    assert all(scope_of(f"streamlets.x.{k}").is_streamlet_setting() for k in SETTINGS)
    assert exactly_once.DELIVERY_MODES == SETTINGS["delivery"].values
    assert quarantine.ON_FAILURE == SETTINGS["on-failure"].values
    assert progress_tracking.normal_text("async 2 seconds") == SETTINGS["progress-tracking"].normal("async 2 seconds")


def test_values_are_checked_and_normalised_in_one_place():
    assert setting_value("progress-tracking", "async 1 minute") == "async 60000 milliseconds"
    run = StreamletRunConfig(app_id="a", streamlet="s", class_name="m.C", checkpoint_root="/c",
                             progress_tracking="async 1 minute")
    assert run.progress_tracking == "async 60000 milliseconds" and run.delivery == "exactly-once"
    for key, field, bad in (("delivery", "delivery", "at-most-once"), ("on-failure", "on_failure", "skip")):
        with pytest.raises(ValueError, match=f"{bad!r} is not an? {key} mode"):
            setting_value(key, bad)
        with pytest.raises(ValueError, match=f"{bad!r} is not an? {key} mode"):
            StreamletRunConfig(app_id="a", streamlet="s", class_name="m.C", checkpoint_root="/c", **{field: bad})


def test_the_sandbox_settings_carry_every_setting_by_its_field():
    s = StreamletSettings(delivery="at-least-once", trigger="real-time 2s")
    assert (s.delivery, s.trigger, s.on_failure) == ("at-least-once", "real-time 2s", None)
    with pytest.raises(TypeError, match="no streamlet setting colour"):
        StreamletSettings(colour="red")


@pytest.mark.parametrize("key", sorted(SETTINGS))
def test_every_setting_has_doc_and_values(key):
    s = SETTINGS[key]
    assert s.doc and s.values and (s.choices is None) == (s.parse is not None) == (s.pattern is not None)
    if s.default is not None:
        assert s.normal(s.default) == s.default


def test_max_offsets_per_trigger_is_a_number_of_records_that_reaches_the_kafka_source():
    assert setting_value("max-offsets-per-trigger", " 20000 ") == "20000"
    for bad in ("0", "-5", "lots", "1.5"):
        with pytest.raises(ValueError, match=f"{bad!r} is not a number of records"):
            setting_value("max-offsets-per-trigger", bad)
    run = StreamletRunConfig(app_id="a", streamlet="s", class_name="m.C", checkpoint_root="/c",
                             max_offsets_per_trigger=300)
    assert run.max_offsets_per_trigger == "300"
    assert StreamletRunConfig(app_id="a", streamlet="s", class_name="m.C", checkpoint_root="/c").max_offsets_per_trigger is None
