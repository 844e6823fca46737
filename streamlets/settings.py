"""The single settings of a streamlet, declared once: `streamlets.<name>.<key> = value` in a run or
deploy config (no item after the key), e.g. `streamlets.stats.delivery = at-least-once`.

SETTINGS is the one table (key, default, values, doc, how a value is read). Everything else takes
what it needs from it:

- the config check and the sandbox (blueprint.scopes, blueprint.configcheck,
  blueprint.sandbox.localconfig): which keys are settings, what each accepts, the message for a
  bad value (`Setting.normal`);
- `blueprint build` and the application resource (blueprint.deploy.spec): the field of each
  (camelCase of `field`: `progressTracking`), its enum or pattern in the CRD's schema;
- the run config (streamlets.runtime.runconfig.StreamletRunConfig): a field named `field` per
  row, its default and description, checked by `Setting.normal`;
- the runtime modules that act on them take their modes from here: streamlets.runtime.quarantine
  (on-failure), streamlets.runtime.exactly_once (delivery), streamlets.trigger (trigger),
  streamlets.runtime.progress_tracking (progress-tracking), streamlets.runtime.context (max-offsets-per-trigger,
  the Kafka source's maxOffsetsPerTrigger).

Adding a setting is one row here, a field of the run config the runtime reads, and its behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from pydantic.alias_generators import to_camel

# on-failure: what a failed query does (streamlets.runtime.quarantine)
STOP, QUARANTINE = "stop", "quarantine"
# delivery: what a streamlet's Kafka outlets get (streamlets.runtime.exactly_once)
EXACTLY_ONCE, AT_LEAST_ONCE = "exactly-once", "at-least-once"
# progress-tracking: how micro-batch progress is written (streamlets.runtime.progress_tracking)
SYNC, ASYNC = "sync", "async"
PROGRESS_TRACKING_FORMS = (SYNC, f"{ASYNC} [<checkpoint interval>]")
TRIGGER_FORMS = ("micro-batch", "processing-time <duration>", "real-time [<duration>]")


def parse_progress_tracking(text: str) -> tuple[str, int | None]:
    """A progress-tracking setting's (mode, checkpoint interval in milliseconds or None for
    Spark's default): `sync`, `async`, `async 5 seconds` (a duration as
    streamlets.trigger.duration_ms reads it). Raises ValueError naming the forms accepted."""
    from .trigger import TriggerError, duration_ms

    mode, _, rest = str(text).strip().partition(" ")
    rest = rest.strip()
    if mode == SYNC and not rest:
        return SYNC, None
    if mode == ASYNC:
        if not rest:
            return ASYNC, None
        try:
            return ASYNC, duration_ms(rest)
        except TriggerError as e:
            raise ValueError(f"{text!r}: the checkpoint interval after async: {e}") from None
    raise ValueError(f"{text!r} is not a progress-tracking mode: use {' or '.join(PROGRESS_TRACKING_FORMS)} "
                     "(e.g. async 5 seconds)")


def progress_tracking_text(text: str) -> str:
    """The progress-tracking setting in the form run configs and the application resource carry:
    `sync`, `async` or `async <N> milliseconds`. Raises ValueError as parse_progress_tracking."""
    mode, interval_ms = parse_progress_tracking(text)
    return mode if interval_ms is None else f"{mode} {interval_ms} milliseconds"


def records_text(text: str) -> str:
    """A positive whole number of records in its normal text (`20000`; `20_000` and ` 20000 ` read
    too). Raises ValueError saying what is accepted."""
    try:
        n = int(str(text).strip())
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{text!r} is not a number of records: use a whole number of at least 1 (e.g. 20000)")
    return str(n)


def trigger_text(text: str) -> str:
    """A trigger setting in its normal text form (streamlets.trigger.Trigger.text). Raises
    ValueError (streamlets.trigger.TriggerError) naming the forms accepted."""
    from .trigger import Trigger

    return Trigger.parse(str(text)).text()


@dataclass(frozen=True)
class Setting:
    """One streamlet setting.

    `key`: its config key (`streamlets.<name>.<key>`); `default`: what applies when it is unset
    (None: the streamlet class's declaration decides, e.g. `Streamlet.on_failure`); `values`: the
    values of a choice, or the text forms a free-form setting accepts (for messages); `doc`: what
    it does; `parse`: for a free-form setting, its text -> the normal text (ValueError saying what
    is accepted), None for a choice (one of `values`); `pattern`: the normal text as a regular
    expression (the CRD schema's pattern of a free-form setting).
    """

    key: str
    default: str | None
    values: tuple[str, ...]
    doc: str
    parse: Callable[[str], str] | None = None
    pattern: str | None = None

    @property
    def field(self) -> str:
        """The field of the run config (`progress_tracking`)."""
        return self.key.replace("-", "_")

    @property
    def spec_field(self) -> str:
        """The field of a streamlet in the application resource (`progressTracking`)."""
        return to_camel(self.field)

    @property
    def choices(self) -> tuple[str, ...] | None:
        """The values of a choice; None for a free-form setting."""
        return self.values if self.parse is None else None

    def normal(self, value: Any) -> str:
        """The value as run configs and the application resource carry it. Raises ValueError
        saying what is accepted."""
        if self.parse is not None:
            return self.parse(str(value))
        if value not in self.values:
            article = "an" if self.key[0] in "aeiou" else "a"
            raise ValueError(f"{value!r} is not {article} {self.key} mode (one of {', '.join(self.values)})")
        return str(value)


ON_FAILURE = Setting(
    "on-failure", None, (STOP, QUARANTINE),
    "a failed query: 'stop' (the failure stands) or 'quarantine' (streamlets.runtime.quarantine: the records that "
    "make its logic fail go to the dead-letter topic and are skipped); unset: the class's on_failure, else stop")
DELIVERY = Setting(
    "delivery", EXACTLY_ONCE, (EXACTLY_ONCE, AT_LEAST_ONCE),
    "Kafka outlets: exactly-once (one Kafka transaction per micro-batch, streamlets.runtime.exactly_once) or "
    "at-least-once (Spark's Kafka sink)")
TRIGGER = Setting(
    "trigger", None, TRIGGER_FORMS,
    "the streamlet's trigger, text form of streamlets.trigger (micro-batch, processing-time <duration>, "
    "real-time [<checkpoint interval>]: Spark 4.1's Real-Time Mode); unset: what the class declares "
    "(Streamlet.trigger), else micro-batch",
    trigger_text, r"^(micro-batch|processing-time [0-9]+ ?[a-z]+|real-time( [0-9]+ ?[a-z]+)?)$")
PROGRESS_TRACKING = Setting(
    "progress-tracking", SYNC, PROGRESS_TRACKING_FORMS,
    "micro-batch progress: sync (Spark's default: the offset and commit logs written before and after each batch) "
    "or async [<checkpoint interval>] (asynchronous progress tracking, its logs written once per interval, 1 s by "
    "default, as `async <N> milliseconds`; streamlets.runtime.progress_tracking: at-least-once Kafka-to-Kafka "
    "streamlets only)",
    progress_tracking_text, r"^(sync|async|async [1-9][0-9]* milliseconds)$")

MAX_OFFSETS_PER_TRIGGER = Setting(
    "max-offsets-per-trigger", None, ("<records>",),
    "most records a micro-batch reads from each inlet (Spark's Kafka source option maxOffsetsPerTrigger, one "
    "per inlet, split over its topic's partitions by their lag); unset: everything there is. A backlog then "
    "drains in micro-batches of bounded length, which the autoscaler measures as they finish "
    "(streamlets.autoscale)",
    records_text, r"^[1-9][0-9]*$")

SETTINGS: dict[str, Setting] = {s.key: s for s in (ON_FAILURE, DELIVERY, TRIGGER, PROGRESS_TRACKING,
                                                    MAX_OFFSETS_PER_TRIGGER)}
BY_FIELD: dict[str, Setting] = {s.field: s for s in SETTINGS.values()}  # by run config field: `progress_tracking`
