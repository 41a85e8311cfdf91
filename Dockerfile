# The minikafka broker image, configured through KAFKA_* environment variables
# (KAFKA_BROKER_ID -> broker.id, KAFKA_ZOOKEEPER_CONNECT -> zookeeper.connect, ...).
#
# `make images` builds it. Elsewhere it starts from the official Python image; on machines without a
# registry `make images` passes BASE_IMAGE=minikafka-base:bookworm (docker/build-base.sh, debootstrap).
# Nothing here uses the network: the project, its compiled record validator and their dependencies
# come in as wheels built on the host into docker/wheels/, installed with --no-index.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}
COPY docker/wheels /tmp/wheels
RUN python3 -m venv /opt/minikafka \
 && /opt/minikafka/bin/pip install --no-cache-dir --no-index --find-links /tmp/wheels minikafka minikafka-native \
 && rm -rf /tmp/wheels \
 && mkdir -p /var/lib/minikafka
ENV PATH=/opt/minikafka/bin:$PATH PYTHONUNBUFFERED=1
VOLUME /var/lib/minikafka
EXPOSE 9092
ENTRYPOINT ["minikafka", "broker", "--env-config"]
