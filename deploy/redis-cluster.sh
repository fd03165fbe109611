#!/usr/bin/env bash
# A local Redis Cluster of N masters (no replicas unless --replicas R), for tests and
# for trying solrace on a cluster: one redis-server per port, all on 127.0.0.1, each
# with its own directory under DIR (nodes.conf, AOF, log, pid), joined with
# `redis-cli --cluster create`, and waited for until CLUSTER INFO says cluster_state:ok.
#
#   bash deploy/redis-cluster.sh start DIR PORT... [--replicas R] [--conf FILE]
#   bash deploy/redis-cluster.sh stop DIR
#   bash deploy/redis-cluster.sh url PORT...
#   bash deploy/redis-cluster.sh spare-ports N
#
#   start    start one redis-server per PORT (at least 3 masters, plus R replicas per
#            master when --replicas R: then give 3 * (R + 1) ports), create the cluster,
#            wait for cluster_state:ok, print its solrace URL on the last line
#            (redis+cluster://127.0.0.1:PORT,...); interrupted (Ctrl-C: 130, SIGTERM:
#            143) or failed before that, it stops the servers it started and removes
#            what it made (a DIR or DIR/PORT that was there before is kept)
#   stop     kill every server started in DIR, then remove DIR; a pid file whose pid
#            is not a redis-server on its directory's port run from that directory (a
#            stale one: after a reboot its pid may be any process's; or a copy's) is
#            said in one line and its pid left running
#   url      print the solrace URL for these ports
#   spare-ports  print N (1 to 100) ports where nothing listens, nor on PORT+10000 (each node
#            also listens on its cluster bus port, PORT+10000); both stay below the
#            kernel's ephemeral range, so an outgoing connection cannot hold either
#   --conf FILE   a redis.conf to load first (e.g. deploy/redis.conf for AOF, always)
#
# Example (what .ci/run does):
#   bash deploy/redis-cluster.sh start /tmp/solrace-cluster 7101 7102 7103
#   SOLRACE_TEST_CLUSTER_URL=redis+cluster://127.0.0.1:7101 .venv/bin/python -m pytest tests/store
#   bash deploy/redis-cluster.sh stop /tmp/solrace-cluster
#
# A PORT is 1 to 55535 (its bus port, PORT+10000, is a port too), --replicas 0 to 5.
# Needs redis-server and redis-cli (Redis >= 7). Exit status: 0 done, 1 failed, 2 usage
# (a bad argument: one line, before anything starts).
set -euo pipefail

usage() { sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; }  # the comment above
die() { echo "redis-cluster.sh: $*" >&2; exit 1; }
bad() { echo "redis-cluster.sh: $*" >&2; exit 2; }  # a bad argument: usage, status 2

#: Ports at most: each node's cluster bus listens on PORT+10000, a port too.
MAX_PORT=55535

whole_in() {  # whole_in LOW HIGH TEXT: 0 when TEXT is a whole number LOW to HIGH
    case "$3" in ''|*[!0-9]*) return 1 ;; esac
    [ "${#3}" -le 5 ] && (( 10#$3 >= $1 && 10#$3 <= $2 ))  # bash's arithmetic wraps past 2**63
}

check_port() {  # check_port TEXT: a port a node (and its bus) can listen on, else status 2
    whole_in 1 "$MAX_PORT" "$1" \
        || bad "not a port: '$1' (1 to $MAX_PORT: its cluster bus port, PORT+10000, is a port too)"
}

value_of() {  # value_of FLAG ARGS...: the flag's value, else one line and status 2
    [ $# -ge 2 ] || bad "$1 needs a value"
    printf '%s' "$2"
}

url_of() {  # url_of PORT...: the solrace URL naming every given node
    local out="" port
    for port in "$@"; do out+="${out:+,}127.0.0.1:$port"; done
    echo "redis+cluster://$out"
}

answers() { redis-cli -p "$1" ping 2>/dev/null | grep -q PONG; }

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

spare_ports() {  # spare_ports N: N free ports whose bus ports are free too
    # A bus port inside the ephemeral range (32768-60999 by default) can be taken at
    # any moment by a client socket's local end, and redis-server then fails to bind:
    # pick PORT and PORT+10000 both below the range's first port.
    local n="$1" found=() port low span
    low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    span=$(( low - 10000 - 10000 ))
    [ "$span" -gt 0 ] || die "the ephemeral port range starts too low ($low) for spare ports"
    for _ in $(seq 1000); do
        port=$(( 10000 + RANDOM % span ))
        case " ${found[*]} " in  # neither this port nor its bus port is a pick's
            *" $port "*|*" $(( port + 10000 )) "*|*" $(( port - 10000 )) "*) continue ;;
        esac
        listening "$port" || listening $(( port + 10000 )) || found+=("$port")
        [ "${#found[@]}" -ge "$n" ] && { echo "${found[*]}"; return 0; }
    done
    die "no $n spare ports found"
}

start() {
    local dir="$1"; shift
    # redis-server changes to its --dir before it opens its --logfile and --pidfile: a
    # relative DIR named them from there, and every server refused to start
    case "$dir" in /*) ;; *) dir="$PWD/$dir" ;; esac
    local replicas=0 conf="" ports=() port
    while [ $# -gt 0 ]; do
        case "$1" in
            --replicas)
                replicas="$(value_of "$@")" || exit 2
                whole_in 0 5 "$replicas" \
                    || bad "--replicas must be a whole number, 0 to 5, not '$replicas'"
                replicas=$(( 10#$replicas )); shift 2 ;;
            --conf)
                conf="$(value_of "$@")" || exit 2
                [ -f "$conf" ] && [ -r "$conf" ] || bad "--conf: cannot read $conf"
                shift 2 ;;
            *) check_port "$1"; ports+=("$(( 10#$1 ))"); shift ;;
        esac
    done
    [ "${#ports[@]}" -ge $(( 3 * (replicas + 1) )) ] \
        || { echo "redis-cluster.sh: need at least $(( 3 * (replicas + 1) )) ports" >&2; exit 2; }
    command -v redis-server >/dev/null || die "redis-server is not installed"
    for port in "${ports[@]}"; do
        ! answers "$port" || die "something already answers on 127.0.0.1:$port"
    done
    # Until the cluster is up, Ctrl-C, SIGTERM or a failure stops what this start began
    # (the servers are daemons: they outlived the script, DIR with them, and the next
    # start on those ports found "something already answers").
    started_dir="$dir"
    [ -d "$dir" ] && dir_was_there=1 || dir_was_there=0
    trap 'undo_start; echo "redis-cluster.sh: interrupted: the servers it started are stopped" >&2; exit 130' INT
    trap 'undo_start; echo "redis-cluster.sh: terminated: the servers it started are stopped" >&2; exit 143' TERM
    trap 'status=$?; [ "$status" -eq 0 ] || undo_start; exit "$status"' EXIT
    mkdir -p "$dir"
    for port in "${ports[@]}"; do
        # A port's directory that was there before is the user's (a cluster's data left
        # by a reboot, say): the clean-up keeps it, and trusts no pid file it held before
        # (its server gone, the pid may be another process's by now).
        if [ -e "$dir/$port" ]; then
            stale_pid["$port"]="$(cat "$dir/$port/redis.pid" 2>/dev/null || true)"
            mkdir -p "$dir/$port"
        else
            made+=("$port")  # first: a Ctrl-C between the two left DIR/PORT, and DIR
            mkdir "$dir/$port"
        fi
        launched+=("$port")
        # shellcheck disable=SC2086  # $conf is empty or one file name
        redis-server ${conf:+"$conf"} --port "$port" --bind 127.0.0.1 --dir "$dir/$port" \
            --cluster-enabled yes --cluster-config-file nodes.conf \
            --cluster-node-timeout 2000 --save "" \
            --daemonize yes --pidfile "$dir/$port/redis.pid" --logfile "$dir/$port/redis.log"
    done
    for port in "${ports[@]}"; do
        for _ in $(seq 200); do answers "$port" && break; sleep 0.05; done
        answers "$port" || die "redis-server on port $port did not start; the end of" \
            "$dir/$port/redis.log: $(tail -n 3 "$dir/$port/redis.log" 2>/dev/null | tr '\n' ' ')"
    done
    local addrs=()
    for port in "${ports[@]}"; do addrs+=("127.0.0.1:$port"); done
    redis-cli --cluster create "${addrs[@]}" --cluster-replicas "$replicas" --cluster-yes \
        >"$dir/create.log" 2>&1 || { cat "$dir/create.log" >&2; die "cluster create failed"; }
    for port in "${ports[@]}"; do
        for _ in $(seq 200); do
            redis-cli -p "$port" cluster info | grep -q 'cluster_state:ok' && break
            sleep 0.05
        done
        redis-cli -p "$port" cluster info | grep -q 'cluster_state:ok' \
            || die "node $port never reached cluster_state:ok"
    done
    if [ "$replicas" -gt 0 ]; then
        # replicas are attached after the masters agree: wait until every node that is
        # not a master has its replication link up (a failover needs a synced replica)
        local want=$(( ${#ports[@]} - ${#ports[@]} / (replicas + 1) )) up
        for _ in $(seq 300); do
            up=0
            for port in "${ports[@]}"; do
                redis-cli -p "$port" info replication | grep -q 'master_link_status:up' \
                    && up=$(( up + 1 ))
            done
            [ "$up" -ge "$want" ] && break
            sleep 0.1
        done
        [ "$up" -ge "$want" ] || die "only $up of $want replicas are in sync"
    fi
    trap - INT TERM EXIT
    url_of "${ports[@]}"
}

launched=()      # the ports whose redis-server this start has launched
made=()          # the ports whose directory this start made (the others were there)
declare -A stale_pid=()  # a port's pid file's content from before this start
started_dir=""
dir_was_there=0
launched_pid() {  # launched_pid PORT: the pid its server wrote, once it has written it
    local pid
    pid="$(cat "$started_dir/$1/redis.pid" 2>/dev/null || true)"
    [ -n "$pid" ] && [ "$pid" != "${stale_pid[$1]:-}" ] && echo "$pid"
}
undone=0
undo_start() {  # stop the servers this start launched, remove what it made
    trap '' INT TERM  # a second Ctrl-C must not cut this short
    # once: the INT/TERM trap's exit runs the EXIT trap, which waited again, a second
    # per server, for the pid files the first clean-up had removed
    [ "$undone" = 0 ] || return 0
    undone=1
    local port pid
    for port in "${launched[@]}"; do
        # a daemon may not have written its pid file yet (or could not start at all):
        # up to 5 s (1 s was too short on a loaded machine: a CI run left DIR behind)
        for _ in $(seq 100); do launched_pid "$port" >/dev/null && break; sleep 0.05; done
        pid="$(launched_pid "$port" || true)"
        if [ -n "$pid" ]; then
            kill -KILL "$pid" 2>/dev/null || true
            for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
        fi
    done
    for port in "${made[@]}"; do rm -rf "${started_dir:?}/$port"; done
    rm -f "$started_dir/create.log"
    [ "$dir_was_there" = 1 ] || rmdir "$started_dir" 2>/dev/null || true
}

serves_port() {  # serves_port PID PORT DIR: 0 when PID is a redis-server on 127.0.0.1:PORT
    # run from DIR. Its command line is its process title, "redis-server 127.0.0.1:PORT
    # [cluster]" (as started, before it sets the title, or with set-proc-title no:
    # "redis-server … --port PORT …"). A --conf whose proc-title-template names no port
    # makes every server look like a stranger: each is said and left running, none
    # killed wrongly. It runs from its --dir: a pid file copied with its directory (cp -r
    # DIR DIR.bak) names the live cluster's servers, on the right ports, which a stop of
    # the copy killed. (Without /proc, the directory is not checked.)
    local cmdline
    case "$1" in ''|*[!0-9]*) return 1 ;; esac
    if [ -d /proc/self ]; then
        cmdline="$(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline")" || return 1
        [ "$(readlink "/proc/$1/cwd" 2>/dev/null)" = "$(cd "$3" 2>/dev/null && pwd -P)" ] \
            || return 1
    else  # no /proc (macOS, BSD)
        cmdline="$(ps -o args= -p "$1" 2>/dev/null)" || return 1
    fi
    case "$cmdline" in redis-server*|*/redis-server*) ;; *) return 1 ;; esac
    case " $cmdline " in *":$2 "*|*" --port $2 "*) return 0 ;; esac
    return 1
}

stop() {
    # SIGKILL, not SHUTDOWN: the directory and its data go anyway, and a graceful
    # shutdown of a master with AOF and replicas can refuse ("Errors trying to
    # SHUTDOWN") and take seconds per server to fall through to a kill.
    local dir="$1" pidfile pid port pids=()
    [ -d "$dir" ] || return 0
    for pidfile in "$dir"/*/redis.pid; do
        [ -f "$pidfile" ] || continue
        pid="$(cat "$pidfile")"
        port="$(basename "$(dirname "$pidfile")")"
        # A pid file outlives its server (a reboot, a kill -9): its pid may be another
        # process's by now, which a kill of every pid listed killed.
        if serves_port "$pid" "$port" "$(dirname "$pidfile")"; then
            pids+=("$pid")
        elif [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
            echo "redis-cluster.sh: $pidfile: pid $pid is not a redis-server on port $port" \
                "run from its directory (a stale pid file): left running" >&2
        else
            echo "redis-cluster.sh: $pidfile: pid ${pid:-(none)} is not running" \
                "(a stale pid file)" >&2
        fi
    done
    if [ ${#pids[@]} -gt 0 ]; then
        kill -KILL "${pids[@]}" 2>/dev/null || true
        for pid in "${pids[@]}"; do
            for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
        done
    fi
    rm -rf "$dir"
}

[ $# -ge 1 ] || { usage; exit 2; }
command="$1"; shift
case "$command" in
    start) [ $# -ge 2 ] || { usage >&2; exit 2; }; start "$@" ;;
    stop) [ $# -eq 1 ] || { usage >&2; exit 2; }; stop "$1" ;;
    url)
        [ $# -ge 1 ] || { usage >&2; exit 2; }
        for port in "$@"; do check_port "$port"; done
        url_of "$@" ;;
    spare-ports)
        [ $# -eq 1 ] || { usage >&2; exit 2; }
        whole_in 1 100 "$1" || bad "spare-ports: N must be a whole number, 1 to 100, not '$1'"
        spare_ports "$(( 10#$1 ))" ;;
    -h|--help) usage ;;
    *) echo "redis-cluster.sh: unknown command: $command (start, stop, url, spare-ports)" >&2; exit 2 ;;
esac
