"""The Spark runtime: what runs a streamlet's queries (the layer under streamlets.state, over
the SDK in streamlets/).

- runconfig: the run config (StreamletRunConfig, the JSON a driver reads);
- spark_session: the SparkSession with the connectors and defaults;
- transport: topics on Kafka (or files for the test kit);
- codec: Avro values to columns and back (from_avro/to_avro with the declared schemas);
- deadletter: malformed records to the dead-letter topic, counted;
- monitor: query progress (rates, batch ids, dead letters);
- context: StreamletContext, what create_logic gets;
- runner: StreamletRuntime, several streamlets in one SparkSession;
- control: the control stream (commands and results on Kafka) and its listener;
- registry: control-command handlers and the imported-state reader, registered by the layers
  above (streamlets.state registers savepoint, dump-state and the reader);
- storage, checkpoint: local or Hadoop file access, and Spark's checkpoint format read once;
- object_store: the state root on S3 (`s3a://`): its settings, declared once.

Imports only the SDK modules of streamlets/, never streamlets.state (tests/unit/test_layers.py).
"""
