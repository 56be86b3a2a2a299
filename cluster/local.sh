#!/usr/bin/env bash
# A two-node Ray cluster on 127.0.0.1: a head and a worker, each its own `ray start`
# process with its own CPUs, token auth on, every port free-chosen and loopback-only.
#
#   cluster/local.sh up DIR     start both nodes; write DIR/cluster.env and print it
#   cluster/local.sh down DIR   stop exactly the two nodes `up` started (by PID)
#
# DIR is a fresh, short folder (Ray's unix sockets live under it and a socket path
# must stay under 107 bytes). It holds the token file, logs, PIDs and Ray's temp dirs.
# Settings (environment): HEAD_CPUS (default 2), WORKER_CPUS (default 2),
# RAY_BIN (default: the repository's .venv/bin/ray, else `ray` on PATH).
#
# Why not `ray stop`: it stops every Ray process of this user on the machine, including
# other people's clusters. Each node here runs `ray start --block` as the leader of its
# own process group; `down` signals that group and nothing else.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HEAD_CPUS="${HEAD_CPUS:-2}"
WORKER_CPUS="${WORKER_CPUS:-2}"
START_TIMEOUT_S="${START_TIMEOUT_S:-180}"
STOP_TIMEOUT_S="${STOP_TIMEOUT_S:-30}"
MAX_DIR_LEN=40

die() { echo "local.sh: $*" >&2; exit 1; }

usage() { die "usage: local.sh up DIR | local.sh down DIR"; }

find_ray() {
    if [[ -n "${RAY_BIN:-}" ]]; then echo "$RAY_BIN"
    elif [[ -x "$HERE/../.venv/bin/ray" ]]; then echo "$HERE/../.venv/bin/ray"
    elif command -v ray >/dev/null; then command -v ray
    else die "no ray executable: set RAY_BIN or install ray"; fi
}

# N distinct free TCP ports on 127.0.0.1 (all held open together, so no duplicates).
free_ports() {
    "$PYTHON" - "$1" <<'EOF'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# Is PID $1 running (a zombie is not)?
alive() { local s; s="$(ps -o stat= -p "$1" 2>/dev/null)" && [[ "$s" != Z* ]]; }

# Live (not zombie) members of process group $1: exited children of a dead leader are
# reparented to init, which may never reap them, and they must not count as running.
group_live() { ps -e -o pgid=,stat= | awk -v g="$1" '$1 == g && $2 !~ /^Z/' | grep -q .; }

# Is PID still the `ray start` we launched (and not a reused PID)?
ours() {
    local pid=$1 cmdline
    alive "$pid" || return 1
    cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)"
    [[ "$cmdline" == *"ray"*"start"*"--block"* && "$cmdline" == *"$DIR"* ]]
}

# Start one node in the background as its own process group; wait until it is up.
start_node() {
    local name=$1; shift
    # Not a group leader when backgrounded from a script, so setsid execs in place:
    # $! is the `ray start` PID and also its process group id.
    setsid "$RAY" start --block "$@" </dev/null >"$DIR/$name.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$DIR/$name.pid"
    local waited=0
    until grep -qs "Ray runtime started" "$DIR/$name.log"; do
        if ! alive "$pid"; then
            tail -n 30 "$DIR/$name.log" >&2
            die "the $name node exited during start-up (log: $DIR/$name.log)"
        fi
        if (( waited >= START_TIMEOUT_S * 2 )); then
            stop_node "$name"
            die "the $name node did not start within ${START_TIMEOUT_S}s (log: $DIR/$name.log)"
        fi
        sleep 0.5
        waited=$((waited + 1))
    done
}

# SIGTERM the `ray start --block` PID alone: its handler stops its children in order
# (~3 s; they also carry PR_SET_PDEATHSIG). SIGTERM to the whole group at once was
# measured to hang the head for over 30 s (raylet and GCS racing the orderly shutdown).
# Whatever is left in the group after STOP_TIMEOUT_S gets SIGKILL.
stop_node() {
    local name=$1 pid
    [[ -f "$DIR/$name.pid" ]] || return 0
    pid="$(cat "$DIR/$name.pid")"
    if ours "$pid"; then
        kill -TERM "$pid" 2>/dev/null || true
        local waited=0
        while group_live "$pid" && (( waited < STOP_TIMEOUT_S * 2 )); do
            sleep 0.5
            waited=$((waited + 1))
        done
        if group_live "$pid"; then
            echo "local.sh: $name node ignored SIGTERM; sending SIGKILL to group $pid" >&2
            kill -KILL -- "-$pid" 2>/dev/null || true
        fi
    elif ! alive "$pid" && group_live "$pid"; then
        # The leader died (e.g. killed by a test) but its children may linger. (A live
        # leader that is not ours is a reused PID: leave it alone.)
        kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    rm -f "$DIR/$name.pid"
}

cmd_up() {
    [[ ! -e "$DIR/head.pid" ]] || die "$DIR already runs a cluster; run: local.sh down $DIR"
    (( ${#DIR} <= MAX_DIR_LEN )) ||
        die "DIR $DIR is ${#DIR} characters; use at most $MAX_DIR_LEN (Ray's socket paths)"
    mkdir -p "$DIR/head" "$DIR/worker"

    # One static token for both nodes and every client (RAY_AUTH_MODE=token).
    (umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$DIR/auth_token")
    export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$DIR/auth_token"
    unset RAY_AUTH_TOKEN RAY_ADDRESS

    local gcs dash client head_agent worker_agent
    read -r gcs dash client head_agent worker_agent <<<"$(free_ports 5)"
    # No --node-ip-address: Ray 2.60 rewrites 127.0.0.1 to the host's own address anyway
    # (services.resolve_ip_for_localhost), and its GCS and raylet gRPC servers listen on
    # all interfaces whatever is given. The token guards them; a firewall must, too.
    local common=(--disable-usage-stats)

    start_node head --head "${common[@]}" --num-cpus "$HEAD_CPUS" \
        --port "$gcs" --temp-dir "$DIR/head" \
        --include-dashboard true --dashboard-host 127.0.0.1 --dashboard-port "$dash" \
        --ray-client-server-port "$client" --dashboard-agent-listen-port "$head_agent" \
        --resources '{"numtune_head": 1}'
    if ! start_node worker --address "127.0.0.1:$gcs" "${common[@]}" \
        --num-cpus "$WORKER_CPUS" --temp-dir "$DIR/worker" \
        --dashboard-agent-listen-port "$worker_agent" --resources '{"numtune_worker": 1}'; then
        stop_node head
        exit 1
    fi

    cat >"$DIR/cluster.env" <<EOF
RAY_AUTH_MODE=token
RAY_AUTH_TOKEN_PATH=$DIR/auth_token
RAY_ADDRESS=127.0.0.1:$gcs
RAY_API_SERVER_ADDRESS=http://127.0.0.1:$dash
NUMTUNE_RAY_ADDRESS=http://127.0.0.1:$dash
LOCAL_RAY_HEAD_PID=$(cat "$DIR/head.pid")
LOCAL_RAY_WORKER_PID=$(cat "$DIR/worker.pid")
EOF
    cat "$DIR/cluster.env"
}

cmd_down() {
    [[ -d "$DIR" ]] || die "no such folder: $DIR"
    stop_node worker
    stop_node head
}

[[ $# -eq 2 ]] || usage
DIR="$(realpath -m "$2")"
RAY="$(find_ray)"
PYTHON="$(dirname "$RAY")/python"
[[ -x "$PYTHON" ]] || PYTHON="$(command -v python3)"
case "$1" in
    up) cmd_up ;;
    down) cmd_down ;;
    *) usage ;;
esac
