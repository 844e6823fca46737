"""A failed query's error as one line for a person: the user's exception with the user's file and
line out of Spark's and py4j's wrappers, or what a known Spark error means and how to fix it.

Used wherever a failure is shown: the sandbox's supervisor, the driver's last line, the test kit's
StreamletRunError, the quarantine ledger and dead letters.
"""

from __future__ import annotations

import re

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')
_EXC = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure|[A-Z]\w*))(?::\s?(?P<msg>.*))?$")
_INTERNAL = ("/pyspark/", "/py4j/", "/site-packages/", "/dist-packages/", "/lib/python3", "<frozen", "/streamlets/runtime/")

# Spark errors a streamlet's own code or schemas cause, by error class: what it means, and the fix.
_AVRO_NULL = re.compile(r"\[AVRO_CANNOT_WRITE_NULL_FIELD\] Cannot write null value for field `(?P<field>[^`]+)` "
                        r"defined as non-null Avro data type \"?(?P<type>[^\".]+)\"?")


def known_spark_error(text: str) -> str | None:
    """The meaning and the fix of a Spark error a streamlet's code or schemas cause, or None.

    AVRO_CANNOT_WRITE_NULL_FIELD (to_avro, an outlet's encoding): a record has null in a field
    the outlet's schema declares non-null; Spark's own hint (its `avroSchema` option) does not
    apply to outlets, whose schema is the declared one.
    """
    m = _AVRO_NULL.search(text)
    if m:
        field, type_ = m["field"], m["type"].strip()
        return (f"AVRO_CANNOT_WRITE_NULL_FIELD: a record written to an outlet has null in field {field!r}, which "
                f"the outlet's schema declares non-null ({type_}): make it nullable in the .avsc "
                f'(["null", "{type_}"] with "default": null) or filter the nulls out before write_stream')
    return None


def user_exception(text: str | None) -> str:
    """One line for a failed query: a known Spark error's meaning and fix (known_spark_error), else
    the user's exception (type and message) with the user's file and line, parsed out of the
    Python traceback inside Spark's `PythonException` / `StreamingQueryException` text
    ("ValueError: bad flight (at app/enrich.py:42, in check)"). Text without a Python traceback
    gives its first non-empty line."""
    text = text or ""
    known = known_spark_error(text)
    if known:
        return known
    lines = text.splitlines()
    starts = [i for i, l in enumerate(lines) if "Traceback (most recent call last)" in l]
    if not starts:
        return next((l.strip() for l in lines if l.strip()), "")
    frames: list[tuple[str, str, str]] = []
    exc_line = None
    for line in lines[starts[-1] + 1:]:
        m = _FRAME.match(line)
        if m:
            frames.append((m["file"], m["line"], m["func"].strip()))
            continue
        if line.startswith((" ", "\t")) or not line.strip():
            if line.strip().startswith("at ") and exc_line:  # the JVM's stack after the Python part
                break
            continue
        if _EXC.match(line.strip()):
            exc_line = line.strip()
            break
    if exc_line is None:
        return next((l.strip() for l in lines if l.strip()), "")
    user = [f for f in frames if not any(s in f[0] for s in _INTERNAL)]
    where = user[-1] if user else (frames[-1] if frames else None)
    return exc_line if where is None else f"{exc_line} (at {where[0]}:{where[1]}, in {where[2]})"
