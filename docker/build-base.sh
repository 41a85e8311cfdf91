#!/usr/bin/env bash
# Builds the base images our machines use instead of a registry's (`make images` calls it).
#
# Two minimal Debian bookworm root file systems made by debootstrap from Debian's archive, loaded
# with `docker import` and reused when they already exist:
# - $MINIKAFKA_BASE_IMAGE (default minikafka-base:bookworm): Python 3.11 with venv, for the broker
#   image, which runs no Java;
# - $MINIKAFKA_ZK_BASE_IMAGE (default minikafka-base-zookeeper:bookworm): ZooKeeper, a headless JRE
#   and netcat, for the ZooKeeper image and its healthcheck.
#
# Needs root (debootstrap, chroot) and the network to Debian's archive; run once per machine.
set -euo pipefail

IMAGE="${MINIKAFKA_BASE_IMAGE:-minikafka-base:bookworm}"
ZK_IMAGE="${MINIKAFKA_ZK_BASE_IMAGE:-minikafka-base-zookeeper:bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
BROKER_PACKAGES="${MINIKAFKA_BROKER_PACKAGES:-python3,python3-venv,ca-certificates}"  # the bench sets the old JRE layout
ZK_PACKAGES="zookeeper,default-jre-headless,netcat-openbsd,ca-certificates"

if docker image inspect "$IMAGE" >/dev/null 2>&1 && docker image inspect "$ZK_IMAGE" >/dev/null 2>&1; then
  echo "base images $IMAGE, $ZK_IMAGE: present, reused"
  exit 0
fi

SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
if ! command -v debootstrap >/dev/null; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq debootstrap
fi

build() {  # build <tag> <packages>: debootstrap, tidy, docker import; skipped when the image exists
  local tag="$1" packages="$2" rootfs started
  if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "base image $tag: present, reused"
    return
  fi
  started=$(date +%s)
  rootfs="$(mktemp -d "${TMPDIR:-/tmp}/minikafka-rootfs.XXXXXX")"
  echo "base image $tag: debootstrap bookworm into $rootfs (from $MIRROR)"
  $SUDO debootstrap --variant=minbase --include="$packages" bookworm "$rootfs" "$MIRROR" >"$rootfs.log" 2>&1 ||
    { tail -30 "$rootfs.log"; $SUDO rm -rf --one-file-system "$rootfs"; exit 1; }
  rm -f "$rootfs.log"
  # What a container never needs: package lists, caches, docs.
  $SUDO rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/*
  $SUDO tar -C "$rootfs" -c . | docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'ENV LANG=C.UTF-8' \
    -c 'CMD ["/bin/bash"]' \
    - "$tag" >/dev/null
  $SUDO rm -rf --one-file-system "$rootfs"
  echo "base image $tag: built in $(( $(date +%s) - started )) s"
}

# Both at once: each debootstrap mostly waits on the archive and on dpkg. Here both together took
# 89 s; one after the other, in a make test run, 106 + 129 s. The script waits for both and fails
# when either failed.
build "$IMAGE" "$BROKER_PACKAGES" &
broker=$!
build "$ZK_IMAGE" "$ZK_PACKAGES" &
zk=$!
status=0
wait "$broker" || status=$?
wait "$zk" || status=$?
exit "$status"
