# The Streamlets on Spark operator (kopf): `kopf run --module=streamlets_operator ...` (see the
# Helm chart's deployment.yaml for the arguments). Build from the repository root:
#   docker build -f docker/operator.Dockerfile -t streamlets-operator:0.1.0 .
#   dev/images (podman, FROM a debootstrapped Debian: --build-arg BASE_IMAGE=localhost/streamlets/python:3.11-bookworm)
# BASE_IMAGE: Debian bookworm with Python 3.11 (python:3.11-slim-bookworm, or Debian's python3
# and python3-venv).
#
# The operator renders and applies manifests and talks to Kafka's admin API; it never runs Spark,
# so PySpark and the libraries only Spark uses (pandas, PyArrow) stay out: the image is a few
# hundred MB smaller (tests/integration/test_images.py runs the operator's modules in it).
ARG BASE_IMAGE=python:3.11-slim-bookworm

# The requirements alone: their layer is reused while they stay the same, whatever else changes.
FROM ${BASE_IMAGE} AS requirements
COPY pyproject.toml docker/requirements.py /tmp/
RUN python3 /tmp/requirements.py /tmp/pyproject.toml --extra operator \
      --without pyspark --without pandas --without pyarrow > /tmp/requirements.txt

FROM ${BASE_IMAGE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="streamlets-operator" \
      org.opencontainers.image.description="Streamlets on Spark: the kopf operator" \
      org.opencontainers.image.version="${VERSION}"

RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/python -c "import sys; assert sys.version_info[:2] == (3, 11), sys.version"
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp

# PIP_CERT: the system's CA certificates (a base image may add a proxy's), not pip's own bundle.
COPY --from=requirements /tmp/requirements.txt /tmp/requirements.txt
RUN --mount=type=cache,id=streamlets-pip,target=/var/cache/pip,sharing=locked \
    PIP_CACHE_DIR=/var/cache/pip PIP_CERT=/etc/ssl/certs/ca-certificates.crt pip install -q -r /tmp/requirements.txt "setuptools>=68" \
 && rm /tmp/requirements.txt

# The package with the operator (streamlets_operator, from operator/), installed from the wheel
# without its dependencies (above): no PYTHONPATH patch. The sources change most often: last.
COPY pyproject.toml README.md /tmp/src/
COPY streamlets/ /tmp/src/streamlets/
COPY blueprint/ /tmp/src/blueprint/
# blueprint/crds/ links to the chart's CRD, the one copy of it.
COPY charts/streamlets-operator/crds/ /tmp/src/charts/streamlets-operator/crds/
COPY operator/ /tmp/src/operator/
RUN PIP_NO_CACHE_DIR=1 pip install -q --no-deps --no-build-isolation /tmp/src \
 && rm -rf /tmp/src \
 && cd / && python -c "import kopf, blueprint, streamlets, streamlets_operator, streamlets_operator.handlers"

# Non-root, no shell login, nothing writable but /tmp (the chart mounts an emptyDir there and
# sets readOnlyRootFilesystem).
RUN echo 'streamlets:x:10001:10001:streamlets operator:/tmp:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'streamlets:x:10001:' >> /etc/group
USER 10001:10001

EXPOSE 8080 8081
ENTRYPOINT ["kopf", "run", "--module=streamlets_operator"]
CMD ["--all-namespaces", "--liveness=http://0.0.0.0:8080/healthz"]
