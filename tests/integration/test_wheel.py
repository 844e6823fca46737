"""The wheel carries everything a user installs: `pip install ".[operator]"` (not editable) into a
fresh virtual environment outside the repository gives the `blueprint` and `kubectl-streamlets`
commands, the operator under its import name (streamlets_operator) runnable by kopf, the CRD, the
type marker files and the project's Java sources (jvm/)."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

def test_operator_and_clis_from_a_fresh_virtualenv(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bin_dir = env_dir / "bin"
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    clean["PATH"] = f"{bin_dir}{os.pathsep}{clean.get('PATH', '')}"

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), cwd=tmp_path, env=clean, capture_output=True, text=True, timeout=900)

    built = run(str(bin_dir / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q", f"{ROOT}[operator]")
    assert built.returncode == 0, built.stderr[-3000:]

    where = run(str(bin_dir / "python"), "-c",
                "import blueprint, streamlets, streamlets_operator, streamlets.state, streamlets.runtime\n"
                "from blueprint.deploy import crd\n"
                "from pathlib import Path\n"
                "print(Path(streamlets_operator.__file__).parent.parent)\n"
                "print(crd.load_crd()['spec']['names']['kind'])\n"
                "print(all((Path(m.__file__).parent / 'py.typed').is_file() for m in (blueprint, streamlets, streamlets_operator)))\n"
                "from streamlets.runtime.jvm_jars import sources_of\n"
                "print(len(list(sources_of('streamlets-schema-registry').rglob('*.java'))))")
    assert where.returncode == 0, where.stderr[-3000:]
    site, kind, typed, java = where.stdout.split()
    assert Path(site).is_relative_to(env_dir) and not Path(site).is_relative_to(ROOT)  # installed, not the checkout
    assert (kind, typed) == ("StreamletApplication", "True")
    # the schema registry UDFs' Java sources, which runtime.jvm_jars compiles on first use
    assert int(java) == len(list((ROOT / "jvm" / "streamlets-schema-registry").rglob("*.java"))) > 0

    kopf = run(str(bin_dir / "kopf"), "run", "-m", "streamlets_operator", "--help")
    assert kopf.returncode == 0 and "--namespace" in kopf.stdout, kopf.stderr[-3000:]
    plugin = run(str(bin_dir / "kubectl-streamlets"), "--help")
    assert plugin.returncode == 0 and "deploy" in plugin.stdout, plugin.stderr[-3000:]
    cli = run(str(bin_dir / "blueprint"), "--help")
    assert cli.returncode == 0 and "verify" in cli.stdout, cli.stderr[-3000:]
    assert sys.executable != str(bin_dir / "python")
