# Base image of Streamlets on Spark applications: Spark 4.1.1 (Java 17), Python 3.11, the
# streamlets package, and the runner. The Spark Operator starts driver and executors through
# Spark's /opt/entrypoint.sh (copied from the official Spark image); the driver runs
# /opt/streamlets/runner.py, which is `python -m streamlets.runner --config <run config JSON>`.
#
#   docker build -f docker/streamlet.Dockerfile -t streamlets-spark:0.1.0 .
#
# An application's image adds its streamlet modules on the Python path:
#   FROM streamlets-spark:0.1.0
#   COPY flight_delays/ /opt/app/flight_delays/
# (/opt/app is on PYTHONPATH), then `blueprint build blueprint.yaml --image <that image>`.
ARG SPARK_IMAGE=apache/spark:4.1.1-scala2.13-java17-python3-ubuntu
FROM ${SPARK_IMAGE} AS spark

# The official Spark image has Python 3.10; the package needs 3.11.
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless tini procps bash \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s /usr/bin/tini /sbin/tini

COPY --from=spark /opt/spark /opt/spark
COPY --from=spark /opt/entrypoint.sh /opt/decom.sh /opt/

ENV SPARK_HOME=/opt/spark \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    PYSPARK_PYTHON=python3 \
    PYSPARK_DRIVER_PYTHON=python3 \
    PYTHONPATH=/opt/app \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /opt/streamlets
COPY pyproject.toml README.md ./
COPY streamlets/ streamlets/
COPY blueprint/ blueprint/
# The driver's main file; tests/k8s/test_operator.py runs this same file with spark-submit.
COPY docker/runner.py /opt/streamlets/runner.py
# pyspark from PyPI is the same 4.1.1 as /opt/spark: the driver's Python and the JVM agree.
RUN pip install . \
 && mkdir -p /opt/app \
 && python -c "import streamlets.runtime.runner"

# Spark's conventional user (the entrypoint adds it to /etc/passwd when missing).
RUN groupadd --system --gid 185 spark \
 && useradd --system --uid 185 --gid 185 --home-dir /opt/spark --shell /usr/sbin/nologin spark \
 && chown -R 185:185 /opt/app
WORKDIR /opt/spark/work-dir
RUN chown 185:185 /opt/spark/work-dir
USER 185

# A driver serves its metrics on 9464 (/metrics; STREAMLETS_METRICS_PORT, 0 or off: none) and
# Spark's UI with its PrometheusServlet endpoints on 4040 (README, "Metrics on a cluster").
EXPOSE 4040 9464
ENTRYPOINT ["/opt/entrypoint.sh"]
CMD ["python3", "-m", "streamlets.runner", "--help"]
