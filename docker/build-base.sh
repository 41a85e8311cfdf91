#!/usr/bin/env bash
# Builds the base image our machines use instead of a registry's (`make images` calls it).
#
# A minimal Debian bookworm root file system made by debootstrap from Debian's archive, with what
# the project's images need: Python 3.11 with venv (the broker image), ZooKeeper, a headless JRE and
# netcat (the ZooKeeper image and its healthcheck). It is loaded with `docker import` as
# $MINIKAFKA_BASE_IMAGE (default minikafka-base:bookworm) and reused when it already exists.
#
# Needs root (debootstrap, chroot) and the network to Debian's archive; run once per machine.
set -euo pipefail

IMAGE="${MINIKAFKA_BASE_IMAGE:-minikafka-base:bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PACKAGES="python3,python3-venv,zookeeper,default-jre-headless,netcat-openbsd,ca-certificates"

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "base image $IMAGE: present, reused"
  exit 0
fi

SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
if ! command -v debootstrap >/dev/null; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq debootstrap
fi

ROOTFS="$(mktemp -d "${TMPDIR:-/tmp}/minikafka-rootfs.XXXXXX")"
trap '$SUDO rm -rf --one-file-system "$ROOTFS"' EXIT

started=$(date +%s)
echo "base image $IMAGE: debootstrap bookworm into $ROOTFS (from $MIRROR)"
$SUDO debootstrap --variant=minbase --include="$PACKAGES" bookworm "$ROOTFS" "$MIRROR" >"$ROOTFS.log" 2>&1 ||
  { tail -30 "$ROOTFS.log"; exit 1; }
rm -f "$ROOTFS.log"
# What a container never needs: package lists, caches, docs.
$SUDO rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin "$ROOTFS"/var/cache/apt/archives/*.deb \
  "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/*

$SUDO tar -C "$ROOTFS" -c . | docker import \
  -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  -c 'ENV LANG=C.UTF-8' \
  -c 'CMD ["/bin/bash"]' \
  - "$IMAGE" >/dev/null
echo "base image $IMAGE: built in $(( $(date +%s) - started )) s"
