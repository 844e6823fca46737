"""The packages' public API: every name in `__all__` resolves, `import streamlets` stays light (the
runtime's and the test kit's names are imported on first use), and ControlInlet is a class."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import blueprint
import streamlets

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("package", [streamlets, blueprint], ids=lambda p: p.__name__)
def test_every_exported_name_resolves(package):
    assert package.__all__ == sorted(package.__all__) and len(set(package.__all__)) == len(package.__all__)
    missing = [name for name in package.__all__ if getattr(package, name, None) is None]
    assert missing == []


def test_no_export_hides_a_module_of_the_package():
    import pkgutil

    for package in (streamlets, blueprint):
        modules = {m.name for m in pkgutil.iter_modules(package.__path__)}
        assert modules.isdisjoint(package.__all__), package.__name__


def test_the_sdk_exports_what_users_write():
    from streamlets.runtime.context import StreamletContext
    from streamlets.runtime.control import ControlInlet
    from streamlets.testkit import run_streamlet

    assert (streamlets.StreamletContext, streamlets.ControlInlet, streamlets.run_streamlet) == (
        StreamletContext, ControlInlet, run_streamlet)
    assert streamlets.Trigger.parse("real-time 5 seconds").real_time_mode
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        streamlets.nope  # noqa: B018


def test_control_inlet_is_an_inlet_class():
    from streamlets.runtime.control import COMMAND_SCHEMA

    class Commands(streamlets.Streamlet):
        control = streamlets.ControlInlet("control")
        other = streamlets.ControlInlet("more", error_handling="fail")

        def create_logic(self, ctx: streamlets.LogicContext) -> None:
            pass

    assert isinstance(Commands.control, streamlets.AvroInlet) and isinstance(streamlets.ControlInlet, type)
    assert streamlets.ControlInlet().name == "control"
    assert Commands.control.schema.schema == streamlets.AvroSchema.load(COMMAND_SCHEMA).schema
    assert [p.name for p in Commands.shape().inlets] == ["control", "more"]
    assert Commands.other.error_handling == "fail"


def test_importing_the_sdk_leaves_the_runtime_and_spark_unimported():
    code = textwrap.dedent("""
        import sys
        import streamlets
        from streamlets import LogicContext, Streamlet, Trigger
        loaded = sorted(m for m in sys.modules if m.startswith(("pyspark", "streamlets.runtime", "streamlets.testkit")))
        assert not loaded, loaded
        print("ok")
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr
