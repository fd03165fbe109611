#!/usr/bin/env bash
# solrace on one machine, no containers: Redis (a private redis-server with AOF, from
# deploy/redis.conf, or with --cluster a Redis Cluster of three such masters started
# with deploy/redis-cluster.sh), N nodes, nginx in front as the WebSocket load
# balancer, and two bots racing through it to the end of a race; then the result, checked with
# `solrace verify`. Everything listens on 127.0.0.1 on spare ports, lives in a scratch
# directory, and is stopped and removed on exit, whatever happens.
#
#   bash deploy/local.sh [--nodes N] [--cluster] [--venv DIR] [--keep-running]
#
#   --nodes N        nodes behind nginx, 1 to 32 (default 3, or $SOLRACE_LOCAL_NODES)
#   --cluster        Redis Cluster (three masters, AOF, appendfsync always) instead of
#                    one standalone Redis; the nodes get a redis+cluster:// URL
#   --venv DIR       virtual environment with solrace installed (default: .venv)
#   --keep-running   after the race, keep everything up until Ctrl-C (try it yourself:
#                    solrace quick --server ws://127.0.0.1:LB_PORT)
#
# Needs redis-server and nginx; nginx is installed with apt-get when missing (as root,
# or with sudo). Exit status: 0 the race ended and verified, 1 otherwise, 2 a bad
# argument (said in one line before anything starts; --nodes or --venv given twice is
# one), 130 interrupted (Ctrl-C), 143 terminated (SIGTERM) — everything it started
# stopped and removed first.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
nodes="${SOLRACE_LOCAL_NODES:-3}"
nodes_from=SOLRACE_LOCAL_NODES  # what a bad value is said as: the variable, or the flag
venv="$repo/.venv"
keep=0
cluster=0
#: Nodes at most: each is a Python process of some 60 MB, started one after another.
max_nodes=32
value_of() {  # value_of FLAG ARGS...: the flag's value, or one line and status 2
    [ $# -ge 2 ] || { echo "local.sh: $1 needs a value (see --help)" >&2; exit 2; }
    printf '%s' "$2"
}
given=" "  # the flags with a value given so far: a second one is refused
once() {  # once FLAG: one line and status 2 if FLAG was given already (which one was meant?)
    case "$given" in *" $1 "*) echo "local.sh: $1 given twice: give it once (see --help)" >&2; exit 2 ;; esac
    given="$given$1 "
}
while [ $# -gt 0 ]; do
    case "$1" in
        --nodes) once --nodes; nodes="$(value_of "$@")" || exit 2; nodes_from=--nodes; shift 2 ;;
        --cluster) cluster=1; shift ;;
        --venv) once --venv; venv="$(value_of "$@")" || exit 2; shift 2
            # empty (an unset variable's ''): "$venv/bin" would be /bin
            [ -n "$venv" ] || { echo "local.sh: --venv needs a directory, not an empty value (see --help)" >&2; exit 2; } ;;
        --keep-running) keep=1; shift ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;  # the comment above
        *) echo "local.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done
# digits only, a few of them (bash's arithmetic wraps past 2**63), then the range
case "$nodes" in ''|*[!0-9]*) nodes_ok=0 ;; *) nodes_ok=1 ;; esac
if [ "$nodes_ok" = 1 ] && [ "${#nodes}" -le 3 ] && (( 10#$nodes >= 1 && 10#$nodes <= max_nodes )); then
    nodes=$(( 10#$nodes ))
else
    # at most its first 40 characters, as solrace.quoting quotes what was typed
    shown="'${nodes:0:40}'"
    if [ "${#nodes}" -gt 40 ]; then
        shown="$shown… ($(printf '%d' "${#nodes}" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta') characters)"
    fi
    echo "local.sh: $nodes_from must be a whole number, 1 to $max_nodes, not $shown" >&2
    exit 2
fi
bin="$venv/bin"
for tool in python solrace-server solrace; do
    [ -x "$bin/$tool" ] || { echo "local.sh: $bin/$tool missing (--venv DIR)" >&2; exit 2; }
done

say() { printf 'local: %s\n' "$*"; }

# ------------------------------------------------------------------ clean-up
work="$(mktemp -d "${TMPDIR:-/tmp}/solrace-local.XXXXXX")"
chmod 711 "$work"   # nginx workers (another user) only traverse it
pids=()             # every process started here, stopped in reverse order
cleanup() {
    local status=$? i
    # Ignored, not reset: `timeout` and a terminal's Ctrl-C signal the whole process
    # group, and a second TERM must not end this clean-up half way (it left nodes and
    # the scratch directory behind).
    trap '' INT TERM
    trap - EXIT
    for (( i=${#pids[@]}-1; i>=0; i-- )); do
        kill -TERM "${pids[i]}" 2>/dev/null || true
    done
    for (( i=${#pids[@]}-1; i>=0; i-- )); do
        # nodes drain within 16 s (DRAIN_LIMIT_S and the hand-off); no longer for anyone
        for _ in $(seq 170); do kill -0 "${pids[i]}" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "${pids[i]}" 2>/dev/null || true
        wait "${pids[i]}" 2>/dev/null || true
    done
    if [ "$status" -ne 0 ]; then
        say "failed (status $status); the last lines of each log:"
        for log in "$work"/*.log "$work"/*.out "$work"/nginx/error.log "$work"/redis-cluster/*/redis.log; do
            [ -s "$log" ] && { echo "--- $log"; tail -n 15 "$log"; }
        done
    fi
    # the cluster's servers run daemonized, with pid files in its directory
    [ -d "$work/redis-cluster" ] && bash "$repo/deploy/redis-cluster.sh" stop "$work/redis-cluster"
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

spare_port() {
    "$bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

http_ok() {  # http_ok URL: 0 when it answers 200
    "$bin/python" - "$1" <<'PY' 2>/dev/null
import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=2)
PY
}

wait_until() {  # wait_until SECONDS WHAT COMMAND...: poll every 0.1 s
    local limit=$(( $1 * 10 )) what="$2"; shift 2
    for _ in $(seq "$limit"); do "$@" && return 0; sleep 0.1; done
    echo "local.sh: $what did not come up" >&2
    return 1
}

# ------------------------------------------------------------------ nginx
nginx_bin="$(command -v nginx || true)"
[ -z "$nginx_bin" ] && [ -x /usr/sbin/nginx ] && nginx_bin=/usr/sbin/nginx
if [ -z "$nginx_bin" ]; then
    say "installing nginx with apt-get"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nginx-light >/dev/null \
        || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nginx >/dev/null
    nginx_bin=/usr/sbin/nginx
fi
command -v redis-server >/dev/null || { echo "local.sh: redis-server is not installed (apt-get install redis-server)" >&2; exit 1; }

# ------------------------------------------------------------------ Redis
if [ "$cluster" -eq 1 ]; then
    # three masters, each with deploy/redis.conf (AOF, appendfsync always)
    read -r -a cluster_ports <<<"$(bash "$repo/deploy/redis-cluster.sh" spare-ports 3)"
    redis_url="$(bash "$repo/deploy/redis-cluster.sh" start "$work/redis-cluster" \
        "${cluster_ports[@]}" --conf "$repo/deploy/redis.conf" | tail -n 1)"
    redis_port="${cluster_ports[0]}"
    say "redis   cluster of 3 masters ${cluster_ports[*]} ($(redis-cli -p "$redis_port" cluster info | grep -o 'cluster_state:[a-z]*'), AOF: $(redis-cli -p "$redis_port" config get appendfsync | tail -n 1))"
else
    redis_port="$(spare_port)"
    mkdir -p "$work/redis"
    redis-server "$repo/deploy/redis.conf" --port "$redis_port" --bind 127.0.0.1 \
        --dir "$work/redis" --daemonize no --logfile "$work/redis.log" &
    pids+=($!)
    redis_url="redis://127.0.0.1:$redis_port/0"
    wait_until 10 "redis-server" redis-cli -p "$redis_port" ping >/dev/null
    say "redis   127.0.0.1:$redis_port (AOF: $(redis-cli -p "$redis_port" config get appendfsync | tail -n 1))"
fi

# ------------------------------------------------------------------ nodes
upstream=""
for i in $(seq "$nodes"); do
    port="$(spare_port)"
    SOLRACE_REDIS_URL="$redis_url" SOLRACE_KEY_PREFIX="solrace-local:" \
        "$bin/solrace-server" --host 127.0.0.1 --port "$port" 2>"$work/node$i.log" &
    pids+=($!)
    wait_until 20 "node $i" http_ok "http://127.0.0.1:$port/healthz"
    say "node $i  ws://127.0.0.1:$port ($(grep -o 'durability: [a-z-]*' "$work/node$i.log" | head -n 1))"
    upstream+="        server 127.0.0.1:$port max_fails=2 fail_timeout=5s;"$'\n'
done

# ------------------------------------------------------------------ load balancer
lb_port="$(spare_port)"
mkdir -p "$work/nginx"
chmod 755 "$work/nginx"
UPSTREAM="$upstream" WORK="$work" LB_PORT="$lb_port" "$bin/python" - \
    "$repo/deploy/nginx/local.conf.template" "$work/nginx/nginx.conf" <<'PY'
import os, sys
text = open(sys.argv[1]).read()
for name in ("UPSTREAM", "WORK", "LB_PORT"):
    text = text.replace(f"@{name}@", os.environ[name].rstrip("\n"))
open(sys.argv[2], "w").write(text)
PY
"$nginx_bin" -t -q -p "$work/nginx" -c "$work/nginx/nginx.conf"
"$nginx_bin" -p "$work/nginx" -c "$work/nginx/nginx.conf" &
pids+=($!)
lb="127.0.0.1:$lb_port"
wait_until 10 "nginx" http_ok "http://$lb/healthz"
say "nginx   ws://$lb -> $nodes nodes"

# ------------------------------------------------------------------ two bots
export SOLRACE_CONFIG_DIR="$work/client"   # the bots' saved results stay in the scratch dir
export COLUMNS=100 PYTHONUNBUFFERED=1                  # Ann's room code reaches its file at once
url="ws://$lb"
"$bin/solrace" bot --server "$url" --create --private --racers 2 --min-racers 2 \
    --name Ann --seed 1 --delay 0.01 >"$work/ann.out" 2>"$work/ann.log" &
ann=$!
pids+=($ann)
code_of() { grep -o 'room code: [A-Z0-9]*' "$work/ann.out" | head -n 1 | cut -d' ' -f3; }
has_code() { [ -n "$(code_of)" ]; }
wait_until 20 "Ann's room" has_code
code="$(code_of)"
say "bots    Ann created room $code; Bob joins it"
"$bin/solrace" bot --server "$url" --name Bob --seed 2 --delay 0.01 "$code" \
    >"$work/bob.out" 2>"$work/bob.log" &
bob=$!
pids+=($bob)
ann_status=0 bob_status=0
wait "$ann" || ann_status=$?   # (wait, unlike a foreground command, lets traps run)
wait "$bob" || bob_status=$?
echo "--- Ann"; cat "$work/ann.out"
echo "--- Bob"; cat "$work/bob.out"
[ "$ann_status" -eq 0 ] && [ "$bob_status" -eq 0 ] || {
    echo "local.sh: a bot failed (Ann $ann_status, Bob $bob_status)" >&2; exit 1; }

# ------------------------------------------------------------------ result
race="$(grep -o 'saved as race [^:]*' "$work/ann.out" | cut -d' ' -f4)"
echo "--- solrace verify $race"
"$bin/solrace" verify "$race"
echo "--- WebSocket connections through nginx (101 = upgraded), by node"
grep ' 101 ' "$work/nginx/access.log" | grep -o 'upstream=.*' | sort | uniq -c
say "race over: $race verified"

if [ "$keep" -eq 1 ]; then
    say "still running: solrace quick --server $url   (Ctrl-C stops everything)"
    # The sleep in the background, waited for: bash runs a trap only once the foreground
    # command ends, so a SIGTERM (kill, a supervisor, timeout) waited for a foreground
    # sleep of an hour before anything stopped; `wait` returns at the signal (and the
    # clean-up stops the sleep with the rest).
    while :; do sleep 3600 & pids+=($!); wait $!; done
fi
