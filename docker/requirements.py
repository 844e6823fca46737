"""Print the project's requirements, one per line, from pyproject.toml (standard library only).

The Dockerfiles install them in a layer of their own before they copy the sources, so a change of
the sources, or of pyproject.toml's tool settings, leaves that layer in podman's or Docker's cache:

    python3 requirements.py pyproject.toml [--extra NAME]... [--without NAME]...

--extra adds an optional dependency group; --without leaves a distribution out (the operator
image leaves out PySpark and what only Spark needs).
"""

from __future__ import annotations

import argparse
import re
import tomllib


def name_of(requirement: str) -> str:
    """The normalized distribution name of a requirement string ("PyYAML>=6" -> "pyyaml")."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if not match:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def requirements(pyproject: str, extras: list[str], without: list[str]) -> list[str]:
    with open(pyproject, "rb") as f:
        project = tomllib.load(f)["project"]
    wanted = list(project.get("dependencies", []))
    for extra in extras:
        wanted += project["optional-dependencies"][extra]
    skip = {name_of(n) for n in without}
    out: list[str] = []
    for req in wanted:
        if name_of(req) not in skip and req not in out:
            out.append(req)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pyproject")
    parser.add_argument("--extra", action="append", default=[])
    parser.add_argument("--without", action="append", default=[])
    args = parser.parse_args()
    print("\n".join(requirements(args.pyproject, args.extra, args.without)))


if __name__ == "__main__":
    main()
