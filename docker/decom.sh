#!/bin/bash
# Executors' preStop hook when spark.decommission.enabled is set (Spark on Kubernetes runs
# /opt/decom.sh): ask the executor JVM to decommission (SIGPWR: it migrates its blocks and
# stops taking tasks), then wait up to a minute for it to exit.
pid=$(pgrep -f -o org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend) ||
  { echo "decom.sh: no executor to decommission"; exit 0; }
echo "decom.sh: decommissioning executor (pid $pid)"
kill -s PWR "$pid"
timeout 60 tail --pid="$pid" -f /dev/null || true
echo "decom.sh: done"
