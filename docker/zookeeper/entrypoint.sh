#!/bin/sh
# Starts one ZooKeeper server of the compose cluster's ensemble (or a standalone one).
#   ZOO_MY_ID    this server's id (1-255), written to /data/myid
#   ZOO_SERVERS  the ensemble, space separated: "server.1=zookeeper1:2888:3888;2181 server.2=..."
#   ZOO_CONF_DIR where zoo.cfg, log4j.properties and (optionally) jaas.conf are read
#                (default /etc/minikafka-zookeeper; the secured compose cluster mounts its own)
# Without ZOO_SERVERS the server runs standalone.
set -eu
conf_dir="${ZOO_CONF_DIR:-/etc/minikafka-zookeeper}"
conf=/tmp/zoo.cfg
cp "$conf_dir/zoo.cfg" "$conf"
if [ -n "${ZOO_SERVERS:-}" ]; then
  echo "${ZOO_MY_ID:?ZOO_SERVERS needs ZOO_MY_ID}" > /data/myid
  # peers listen on every address of the container, not only the one their name resolves to
  echo "quorumListenOnAllIPs=true" >> "$conf"
  for server in $ZOO_SERVERS; do echo "$server" >> "$conf"; done
fi
set -- -Xms32m -Xmx128m -XX:+UseSerialGC "-Dlog4j.configuration=file:$conf_dir/log4j.properties"
if [ -f "$conf_dir/jaas.conf" ]; then
  set -- "$@" "-Djava.security.auth.login.config=$conf_dir/jaas.conf"
fi
exec java "$@" \
  -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar \
  org.apache.zookeeper.server.quorum.QuorumPeerMain "$conf"
