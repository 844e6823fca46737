"""An application's system topics, named in one place (as Quix Streams' TopicManager names its
internal topics): the sandbox (blueprint.topics), `blueprint build`, the CLIs, the runtime and the
operator (streamlets_operator.topics, .api) all take the names and settings from here.

Per application (`<app>` is its app id):

- `<app>.dead-letters`: malformed inlet values and quarantined records (streamlets.runtime.deadletter,
  .quarantine); a deployment may name another (the CRD's spec.deadLetterTopic);
- `<app>.control` and `<app>.control-results`: the control stream's commands and results
  (streamlets.runtime.control), one partition each, so commands stay in order;
- `<app>.outlet-batches`: exactly-once outlets' batch ledger (streamlets.runtime.exactly_once), one
  partition, compacted (LEDGER_CONFIG).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# The system topics' ids: the suffix of their names (`<app>.<id>`) and the `id` of their entries
# in the operator's status.topics.
DEAD_LETTERS = "dead-letters"
CONTROL = "control"
CONTROL_RESULTS = "control-results"
OUTLET_BATCHES = "outlet-batches"

# The ledger topic's config: compacted, so it keeps about one record per outlet query; segments
# roll every 10 minutes (segment.ms) so compaction reaches them: a start reads at most about 10
# minutes of ledger records.
LEDGER_CONFIG = {"cleanup.policy": "compact", "segment.ms": "600000", "min.cleanable.dirty.ratio": "0.1"}


@dataclass(frozen=True)
class SystemTopic:
    """One system topic of an application.

    id: DEAD_LETTERS, CONTROL, CONTROL_RESULTS or OUTLET_BATCHES; name: its Kafka name,
    `<app>.<id>`; partitions: how many it is created with, None for the deployment's default
    (the sandbox: 1; the operator: spec.kafka.topicDefaults); config: its Kafka topic config."""

    id: str
    name: str
    partitions: int | None = 1
    config: Mapping[str, str] = field(default_factory=dict)


def system_topic(app_id: str, topic_id: str) -> str:
    """The Kafka name of the system topic `topic_id` of application `app_id`: `<app>.<id>`."""
    return f"{app_id}.{topic_id}"


def dead_letter_topic(app_id: str) -> str:
    """The application's dead-letter topic, `<app>.dead-letters`."""
    return system_topic(app_id, DEAD_LETTERS)


def control_topic(app_id: str) -> str:
    """The control stream's command topic, `<app>.control`."""
    return system_topic(app_id, CONTROL)


def results_topic(app_id: str) -> str:
    """The control stream's result topic, `<app>.control-results`."""
    return system_topic(app_id, CONTROL_RESULTS)


def ledger_topic(app_id: str) -> str:
    """The application's batch ledger topic, `<app>.outlet-batches` (1 partition, compacted: one
    record per exactly-once outlet query and batch, keyed by its transactional.id)."""
    return system_topic(app_id, OUTLET_BATCHES)


def system_topics(app_id: str) -> list[SystemTopic]:
    """Every system topic of the application, in this order: dead letters (the deployment's
    default partitions), the control stream's two topics and the batch ledger (one partition
    each; the ledger compacted)."""
    return [SystemTopic(DEAD_LETTERS, dead_letter_topic(app_id), None),
            SystemTopic(CONTROL, control_topic(app_id)),
            SystemTopic(CONTROL_RESULTS, results_topic(app_id)),
            SystemTopic(OUTLET_BATCHES, ledger_topic(app_id), config=dict(LEDGER_CONFIG))]
