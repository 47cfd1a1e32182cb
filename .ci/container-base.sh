#!/usr/bin/env bash
# container-base.sh (from the team's shared tools): make this machine able to build and run the project's
# docker-compose.yml without Docker Hub, using podman + podman-compose.
#
# What it does (idempotent, run as root):
#   1. installs podman, podman-compose, runc and debootstrap from Debian;
#   2. configures podman for this kind of machine: the runc runtime (crun
#      refuses the hybrid cgroup layout here) and default ulimits that the
#      machine allows (podman's defaults cannot be set here);
#   3. builds a minimal Debian 12 root file system with debootstrap and
#      imports it as the images debian:bookworm-slim and debian:bookworm,
#      so a Dockerfile that starts `FROM debian:bookworm-slim` builds
#      offline (apt inside the build reaches Debian's mirror as usual).
#
# Afterwards: `podman-compose build`, `podman-compose up -d`,
# `podman-compose ps`, `podman-compose logs`, `podman-compose down`.
# Notes seen on this kind of machine:
#   - `podman-compose up --abort-on-container-exit` does not return; use
#     `up -d`, poll, then `down`.
#   - service names resolve between containers (aardvark-dns).
#   - podman-compose 1.0.3 accepts `up --scale SERVICE=N` but starts one
#     container; `deploy: replicas: N` in the compose file does start N
#     (Docker Compose honours both).
set -euo pipefail

need=()
for p in podman podman-compose runc debootstrap; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if ((${#need[@]})); then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi

mkdir -p /etc/containers
conf=/etc/containers/containers.conf
if ! grep -q 'runtime = "runc"' "$conf" 2>/dev/null; then
  cat >"$conf" <<'CONF'
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"
CONF
fi

if ! podman image exists docker.io/library/debian:bookworm-slim; then
  root=$(mktemp -d /tmp/bookworm-rootfs.XXXXXX)
  debootstrap --variant=minbase bookworm "$root" >/tmp/container-base-debootstrap.log 2>&1 \
    || { echo "debootstrap failed: see /tmp/container-base-debootstrap.log" >&2; exit 1; }
  tar -C "$root" -c . | podman import - docker.io/library/debian:bookworm-slim >/dev/null
  podman tag docker.io/library/debian:bookworm-slim docker.io/library/debian:bookworm
  rm -rf "$root"
fi
podman run --rm docker.io/library/debian:bookworm-slim true
echo "container-base: ready (podman $(podman --version | awk '{print $3}'), base image debian:bookworm-slim)"
