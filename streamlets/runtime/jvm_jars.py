"""The project's own jars, built from `jvm/<name>/src/main/java` (and its `resources`) on first use.

`module_jar(name, classpath)` compiles a module's sources with `javac --release 17` against
`classpath` and caches the jar under `<cache>/jvm/<name>-<hash>.jar`, the hash covering the
sources and the class path's jar names: a jar is built once, and again only when a source or a
version changes. A jar an image put among Spark's jars ($SPARK_HOME/jars/<name>-*.jar) is used
as it is. The modules: streamlets-kafka-eos (runtime.eos_jar), streamlets-checkpoint (runtime.checkpoint_file_manager) and streamlets-schema-registry
(runtime.schema_registry).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from ..cache import cache_root
from .jars import spark_jars_dir

# jvm/ of the checkout, through the package's link to it (streamlets/runtime/jvm), so that a wheel
# carries the sources too (pyproject.toml's package data)
MODULES = Path(__file__).parent / "jvm"


class JarBuildError(RuntimeError):
    """A jar cannot be built: its sources, javac or a class path jar missing, or javac failed."""


def spark_jars() -> list[Path]:
    """Spark's own jars (of the installed PySpark, or $SPARK_HOME/jars in an image)."""
    return sorted(spark_jars_dir().glob("*.jar"))


def built_jars_dir() -> Path:
    """`<cache>/jvm`: the jars built here."""
    return cache_root() / "jvm"


def sources_of(name: str) -> Path:
    """`jvm/<name>/src/main/java`."""
    return MODULES / name / "src" / "main" / "java"


def module_jar(name: str, classpath: list[Path]) -> Path:
    """The jar of module `name`: the one in $SPARK_HOME/jars if an image put it there, else the
    cache's build for these sources and class path, compiled now if missing. Raises
    JarBuildError (with javac's output) when it cannot be built."""
    shipped = [j for j in spark_jars() if j.name.startswith(name + "-")]
    if shipped:
        return shipped[-1]
    root = sources_of(name)
    sources = sorted(root.rglob("*.java"))
    if not sources:
        raise JarBuildError(f"no Java sources under {root}")
    digest = hashlib.sha256()
    for src in sources:
        digest.update(str(src.relative_to(root)).encode() + b"\0" + src.read_bytes())
    for jar in classpath:
        digest.update(jar.name.encode())
    target = built_jars_dir() / f"{name}-{digest.hexdigest()[:16]}.jar"
    if target.is_file():
        return target
    javac = shutil.which("javac")
    if javac is None:
        raise JarBuildError(f"javac not found: install a JDK 17 to build the {name} jar")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        classes = Path(tmp) / "classes"
        run = subprocess.run([javac, "--release", "17", "-nowarn", "-d", str(classes), "-cp",
                              os.pathsep.join(map(str, classpath)), *map(str, sources)],
                             capture_output=True, text=True)
        if run.returncode != 0:
            raise JarBuildError(f"javac failed for {root}:\n{run.stdout}{run.stderr}")
        resources = root.parent / "resources"
        partial = Path(tmp) / "out.jar"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for folder in (classes, resources):
                for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                    archive.write(path, path.relative_to(folder).as_posix())
        os.replace(partial, target)  # atomic: concurrent builders each write a whole jar
    return target
