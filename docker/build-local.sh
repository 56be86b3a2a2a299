#!/usr/bin/env bash
# Build numtune's two images on a Debian machine without Docker Hub or a Docker daemon,
# then start them and check them. As root, from anywhere:
#   bash docker/build-local.sh            # or: make images
# 1. apt: podman, buildah, debootstrap, runc (crun refuses this host's hybrid cgroups).
# 2. base: debootstrap bookworm (minbase + python3 3.11, python3-venv, ca-certificates),
#    a venv at /opt/venv first on PATH (`python`, `pip`, like python:3.11-slim's
#    /usr/local/bin), imported as BASE_IMAGE; the builds name it by its digest.
# 3. the images: podman build of docker/Dockerfile.{service,ray} with only build args
#    changed: PYTHON_IMAGE=<the local base @digest>, TORCH_INDEX_URL=file:///mnt (a
#    one-wheel index of TORCH_WHEEL, mounted at /mnt for the build, not copied in).
#    The host's CA bundle is mounted over the base's for the build, so pip trusts what the
#    host trusts (a TLS-inspecting proxy); nothing mounted is committed.
# 4. checks: the Ray image runs `ray --version` and imports jobs, ray, torch, deepspeed;
#    a Ray head from it and the service image share a private podman network (as in
#    compose; nothing of Ray's published); the service answers GET /healthz on
#    127.0.0.1:CHECK_PORT, then GET /readyz 200 (SQLite under NUMTUNE_HOME, Ray reached,
#    throwaway tokens).
# Env: NUMTUNE_IMAGE_WORK (default /var/tmp/numtune-images: rootfs, index, logs; never the
# repository), DEBIAN_MIRROR, TORCH_WHEEL, CHECK_PORT (18080), SKIP_APT=1, REBUILD_BASE=1.
# Without TORCH_WHEEL on disk the builds use the Dockerfiles' default TORCH_INDEX_URL.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${NUMTUNE_IMAGE_WORK:-/var/tmp/numtune-images}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE=bookworm
BASE_IMAGE="${BASE_IMAGE:-localhost/numtune-base:bookworm-py3.11}"
CHECK_PORT="${CHECK_PORT:-18080}"
VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/pyproject.toml" | head -n1)"
TORCH_VERSION="$(sed -n 's/^TORCH_VERSION="\(.*\)"$/\1/p' "$ROOT/docker/install.sh")"
TORCH_WHEEL="${TORCH_WHEEL:-/opt/wheels/torch-${TORCH_VERSION}+cpu-cp311-cp311-manylinux_2_28_x86_64.whl}"
# This host's hard limits refuse podman's defaults (nofile 1048576, nproc 4194304).
ULIMITS=("nofile=16384:16384" "nproc=32768:32768")
TIMINGS=()

say() { printf '\n== %s\n' "$*"; }
die() { printf 'build-local: %s\n' "$*" >&2; exit 1; }
timed() {  # timed LABEL CMD...: run CMD, note its wall time under LABEL
    local label="$1" start=$SECONDS
    shift
    "$@"
    TIMINGS+=("$label: $((SECONDS - start)) s")
    printf '   %s took %d s\n' "$label" "$((SECONDS - start))"
}

[ "$(id -u)" = 0 ] || die "run as root (apt, debootstrap and rootful podman)"
if [ -z "$VERSION" ] || [ -z "$TORCH_VERSION" ]; then die "version not found in pyproject/install.sh"; fi
mkdir -p "$WORK"

install_tools() {
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        podman buildah debootstrap runc uidmap fuse-overlayfs slirp4netns \
        containernetworking-plugins netavark aardvark-dns iptables conmon curl ca-certificates
}

# podman reads only this file when CONTAINERS_CONF names it: runc, and ulimits it may set.
write_containers_conf() {
    local list
    list="$(printf '"%s", ' "${ULIMITS[@]}")"
    cat >"$WORK/containers.conf" <<EOF
[containers]
default_ulimits = [${list%, }]

[engine]
runtime = "runc"
EOF
    export CONTAINERS_CONF="$WORK/containers.conf"
}

make_base() {
    local rootfs="$WORK/rootfs"
    rm -rf "$rootfs"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        "$SUITE" "$rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
        || { tail -n 20 "$WORK/debootstrap.log" >&2; die "debootstrap failed"; }
    chroot "$rootfs" python3 -m venv /opt/venv
    chroot "$rootfs" /opt/venv/bin/python -m pip --version
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
        "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/usr/share/doc/* \
        "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/* "$rootfs"/var/log/*.log \
        "$rootfs"/etc/hostname
    : >"$rootfs/etc/resolv.conf"  # podman writes its own at run time
    tar --numeric-owner -C "$rootfs" -cf - . | podman import \
        --change 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["python3"]' \
        --message "debootstrap $SUITE minbase + python3 venv ($MIRROR)" \
        - "$BASE_IMAGE"
    rm -rf "$rootfs"
}

torch_index() {  # a PEP 503 index holding one wheel, mounted at /mnt for the builds
    local dir="$WORK/torch-index/torch" name
    name="$(basename "$TORCH_WHEEL")"
    mkdir -p "$dir"
    [ -f "$dir/$name" ] || cp -l "$TORCH_WHEEL" "$dir/$name" 2>/dev/null || cp "$TORCH_WHEEL" "$dir/$name"
    printf '<!DOCTYPE html><html><body><a href="%s">%s</a></body></html>\n' "$name" "$name" \
        >"$dir/index.html"
}

build() {  # build NAME: docker/Dockerfile.NAME -> numtune/NAME:VERSION
    local name="$1"
    # docker format: OCI images would drop the Dockerfiles' HEALTHCHECK.
    local args=(--format docker --network "${BUILD_NETWORK:-private}" --build-arg "PYTHON_IMAGE=$BASE_REF"
        --ignorefile "$ROOT/docker/Dockerfile.$name.dockerignore"
        -f "$ROOT/docker/Dockerfile.$name" -t "numtune/$name:$VERSION")
    if [ -f "$TORCH_WHEEL" ]; then
        # /mnt: a folder both bases have and leave empty, so no mount point stays behind.
        args+=(--build-arg "TORCH_INDEX_URL=file:///mnt" -v "$WORK/torch-index:/mnt:ro")
    fi
    if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
        args+=(-v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
    fi
    podman build "${args[@]}" "$ROOT" >"$WORK/build-$name.log" 2>&1 \
        || { tail -n 40 "$WORK/build-$name.log" >&2; die "build of $name failed (log: $WORK/build-$name.log)"; }
    tail -n 3 "$WORK/build-$name.log"
}

CHECK_NET=numtune-check
cleanup_checks() {
    podman rm -f numtune-check-service numtune-check-ray >/dev/null 2>&1 || true
    podman network rm "$CHECK_NET" >/dev/null 2>&1 || true
}

check_ray() {  # the Ray image's tools, then a head on a private network (nothing published)
    podman run --rm "numtune/ray:$VERSION" ray --version
    podman run --rm "numtune/ray:$VERSION" python -c \
        "import jobs, ray, torch, deepspeed, os; print('ray', ray.__version__, 'torch', torch.__version__, 'deepspeed', deepspeed.__version__, 'uid', os.getuid())"
    podman network create "$CHECK_NET" >/dev/null
    podman run -d --name numtune-check-ray --network "$CHECK_NET" --shm-size 2g \
        -e RAY_AUTH_TOKEN "numtune/ray:$VERSION" \
        ray start --head --block --port=6379 --dashboard-host=0.0.0.0 --dashboard-port=8265 \
        --num-cpus=1 --disable-usage-stats >/dev/null
}

check_service() {  # /healthz on loopback, then /readyz against the Ray head above
    local url="http://127.0.0.1:$CHECK_PORT" status=""
    podman run -d --name numtune-check-service --network "$CHECK_NET" \
        -p "127.0.0.1:$CHECK_PORT:8080" -e NUMTUNE_ADMIN_TOKEN -e RAY_AUTH_TOKEN \
        -e NUMTUNE_RAY_ADDRESS=http://numtune-check-ray:8265 "numtune/service:$VERSION" >/dev/null
    for _ in $(seq 1 90); do
        curl -fsS -o /dev/null "$url/healthz" 2>/dev/null && break
        sleep 1
    done
    curl -fsS -i "http://127.0.0.1:$CHECK_PORT/healthz" | tee "$WORK/healthz.txt" \
        || { podman logs numtune-check-service >&2; die "/healthz did not answer"; }
    echo
    podman exec numtune-check-service id
    podman healthcheck run numtune-check-service 2>/dev/null || die "the image's HEALTHCHECK failed"
    echo "HEALTHCHECK: healthy"
    for _ in $(seq 1 120); do  # the Ray head may still be starting
        status="$(curl -sS -o "$WORK/readyz.txt" -w '%{http_code}' \
            -H "Authorization: Bearer $NUMTUNE_ADMIN_TOKEN" "$url/readyz" || true)"
        [ "$status" = 200 ] && break
        sleep 1
    done
    printf 'GET /readyz: %s ' "$status"
    cat "$WORK/readyz.txt"
    echo
    [ "$status" = 200 ] || { podman logs numtune-check-service >&2; die "/readyz not ready"; }
}

say "1/5 tools (podman, buildah, debootstrap, runc)"
if [ "${SKIP_APT:-0}" = 1 ]; then echo "   SKIP_APT=1"; else timed apt install_tools; fi
podman --version
buildah --version
write_containers_conf

say "2/5 base image $BASE_IMAGE"
if [ "${REBUILD_BASE:-0}" = 1 ] || ! podman image exists "$BASE_IMAGE"; then
    timed debootstrap+import make_base
else
    echo "   exists (REBUILD_BASE=1 makes it again)"
fi
BASE_REF="${BASE_IMAGE%:*}@$(podman image inspect --format '{{.Digest}}' "$BASE_IMAGE")"
echo "   PYTHON_IMAGE=$BASE_REF"

say "3/5 images numtune/service:$VERSION and numtune/ray:$VERSION"
if [ -f "$TORCH_WHEEL" ]; then
    torch_index
    echo "   torch from $TORCH_WHEEL"
else
    echo "   no $TORCH_WHEEL: torch from the Dockerfiles' default TORCH_INDEX_URL"
fi
timed "build service" build service
timed "build ray" build ray

say "4/5 checks"
# Throwaway tokens for the checks, given to the containers by name (-e NAME): in no podman
# command line and in no image.
NUMTUNE_ADMIN_TOKEN="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
RAY_AUTH_TOKEN="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export NUMTUNE_ADMIN_TOKEN RAY_AUTH_TOKEN
cleanup_checks
trap cleanup_checks EXIT
timed "ray checks" check_ray
timed "service checks" check_service
cleanup_checks
trap - EXIT

say "5/5 summary"
echo "base: $BASE_REF"
for image in "$BASE_IMAGE" "numtune/service:$VERSION" "numtune/ray:$VERSION"; do
    podman image inspect --format "$image id {{.Id}} digest {{.Digest}} {{.Size}} bytes" "$image"
done
printf '%s\n' "${TIMINGS[@]}"
