"""Kafka client log lines (librdkafka's `%3|...|FAIL|rdkafka#producer-1| ... Connection refused`)
go to Python logging, never straight onto the terminal.

librdkafka writes its log lines to stderr unless the client is given a `logger`
(confluent-kafka's `logger` setting, a logging.Logger); then they are queued and handed to that
logger whenever the client is polled (poll, flush, consume). Every Kafka client of the SDK and
the sandbox is configured through `client_config`, with the logger `streamlets.kafka`:

- in the sandbox it is a child of `streamlets`, whose handler writes `logs/sandbox.log`;
- in a driver pod or another program it propagates to the handlers the program configures
  (the runner's basicConfig: the pod's log);
- with no handler anywhere it is silent (a NullHandler keeps logging's last-resort handler
  from printing it to stderr).

librdkafka's syslog levels map to logging's: 0-3 ERROR or worse, 4 WARNING, 5-6 INFO, 7 DEBUG.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

LOGGER = "streamlets.kafka"


def kafka_logger() -> logging.Logger:
    """The logger Kafka clients log to (with a NullHandler, so never to stderr by default)."""
    logger = logging.getLogger(LOGGER)
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())
    return logger


def client_config(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A confluent-kafka client config (`bootstrap.servers`...) with `logger` set to kafka_logger().

    A `bootstrap.servers` that is a streamlets.kafka_security.KafkaConnection brings its security
    settings in librdkafka's names (secrets read now: KafkaSecurityError if one cannot be)."""
    librdkafka = getattr(conf.get("bootstrap.servers"), "librdkafka", None)  # a KafkaConnection (which imports this)
    if librdkafka is not None:
        conf = {**conf, **librdkafka()}
    return {**conf, "logger": kafka_logger()}
