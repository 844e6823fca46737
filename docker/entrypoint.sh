#!/bin/bash
# Entrypoint of the streamlet image. Spark on Kubernetes (and so the Spark Operator) starts its
# pods through the image's entrypoint with the same commands as Spark 4.1's own image
# (resource-managers/kubernetes/docker/src/main/dockerfiles/spark/entrypoint.sh):
#   driver ARGS...   the driver pod: spark-submit in client mode; ARGS are what Spark put in the
#                    pod (--properties-file /opt/spark/conf/spark.properties --class ... <main file> <args>)
#   executor         an executor pod: the executor JVM, configured by the SPARK_EXECUTOR_*,
#                    SPARK_DRIVER_URL, SPARK_APPLICATION_ID... variables the driver gives its pods
#   anything else    run as given (python3 -m streamlets.runner --config ..., bash)
# Every command runs under tini, which forwards signals and reaps zombies (Python workers).
# Not carried over from Spark's: K8S_SPARK_LOG_PATH (log copies in files) and HADOOP_HOME's
# `hadoop classpath` (no Hadoop distribution here; SPARK_DIST_CLASSPATH is still honoured).
set -eo pipefail

# A uid without a passwd entry (runAsUser, OpenShift's random uids): Hadoop's login in the JVM
# needs a user name. Spark appends one to /etc/passwd when it can write there; with a read-only
# root file system, nss_wrapper gives the processes a passwd file of their own in /tmp.
uid=$(id -u) gid=$(id -g)
if ! getent passwd "$uid" >/dev/null 2>&1; then
  entry="$uid:x:$uid:$gid:${SPARK_USER_NAME:-anonymous uid}:$SPARK_HOME:/bin/false"
  wrapper=$(compgen -G '/usr/lib/*/libnss_wrapper.so' | head -1 || true)
  if [ -w /etc/passwd ]; then
    echo "$entry" >> /etc/passwd
  elif [ -n "$wrapper" ] && nss=$(mktemp -d 2>/dev/null); then
    { cat /etc/passwd; echo "$entry"; } > "$nss/passwd"
    { cat /etc/group; getent group "$gid" >/dev/null || echo "spark:x:$gid:"; } > "$nss/group"
    export LD_PRELOAD="$wrapper" NSS_WRAPPER_PASSWD="$nss/passwd" NSS_WRAPPER_GROUP="$nss/group"
  else
    echo "entrypoint: uid $uid has no passwd entry and none could be added" >&2
  fi
fi

case "$1" in
  driver)
    shift
    # The pod is the driver: client mode, bound to the pod's IP (Spark sets the variable).
    cmd=("$SPARK_HOME/bin/spark-submit" --conf "spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS"
         --deploy-mode client "$@")
    ;;
  executor)
    shift
    # Spark's configuration first, then Hadoop's, then the jars (Kafka and Avro connectors
    # included), then the working directory (SPARK-43540: files added with --files).
    classpath="${SPARK_CONF_DIR:-$SPARK_HOME/conf}:${HADOOP_CONF_DIR:+$HADOOP_CONF_DIR:}${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}"
    classpath+="$SPARK_HOME/jars/*${SPARK_EXTRA_CLASSPATH:+:$SPARK_EXTRA_CLASSPATH}:$PWD${SPARK_DIST_CLASSPATH:+:$SPARK_DIST_CLASSPATH}"
    # The driver passes the executor's JVM options as SPARK_JAVA_OPT_0, _1, ...: in that order.
    java_opts=()
    for var in $(compgen -v SPARK_JAVA_OPT_ | sort -t_ -k4 -n); do java_opts+=("${!var}"); done
    cmd=("${JAVA_HOME:-/opt/java}/bin/java" "${java_opts[@]}"
         -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY" -cp "$classpath"
         org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend
         --driver-url "$SPARK_DRIVER_URL" --executor-id "$SPARK_EXECUTOR_ID"
         --cores "$SPARK_EXECUTOR_CORES" --app-id "$SPARK_APPLICATION_ID"
         --hostname "$SPARK_EXECUTOR_POD_IP" --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID"
         --podName "$SPARK_EXECUTOR_POD_NAME")
    ;;
  *)
    cmd=("$@")
    ;;
esac
exec /usr/bin/tini -s -- "${cmd[@]}"
