# The Streamlets on Spark operator (kopf): `kopf run -m streamlets_operator ...` (see the Helm
# chart's deployment.yaml for the arguments). Build from the repository root:
#   docker build -f docker/operator.Dockerfile -t streamlets-operator:0.1.0 .
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp

WORKDIR /opt/streamlets
COPY pyproject.toml README.md ./
COPY streamlets/ streamlets/
COPY blueprint/ blueprint/
COPY charts/streamlets-operator/crds/ charts/streamlets-operator/crds/
COPY operator/ operator/
# The package with the operator (streamlets_operator, from operator/) and its dependencies (kopf,
# the Kubernetes and Kafka clients), installed from the wheel: no PYTHONPATH patch.
RUN pip install ".[operator]" \
 && cd / && python -c "import kopf, blueprint, streamlets, streamlets_operator"

# Non-root, no shell login, nothing writable but /tmp (the chart mounts an emptyDir there and
# sets readOnlyRootFilesystem).
RUN groupadd --system --gid 10001 streamlets \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin streamlets
USER 10001:10001

EXPOSE 8080 8081
ENTRYPOINT ["kopf", "run", "--module=streamlets_operator"]
CMD ["--all-namespaces", "--liveness=http://0.0.0.0:8080/healthz"]
