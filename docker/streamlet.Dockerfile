# Base image of Streamlets on Spark applications: Spark 4.2.0 (PySpark's own distribution: its
# bin/spark-submit and jars are SPARK_HOME), Java 17, Python 3.11 in /opt/venv, the Kafka, Avro and
# S3A connectors in $SPARK_HOME/jars (resolved when the image is built: a pod downloads nothing), the
# streamlets package and the driver's main file /opt/streamlets/runner.py. The Spark Operator
# starts drivers and executors through /opt/entrypoint.sh (docker/entrypoint.sh: Spark on
# Kubernetes' driver and executor commands). No Apache Spark image is needed.
#
#   docker build -f docker/streamlet.Dockerfile -t streamlets-spark:0.1.0 .
#   dev/images (podman, FROM a debootstrapped Debian: --build-arg BASE_IMAGE=localhost/streamlets/python:3.11-bookworm)
#
# BASE_IMAGE: Debian bookworm with Python 3.11 (python:3.11-slim-bookworm, or Debian's python3
# and python3-venv). An application's image adds its streamlet modules on the Python path:
#   FROM streamlets-spark:0.1.0
#   COPY flight_delays/ /opt/app/flight_delays/
# (/opt/app is on PYTHONPATH; examples/flight-delays/Dockerfile), then
# `blueprint build blueprint.yaml --image <that image>`.
#
# Layers go from the least to the most often changed: system packages, the Python requirements
# (from pyproject.toml's dependencies only, so its other settings do not reinstall them), the
# connectors, then the sources, which rebuild in seconds. pip's cache is a build cache mount:
# never in the image.
ARG BASE_IMAGE=python:3.11-slim-bookworm

# The requirements alone: their layer is reused while they stay the same, whatever else changes.
FROM ${BASE_IMAGE} AS requirements
COPY pyproject.toml docker/requirements.py /tmp/
RUN python3 /tmp/requirements.py /tmp/pyproject.toml > /tmp/requirements.txt

FROM ${BASE_IMAGE} AS spark
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="streamlets-spark" \
      org.opencontainers.image.description="Streamlets on Spark: Spark 4.2.0, Java 17, Python 3.11, the streamlets package" \
      org.opencontainers.image.version="${VERSION}"

# Java 17 (its postinst needs the manuals' folder, which slim images leave out), tini, ps for
# Spark's scripts, nss_wrapper for uids without a passwd entry (entrypoint.sh). /opt/java: the
# JRE whatever the architecture.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless tini procps bash libnss-wrapper \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
 && ln -s "$(dirname "$(dirname "$(readlink -f /usr/bin/java)")")" /opt/java \
 && /opt/java/bin/java -version

# Python 3.11 in a virtual environment: the same on python:3.11-slim and on Debian's python3.
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/python -c "import sys; assert sys.version_info[:2] == (3, 11), sys.version"
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    JAVA_HOME=/opt/java \
    SPARK_HOME=/opt/venv/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=/opt/venv/bin/python3 \
    PYSPARK_DRIVER_PYTHON=/opt/venv/bin/python3 \
    PYTHONPATH=/opt/app \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The requirements (PySpark from PyPI: SPARK_HOME is its package folder) and setuptools to build
# the project below without build isolation (no download then). PIP_CERT: the system's CA
# certificates (a base image may add a proxy's) rather than pip's own bundle.
COPY --from=requirements /tmp/requirements.txt /tmp/requirements.txt
RUN --mount=type=cache,id=streamlets-pip,target=/var/cache/pip,sharing=locked \
    PIP_CACHE_DIR=/var/cache/pip PIP_CERT=/etc/ssl/certs/ca-certificates.crt pip install -q -r /tmp/requirements.txt "setuptools>=68" \
 && rm /tmp/requirements.txt \
 && test -x "$SPARK_HOME/bin/spark-submit"

# spark-sql-kafka-0-10, spark-avro, hadoop-aws (S3A: checkpoints on S3) and their dependencies,
# resolved by Spark's Ivy (on the loopback address: a build container's host name need not
# resolve); which jars is streamlets.runtime.jars' to say.
COPY docker/connectors.py /tmp/connectors.py
COPY streamlets/runtime/jars.py /tmp/jars.py
RUN cd /tmp && SPARK_LOCAL_IP=127.0.0.1 SPARK_LOCAL_HOSTNAME=localhost python /tmp/connectors.py \
 && rm -rf /tmp/* /tmp/.[!.]*

# The project's own jars (streamlets.runtime.jvm_jars): the exactly-once Kafka sink
# (jvm/streamlets-kafka-eos, streamlets.runtime.exactly_once), the schema registry topics' UDFs
# (jvm/streamlets-schema-registry, streamlets.runtime.schema_registry) and the local checkpoint
# file manager (jvm/streamlets-checkpoint, streamlets.runtime.checkpoint_file_manager), compiled
# with a JDK in a stage of its own against Spark's jars (kafka-clients among them: connectors.py),
# then put among them: every JVM of a pod has them on its class path, and a pod compiles nothing.
FROM spark AS jvm
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jdk-headless \
 && rm -rf /var/lib/apt/lists/*
COPY jvm/ /tmp/jvm/
RUN for module in streamlets-kafka-eos streamlets-schema-registry streamlets-checkpoint; do \
      mkdir -p /tmp/classes/$module \
      && javac --release 17 -nowarn -d /tmp/classes/$module -cp "$SPARK_HOME/jars/*" $(find /tmp/jvm/$module/src/main/java -name '*.java') \
      && if [ -d /tmp/jvm/$module/src/main/resources ]; then cp -r /tmp/jvm/$module/src/main/resources/. /tmp/classes/$module/; fi \
      && jar cf /tmp/$module.jar -C /tmp/classes/$module . || exit 1; \
    done

FROM spark
ARG VERSION=0.1.0
COPY --from=jvm /tmp/streamlets-kafka-eos.jar /tmp/streamlets-schema-registry.jar /tmp/streamlets-checkpoint.jar /tmp/jars/
RUN for module in streamlets-kafka-eos streamlets-schema-registry streamlets-checkpoint; do \
      mv /tmp/jars/$module.jar "$SPARK_HOME/jars/$module-${VERSION}.jar"; \
    done && rm -rf /tmp/jars

# Spark's conventional user; /opt/spark holds the working directory and, in pods, the
# configuration Spark mounts at /opt/spark/conf.
RUN echo 'spark:x:185:185:Spark:/opt/spark:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'spark:x:185:' >> /etc/group \
 && mkdir -p /opt/spark/work-dir /opt/app /opt/streamlets \
 && chown -R 185:185 /opt/spark /opt/app \
 && chmod g+w /opt/spark/work-dir
COPY --chmod=755 docker/entrypoint.sh docker/decom.sh /opt/

# The project (its sources change most often: this layer and the next rebuild in seconds).
COPY pyproject.toml README.md /tmp/src/
COPY streamlets/ /tmp/src/streamlets/
COPY blueprint/ /tmp/src/blueprint/
# blueprint/crds/ links to the chart's CRD, the one copy of it.
COPY charts/streamlets-operator/crds/ /tmp/src/charts/streamlets-operator/crds/
RUN PIP_NO_CACHE_DIR=1 pip install -q --no-deps --no-build-isolation /tmp/src \
 && rm -rf /tmp/src \
 && cd / && python -c "import streamlets.driver, streamlets.runtime.runner, blueprint; from streamlets.runtime.jars import connectors_in_spark_home; assert connectors_in_spark_home(s3a=True); from streamlets.runtime.schema_registry import registry_jar; assert registry_jar().name.endswith('-${VERSION}.jar'); from streamlets.runtime.eos_jar import eos_jar; assert eos_jar().name.endswith('-${VERSION}.jar')"
# The driver's main file (the SparkApplication's mainApplicationFile); tests/k8s/test_operator.py
# runs this same file with spark-submit.
COPY docker/runner.py /opt/streamlets/runner.py

WORKDIR /opt/spark/work-dir
USER 185

# A driver serves its metrics on 9464 (/metrics; STREAMLETS_METRICS_PORT, 0 or off: none) and
# Spark's UI with its PrometheusServlet endpoints on 4040 (README, "Metrics on a cluster").
EXPOSE 4040 9464
ENTRYPOINT ["/opt/entrypoint.sh"]
CMD ["python3", "-m", "streamlets.runner", "--help"]
