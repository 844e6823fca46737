# The kubeflow Spark Operator's controller and webhook (v2.x), for clusters that cannot pull its
# published image (ghcr.io/kubeflow/spark-operator/controller): the same layout as upstream's
# Dockerfile (a Spark image with the operator binary; the controller runs spark-submit from
# $SPARK_HOME/bin to start drivers), on our streamlet image, so the spark-submit that starts a
# driver is the same Spark 4.2.0 the driver runs. The binary is built from the operator's Go
# module by dev/k8s-env and passed in the build context:
#
#   podman build -f docker/spark-operator.Dockerfile --build-arg SPARK_IMAGE=<streamlet image> \
#     -t streamlets/spark-operator:v2.5.1 <folder holding spark-operator>
ARG SPARK_IMAGE=localhost/streamlets/spark:0.1.0
FROM ${SPARK_IMAGE}

USER root
# The webhook writes its self-made serving certificate here; the chart mounts an emptyDir.
RUN mkdir -p /etc/k8s-webhook-server/serving-certs /home/spark \
 && chown -R 185:185 /etc/k8s-webhook-server/serving-certs /home/spark
COPY spark-operator /usr/bin/spark-operator
USER 185
ENTRYPOINT ["/usr/bin/tini", "-s", "--", "/usr/bin/spark-operator"]
