"""What the tests share, one home each (no test module imports another; tests/conftest.py
registers the fixture modules as pytest plugins):

  waiting       wait_until: poll a condition, with one argument order
  ports         free_ports / free_port: loopback ports nothing listens on
  kafka         the session's Kafka broker (fixture kafka_broker), fresh topics, produce, read back
  spark         the session's SparkSession (fixture spark)
  realtime_app  small streamlets and run configs on the session broker (Real-Time Mode tests)
  counts_app    the file-counting streamlet of the savepoint and control-stream tests
  sandbox       `blueprint run` as a user runs it: in a child process
  kube_operator the operator against a real kube-apiserver (tests/k8s): fixtures and helpers
  e2e           names, helm and reports of the end-to-end suite (tests/e2e)
  bench         a benchmark script (bench/<name>.py) loaded as a module
  crd_schema    the CRD's structural schema as a JSON Schema
  profiles      the Hypothesis profiles ("dev", "ci") and examples() scaling per-test counts

The package is importable as ``support`` because pytest puts tests/ (the root conftest's folder)
on sys.path.
"""
