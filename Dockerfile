# The minikafka broker image: configured through KAFKA_* environment variables
# (KAFKA_BROKER_ID -> broker.id, KAFKA_ZOOKEEPER_CONNECT -> zookeeper.connect, ...).
FROM python:3.11-slim
WORKDIR /opt/minikafka
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY storage ./storage
COPY broker ./broker
COPY controller ./controller
COPY zk ./zk
COPY client ./client
COPY local_cluster ./local_cluster
COPY minikafka_cli ./minikafka_cli
# (native/, the compiled record validator, needs cargo: without it the broker validates records with
# its Python reference, protocol/record_validation.py)
RUN pip install --no-cache-dir . && mkdir -p /var/lib/minikafka
VOLUME /var/lib/minikafka
EXPOSE 9092
ENTRYPOINT ["minikafka", "broker", "--env-config"]
