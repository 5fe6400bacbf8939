# shellcheck shell=bash
# Local clusters for development and tests: `scripts/services.sh cluster …`.
# Sourced by services.sh (it provides log, warn, die, wait_for, show_log,
# tcp_open, amqp_greets, ensure_installed and the user helpers); not run alone.
#
#   Redis Cluster  127.0.0.1:7001–7006 (bus ports 17001–17006): 3 primaries +
#                  3 replicas, cluster-node-timeout 2000 ms, no persistence
#   RabbitMQ       n1@localhost 127.0.0.1:5681, n2 :5682, n3 :5683 (distribution
#                  15681–15683), a private epmd on 127.0.0.1:4380, own cookie
#
# Everything lives under $STOCKD_CLUSTER_DIR (default /tmp/stockd-cluster) and
# is stopped by the pid its files record; the standalone services (Redis 6379,
# RabbitMQ rabbit@localhost on 5672 with the system epmd on 4369) are never
# touched. docs/operations.md, "Local clusters (development)".
#
#   up      start whatever is not running, create the clusters if new, wait
#           until both answer as clusters, create the users; idempotent
#   down    stop every node (shutdown / SIGTERM by pid), remove the data dirs
#   status  one line per node; exit 1 if any is down
#   env     print the STOCKD__… lines that point stockd at the clusters
#   ctl N … rabbitmqctl against node N (n1, n2, n3) with the cluster's cookie
#           and epmd, e.g. `cluster ctl n2 list_queues name type leader`

CLUSTER_DIR=${STOCKD_CLUSTER_DIR:-/tmp/stockd-cluster}

# Redis: 6 nodes so every primary has a replica to fail over to (issue 13's
# failover tests); the bus port of each is port + 10000.
CLUSTER_REDIS_PORTS=(7001 7002 7003 7004 7005 7006)
CLUSTER_REDIS_REPLICAS=1
# Short, so a killed primary is marked failed and its replica promoted in
# about 3 s instead of 15+ s (the default is 15000).
CLUSTER_REDIS_NODE_TIMEOUT_MS=2000
# `no`: while a primary is down only its own slots answer CLUSTERDOWN; the
# other shards keep serving (the default `yes` stops the whole cluster until
# the replica is promoted). The failover tests expect reserves on the other
# slots to go on.
CLUSTER_REDIS_FULL_COVERAGE=no
CLUSTER_REDIS_WAIT=60
# Commands a cluster client needs on top of REDIS_COMMANDS: the slot map
# (redis-rs 1.8.1 reads CLUSTER SLOTS) and ASK redirects during a slot
# migration. Not READONLY: stockd never reads stock from a replica.
CLUSTER_REDIS_EXTRA_COMMANDS=(cluster\|slots asking)

# RabbitMQ: the scripts in RABBIT_BIN, not the /usr/sbin wrappers, which `su`
# to the rabbitmq user (HOME, cookie and logs of the system node).
RABBIT_BIN=/usr/lib/rabbitmq/bin
CLUSTER_RABBIT_NODES=(n1 n2 n3)
CLUSTER_RABBIT_HOST=localhost
CLUSTER_RABBIT_PORT_BASE=5680    # n<i> takes AMQP port base + i
# Distribution ports below 20000: the tests' private servers pick random
# ports from 20000 up to the ephemeral range (tests/support/ports.rs).
CLUSTER_RABBIT_DIST_BASE=15680   # n<i> takes dist port base + i
CLUSTER_CTL_DIST_PORT_MIN=15690  # rabbitmqctl's own node (11 ports)
CLUSTER_CTL_DIST_PORT_MAX=15700
# A private epmd, so the nodes never register with the system node's.
CLUSTER_EPMD_PORT=4380
# A fresh node boots in 5–15 s on a busy 2-core machine, three at once slower.
CLUSTER_RABBIT_WAIT=180
# Each rabbitmqctl call is an Erlang VM of its own: slow, but bounded.
CLUSTER_CTL_TIMEOUT=120
CLUSTER_LOOPBACK_DIST='-kernel inet_dist_use_interface {127,0,0,1}'

CLUSTER_REDIS_DIR=$CLUSTER_DIR/redis
CLUSTER_RABBIT_DIR=$CLUSTER_DIR/rabbit
# Written by `up`; `down` deletes data dirs only where it finds it, so a
# STOCKD_CLUSTER_DIR pointing at a directory with its own `redis/` is safe.
CLUSTER_MARKER=$CLUSTER_DIR/.stockd-cluster

# ---------------------------------------------------------------- processes

# Pid in FILE if that process is alive and its /proc/PID/FILE2 (cmdline or
# environ) contains NEEDLE; so a stale pid file never makes us signal someone
# else's process (the system broker above all).
owned_pid() { # owned_pid PIDFILE cmdline|environ NEEDLE
	local pid
	[ -f "$1" ] || return 1
	pid=$(tr -dc '0-9' <"$1")
	[ -n "$pid" ] && [ -r "/proc/$pid/$2" ] || return 1
	tr '\0' '\n' <"/proc/$pid/$2" 2>/dev/null | grep -qF -- "$3" || return 1
	echo "$pid"
}

proc_state() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null; }

# stop_pid NAME PID SECONDS: SIGCONT (a frozen node cannot handle anything),
# SIGTERM, wait, then SIGKILL.
stop_pid() {
	local name=$1 pid=$2 limit=$3 start=$SECONDS
	kill -CONT "$pid" 2>/dev/null || true
	kill -TERM "$pid" 2>/dev/null || return 0
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS - start >= limit)); then
			warn "$name (pid $pid) still running after ${limit}s; SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
			sleep 1
			return 0
		fi
		sleep 0.5
	done
}

# ---------------------------------------------------------------- redis

credis() { timeout 5 redis-cli -h 127.0.0.1 -p "$1" "${@:2}" 2>/dev/null | tr -d '\r'; }
credis_dir() { echo "$CLUSTER_REDIS_DIR/$1"; }
credis_pid() { owned_pid "$(credis_dir "$1")/redis.pid" cmdline ":$1"; }
credis_up() { [ "$(credis "$1" ping)" = PONG ]; }
credis_info() { credis "$1" cluster info | grep "^$2:" | cut -d: -f2; }

credis_all_owned() {
	local p
	for p in "${CLUSTER_REDIS_PORTS[@]}"; do credis_pid "$p" >/dev/null || return 1; done
}

credis_all_answer() {
	local p
	for p in "${CLUSTER_REDIS_PORTS[@]}"; do credis_up "$p" || return 1; done
}

# A node that has never met another one and serves no slot.
credis_blank() {
	[ "$(credis_info "$1" cluster_known_nodes)" = 1 ] &&
		[ "$(credis_info "$1" cluster_slots_assigned)" = 0 ]
}

# Every node sees state ok, all nodes, every slot served, and every replica
# has a live link to its primary (a failover test needs a synced replica).
credis_cluster_ok() {
	local p n=${#CLUSTER_REDIS_PORTS[@]}
	for p in "${CLUSTER_REDIS_PORTS[@]}"; do
		[ "$(credis_info "$p" cluster_state)" = ok ] &&
			[ "$(credis_info "$p" cluster_known_nodes)" = "$n" ] &&
			[ "$(credis_info "$p" cluster_slots_ok)" = 16384 ] || return 1
		if credis "$p" info replication | grep -qx 'role:slave'; then
			credis "$p" info replication | grep -qx 'master_link_status:up' || return 1
		fi
	done
}

credis_start() { # credis_start PORT
	local p=$1 d
	d=$(credis_dir "$p")
	mkdir -p "$d"
	redis-server --port "$p" --bind 127.0.0.1 --dir "$d" --daemonize yes \
		--pidfile "$d/redis.pid" --logfile "$d/redis.log" \
		--cluster-enabled yes --cluster-config-file nodes.conf \
		--cluster-node-timeout "$CLUSTER_REDIS_NODE_TIMEOUT_MS" \
		--cluster-require-full-coverage "$CLUSTER_REDIS_FULL_COVERAGE" \
		--save "" --appendonly no >/dev/null ||
		die "redis :$p: redis-server did not start (log: $d/redis.log)"
}

credis_logs() {
	local p logs=()
	for p in "${CLUSTER_REDIS_PORTS[@]}"; do logs+=("$(credis_dir "$p")/redis.log"); done
	printf '%s\n' "${logs[@]}"
}

credis_fail() { # credis_fail MESSAGE [EXTRA_LOG]
	local logs=()
	mapfile -t logs < <(credis_logs)
	show_log "${logs[@]}" ${2:+"$2"}
	die "$1 (scripts/services.sh cluster down removes what was started)"
}

cluster_redis_up() {
	local p pid started=() restarted=() blank=0 configured=0 first=${CLUSTER_REDIS_PORTS[0]}
	if credis_all_owned && credis_all_answer && credis_cluster_ok; then
		log "redis cluster already up (${CLUSTER_REDIS_PORTS[*]}, cluster_state:ok)"
		return 0
	fi
	for p in "${CLUSTER_REDIS_PORTS[@]}"; do
		if pid=$(credis_pid "$p"); then
			[ "$(proc_state "$pid")" != T ] ||
				die "redis :$p (pid $pid) is stopped (SIGSTOP): 'kill -CONT $pid', or 'scripts/services.sh cluster down'"
			continue
		elif tcp_open "$p" || tcp_open $((p + 10000)); then
			die "redis :$p: port $p or its bus port $((p + 10000)) is taken by a process this script did not start"
		elif [ -f "$(credis_dir "$p")/nodes.conf" ]; then
			restarted+=("$p") # rejoins from nodes.conf, with no data
		else
			started+=("$p")
		fi
		credis_start "$p"
	done
	[ "${#started[@]}" -eq 0 ] || log "redis: started ${started[*]}"
	[ "${#restarted[@]}" -eq 0 ] || log "redis: restarted ${restarted[*]} from their nodes.conf (their data is gone: no persistence)"
	wait_for "redis nodes ${CLUSTER_REDIS_PORTS[*]}" "$CLUSTER_REDIS_WAIT" credis_all_answer ||
		credis_fail "redis: not every node answers PING"

	for p in "${CLUSTER_REDIS_PORTS[@]}"; do
		if credis_blank "$p"; then blank=$((blank + 1)); else configured=$((configured + 1)); fi
	done
	if [ "$configured" -eq 0 ]; then
		local addrs=() out=$CLUSTER_REDIS_DIR/create.log
		for p in "${CLUSTER_REDIS_PORTS[@]}"; do addrs+=("127.0.0.1:$p"); done
		log "redis: creating the cluster (${#addrs[@]} nodes, $CLUSTER_REDIS_REPLICAS replica per primary)"
		timeout 120 redis-cli --cluster create "${addrs[@]}" \
			--cluster-replicas "$CLUSTER_REDIS_REPLICAS" --cluster-yes >"$out" 2>&1 ||
			credis_fail "redis: redis-cli --cluster create failed" "$out"
	elif [ "$blank" -gt 0 ]; then
		credis_fail "redis: $blank node(s) are blank while $configured belong to a cluster; run 'scripts/services.sh cluster down' and 'up' again"
	fi
	wait_for "redis cluster (cluster_state:ok on all nodes, replicas in sync)" "$CLUSTER_REDIS_WAIT" credis_cluster_ok ||
		credis_fail "redis: the cluster is not ok: $(credis "$first" cluster info | grep -E '^cluster_(state|known_nodes|slots_ok|slots_fail)' | tr '\n' ' ')"
}

cluster_redis_users() {
	local p
	for p in "${CLUSTER_REDIS_PORTS[@]}"; do
		redis_acl_setuser "$p" "${CLUSTER_REDIS_EXTRA_COMMANDS[@]}" ||
			die "redis :$p: ACL SETUSER $REDIS_APP_USER failed"
	done
	log "redis cluster: ACL user $REDIS_APP_USER on every node (as standalone, plus ${CLUSTER_REDIS_EXTRA_COMMANDS[*]})"
}

cluster_redis_down() {
	local p pid
	for p in "${CLUSTER_REDIS_PORTS[@]}"; do
		if ! pid=$(credis_pid "$p"); then
			log "redis :$p not running"
			continue
		fi
		credis_up "$p" && { credis "$p" shutdown nosave >/dev/null || true; }
		# Gone already after SHUTDOWN; a frozen or stuck node gets the signals.
		owned_pid "$(credis_dir "$p")/redis.pid" cmdline ":$p" >/dev/null && stop_pid "redis :$p" "$pid" 10
		log "redis :$p stopped"
	done
}

cluster_redis_status() {
	local p pid nodes line flags master rc=0
	for p in "${CLUSTER_REDIS_PORTS[@]}"; do
		if ! pid=$(credis_pid "$p"); then
			log "redis    :$p DOWN"
			rc=1
		elif ! credis_up "$p"; then
			log "redis    :$p DOWN (pid $pid alive, state $(proc_state "$pid"), not answering)"
			rc=1
		else
			nodes=$(credis "$p" cluster nodes) || true
			line=$(grep -m1 ' myself' <<<"$nodes") || true
			flags=$(awk '{print $3}' <<<"$line")
			case ",$flags," in
			*,master,*) log "redis    :$p up   primary  slots $(cut -d' ' -f9- <<<"$line")" ;;
			*,slave,*)
				master=$(awk -v id="$(awk '{print $4}' <<<"$line")" '$1 == id {print $2}' <<<"$nodes")
				log "redis    :$p up   replica  of :$(sed 's/^.*:\([0-9]*\)@.*$/\1/' <<<"$master")"
				;;
			*) log "redis    :$p up   $flags" ;;
			esac
		fi
	done
	for p in "${CLUSTER_REDIS_PORTS[@]}"; do
		credis_up "$p" || continue
		log "redis    cluster $(credis "$p" cluster info | grep -E '^cluster_(state|known_nodes|size):' | tr '\n' ' ')(seen from :$p)"
		break
	done
	return "$rc"
}

# ---------------------------------------------------------------- rabbitmq

crabbit_dir() { echo "$CLUSTER_RABBIT_DIR/$1"; }
crabbit_node() { echo "$1@$CLUSTER_RABBIT_HOST"; }
crabbit_index() { echo "${1#n}"; }
crabbit_port() { echo $((CLUSTER_RABBIT_PORT_BASE + $(crabbit_index "$1"))); }
crabbit_dist_port() { echo $((CLUSTER_RABBIT_DIST_BASE + $(crabbit_index "$1"))); }
crabbit_log() { echo "$(crabbit_dir "$1")/log/$(crabbit_node "$1").log"; }
# The VM's environment names its own mnesia dir: nobody else's broker matches.
crabbit_pid() {
	local d
	d=$(crabbit_dir "$1")
	owned_pid "$d/launch.pid" environ "RABBITMQ_MNESIA_BASE=$d/mnesia"
}
crabbit_greets() { amqp_greets "$(crabbit_port "$1")"; }
cepmd_pid() { owned_pid "$CLUSTER_RABBIT_DIR/epmd.pid" cmdline "$CLUSTER_EPMD_PORT"; }

# Environment shared by the servers and rabbitmqctl: cookie (HOME), epmd, no
# /etc/rabbitmq/rabbitmq-env.conf (it names the system node and its port).
crabbit_env() {
	echo "HOME=$CLUSTER_RABBIT_DIR"
	echo "ERL_EPMD_PORT=$CLUSTER_EPMD_PORT"
	echo "ERL_EPMD_ADDRESS=127.0.0.1"
	echo "RABBITMQ_CONF_ENV_FILE=$CLUSTER_RABBIT_DIR/rabbitmq-env.conf"
}

# ctl NODE ARGS...: rabbitmqctl against n1|n2|n3, bounded.
cluster_ctl() {
	local node=$1 envs=()
	shift
	mapfile -t envs < <(crabbit_env)
	env "${envs[@]}" \
		RABBITMQ_CTL_DIST_PORT_MIN="$CLUSTER_CTL_DIST_PORT_MIN" \
		RABBITMQ_CTL_DIST_PORT_MAX="$CLUSTER_CTL_DIST_PORT_MAX" \
		RABBITMQ_CTL_ERL_ARGS="$CLUSTER_LOOPBACK_DIST" \
		timeout "$CLUSTER_CTL_TIMEOUT" "$RABBIT_BIN/rabbitmqctl" -n "$(crabbit_node "$node")" "$@"
}
# What ensure_rabbit_user calls: quiet, on the first node.
cluster_ctl_q() { cluster_ctl "${CLUSTER_RABBIT_NODES[0]}" -q "$@"; }

# Running members as seen from NODE, one per line.
crabbit_running() {
	cluster_ctl "$1" -q cluster_status --formatter json 2>/dev/null |
		grep -o '"running_nodes":\[[^]]*\]' | grep -o '"[^"]*@[^"]*"' | tr -d '"'
}
crabbit_members() {
	cluster_ctl "$1" -q cluster_status --formatter json 2>/dev/null |
		grep -o '"disk_nodes":\[[^]]*\]' | grep -o '"[^"]*@[^"]*"' | tr -d '"'
}
crabbit_all_running() {
	[ "$(crabbit_running "${CLUSTER_RABBIT_NODES[0]}" | wc -l)" -eq "${#CLUSTER_RABBIT_NODES[@]}" ]
}

crabbit_fail() { # crabbit_fail NODE MESSAGE
	local d
	d=$(crabbit_dir "$1")
	show_log "$(crabbit_log "$1")" "$d/stdout.log"
	die "$2 (scripts/services.sh cluster down removes what was started)"
}

cepmd_start() {
	local pid
	if pid=$(cepmd_pid); then
		return 0
	fi
	tcp_open "$CLUSTER_EPMD_PORT" &&
		die "epmd :$CLUSTER_EPMD_PORT: port taken by a process this script did not start"
	command -v epmd >/dev/null 2>&1 || die "epmd not found (it comes with erlang-base, a dependency of rabbitmq-server)"
	setsid epmd -port "$CLUSTER_EPMD_PORT" -address 127.0.0.1 \
		</dev/null >"$CLUSTER_RABBIT_DIR/epmd.log" 2>&1 &
	echo $! >"$CLUSTER_RABBIT_DIR/epmd.pid"
	wait_for "epmd :$CLUSTER_EPMD_PORT" 10 tcp_open "$CLUSTER_EPMD_PORT" ||
		{
			show_log "$CLUSTER_RABBIT_DIR/epmd.log"
			die "epmd :$CLUSTER_EPMD_PORT did not start"
		}
}

crabbit_start() { # crabbit_start NODE
	local n=$1 d envs=()
	d=$(crabbit_dir "$n")
	mkdir -p "$d"
	[ -f "$d/rabbitmq.conf" ] ||
		printf 'listeners.tcp.1 = 127.0.0.1:%s\n' "$(crabbit_port "$n")" >"$d/rabbitmq.conf"
	[ -f "$d/enabled_plugins" ] || echo '[].' >"$d/enabled_plugins"
	mapfile -t envs < <(crabbit_env)
	# RUNNING_UNDER_SYSTEMD: the script execs the VM in place (no wrapper
	# process), so $! is the beam.smp pid that `down` signals. setsid: not
	# in our terminal's process group (no ^C from the shell that ran `up`).
	(
		cd "$d"
		exec env "${envs[@]}" \
			RABBITMQ_NODENAME="$(crabbit_node "$n")" \
			RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
			RABBITMQ_NODE_PORT="$(crabbit_port "$n")" \
			RABBITMQ_DIST_PORT="$(crabbit_dist_port "$n")" \
			RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" \
			RABBITMQ_ADVANCED_CONFIG_FILE="$d/advanced.config" \
			RABBITMQ_MNESIA_BASE="$d/mnesia" \
			RABBITMQ_LOG_BASE="$d/log" \
			RABBITMQ_PID_FILE="$d/rabbitmq.pid" \
			RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" \
			RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="$CLUSTER_LOOPBACK_DIST" \
			ERL_CRASH_DUMP="$d/erl_crash.dump" \
			RUNNING_UNDER_SYSTEMD=true \
			setsid "$RABBIT_BIN/rabbitmq-server" </dev/null >"$d/stdout.log" 2>&1
	) &
	echo $! >"$d/launch.pid"
}

crabbit_join() { # crabbit_join NODE: reset NODE and join it to the first node
	local n=$1 seed out
	seed=$(crabbit_node "${CLUSTER_RABBIT_NODES[0]}")
	out=$(crabbit_dir "$n")/join.log
	log "rabbitmq: joining $(crabbit_node "$n") to $seed"
	{
		cluster_ctl "$n" stop_app &&
			cluster_ctl "$n" reset &&
			cluster_ctl "$n" join_cluster "$seed" &&
			cluster_ctl "$n" start_app
	} >"$out" 2>&1 || {
		show_log "$out"
		crabbit_fail "$n" "rabbitmq: $(crabbit_node "$n") could not join $seed"
	}
}

# Nodes cluster_rabbit_launch started (they are waited for, then joined).
CLUSTER_LAUNCHED=()

cluster_rabbit_launch() { # start the nodes that are not running
	local n pid port d
	mkdir -p "$CLUSTER_RABBIT_DIR"
	: >"$CLUSTER_RABBIT_DIR/rabbitmq-env.conf"
	if [ ! -f "$CLUSTER_RABBIT_DIR/.erlang.cookie" ]; then
		(umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$CLUSTER_RABBIT_DIR/.erlang.cookie")
		chmod 400 "$CLUSTER_RABBIT_DIR/.erlang.cookie"
	fi
	cepmd_start
	for n in "${CLUSTER_RABBIT_NODES[@]}"; do
		if pid=$(crabbit_pid "$n"); then
			[ "$(proc_state "$pid")" != T ] ||
				die "rabbitmq $(crabbit_node "$n") (pid $pid) is stopped (SIGSTOP): 'kill -CONT $pid', or 'scripts/services.sh cluster down'"
			continue
		fi
		port=$(crabbit_port "$n")
		d=$(crabbit_dir "$n")
		if tcp_open "$port" || tcp_open "$(crabbit_dist_port "$n")"; then
			die "rabbitmq $n: port $port or $(crabbit_dist_port "$n") is taken by a process this script did not start"
		fi
		if [ -d "$d/mnesia" ]; then
			log "rabbitmq: restarting $(crabbit_node "$n") on :$port (it rejoins the cluster from its mnesia dir)"
		else
			log "rabbitmq: starting $(crabbit_node "$n") on :$port"
		fi
		crabbit_start "$n"
		CLUSTER_LAUNCHED+=("$n")
	done
}

crabbit_wait() { # crabbit_wait NODE
	local n=$1 name
	name="rabbitmq $(crabbit_node "$n") :$(crabbit_port "$n")"
	wait_for "$name" "$CLUSTER_RABBIT_WAIT" crabbit_alive_and_greets "$n" ||
		crabbit_fail "$n" "$name did not come up within ${CLUSTER_RABBIT_WAIT}s"
}

# Greets over AMQP; a node that exited ends the wait at once with its log
# (checked twice: for an instant after launch the process is not yet the VM).
crabbit_alive_and_greets() {
	crabbit_greets "$1" && return 0
	crabbit_pid "$1" >/dev/null || { sleep 1 && crabbit_pid "$1" >/dev/null; } || {
		echo " exited"
		crabbit_fail "$1" "rabbitmq $(crabbit_node "$1") exited while booting"
	}
	return 1
}

cluster_rabbit_up() { # cluster_rabbit_up NODE... (the ones just launched)
	local n seed members=()
	seed=${CLUSTER_RABBIT_NODES[0]}
	for n in "$@"; do crabbit_wait "$n"; done
	for n in "${CLUSTER_RABBIT_NODES[@]}"; do
		crabbit_greets "$n" || crabbit_wait "$n"
	done
	mapfile -t members < <(crabbit_members "$seed")
	[ "${#members[@]}" -gt 0 ] || crabbit_fail "$seed" "rabbitmq: cluster_status on $(crabbit_node "$seed") failed"
	for n in "${CLUSTER_RABBIT_NODES[@]:1}"; do
		[[ " ${members[*]} " == *" $(crabbit_node "$n") "* ]] || crabbit_join "$n"
	done
	if [ "$#" -eq 0 ] && crabbit_all_running; then
		log "rabbitmq cluster already up (${#CLUSTER_RABBIT_NODES[@]} running nodes)"
		return 0
	fi
	wait_for "rabbitmq cluster (${#CLUSTER_RABBIT_NODES[@]} running nodes)" "$CLUSTER_RABBIT_WAIT" crabbit_all_running ||
		crabbit_fail "$seed" "rabbitmq: running nodes: $(crabbit_running "$seed" | tr '\n' ' ')"
}

cluster_rabbit_down() {
	local n pid pids=()
	# All at once: RabbitMQ handles SIGTERM as `rabbitmqctl stop` (a clean
	# shutdown), without starting a CLI VM per node; stop_pid then waits.
	for n in "${CLUSTER_RABBIT_NODES[@]}"; do
		pid=$(crabbit_pid "$n") || pid=
		pids+=("$pid")
		[ -z "$pid" ] || kill -CONT "$pid" 2>/dev/null || true
		[ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null || true
	done
	for n in "${CLUSTER_RABBIT_NODES[@]}"; do
		pid=${pids[$(($(crabbit_index "$n") - 1))]}
		if [ -z "$pid" ]; then
			log "rabbitmq $(crabbit_node "$n") not running"
			continue
		fi
		stop_pid "rabbitmq $(crabbit_node "$n")" "$pid" 60
		log "rabbitmq $(crabbit_node "$n") stopped"
	done
	# Last: a node or rabbitmqctl without its epmd would start one by itself.
	if pid=$(cepmd_pid); then
		stop_pid "epmd :$CLUSTER_EPMD_PORT" "$pid" 10
		log "epmd :$CLUSTER_EPMD_PORT stopped"
	fi
}

cluster_rabbit_status() {
	local n pid rc=0
	if pid=$(cepmd_pid); then log "epmd     :$CLUSTER_EPMD_PORT up"; else
		log "epmd     :$CLUSTER_EPMD_PORT DOWN"
		rc=1
	fi
	for n in "${CLUSTER_RABBIT_NODES[@]}"; do
		if ! pid=$(crabbit_pid "$n"); then
			log "rabbitmq :$(crabbit_port "$n") DOWN ($(crabbit_node "$n"))"
			rc=1
		elif ! crabbit_greets "$n"; then
			log "rabbitmq :$(crabbit_port "$n") DOWN ($(crabbit_node "$n"), pid $pid alive, state $(proc_state "$pid"), no AMQP answer)"
			rc=1
		else
			log "rabbitmq :$(crabbit_port "$n") up   $(crabbit_node "$n") (dist :$(crabbit_dist_port "$n"))"
		fi
	done
	for n in "${CLUSTER_RABBIT_NODES[@]}"; do
		crabbit_greets "$n" || continue
		log "rabbitmq cluster running: $(crabbit_running "$n" | tr '\n' ' ')(seen from $(crabbit_node "$n"))"
		break
	done
	return "$rc"
}

# ---------------------------------------------------------------- commands

cmd_cluster_up() {
	local start=$SECONDS
	ensure_installed redis redis-server redis-server
	ensure_installed rabbitmq "$RABBIT_BIN/rabbitmq-server" rabbitmq-server
	mkdir -p "$CLUSTER_DIR"
	touch "$CLUSTER_MARKER"
	log "cluster dir $CLUSTER_DIR"
	# RabbitMQ first: its nodes boot for seconds while the Redis Cluster forms.
	cluster_rabbit_launch
	cluster_redis_up
	cluster_rabbit_up "${CLUSTER_LAUNCHED[@]}"
	cluster_redis_users
	ensure_rabbit_user cluster_ctl_q "rabbitmq cluster"
	log "clusters up after $((SECONDS - start))s; 'scripts/services.sh cluster env' prints stockd's settings"
}

cmd_cluster_down() {
	cluster_rabbit_down
	cluster_redis_down
	if [ -f "$CLUSTER_MARKER" ]; then
		rm -rf "$CLUSTER_REDIS_DIR" "$CLUSTER_RABBIT_DIR" "$CLUSTER_MARKER"
		rmdir "$CLUSTER_DIR" 2>/dev/null || true
		log "clusters down; data removed"
	elif [ -d "$CLUSTER_REDIS_DIR" ] || [ -d "$CLUSTER_RABBIT_DIR" ]; then
		warn "no $CLUSTER_MARKER: left $CLUSTER_DIR alone (not created by 'cluster up')"
	else
		log "clusters down"
	fi
}

cmd_cluster_status() {
	local rc=0
	cluster_redis_status || rc=1
	cluster_rabbit_status || rc=1
	return "$rc"
}

cmd_cluster_env() {
	local p n redis=() amqp=()
	for p in "${CLUSTER_REDIS_PORTS[@]}"; do
		redis+=("redis://$REDIS_APP_USER:$REDIS_APP_PASSWORD@127.0.0.1:$p")
	done
	for n in "${CLUSTER_RABBIT_NODES[@]}"; do
		amqp+=("amqp://$RABBIT_APP_USER:$RABBIT_APP_PASSWORD@127.0.0.1:$(crabbit_port "$n")/%2f")
	done
	# On stderr, so `env $(scripts/services.sh cluster env) …` gets only the
	# assignments.
	echo "# stockd settings for the local clusters (redis.mode, redis.urls, amqp.urls)" >&2
	echo "STOCKD__REDIS__MODE=cluster"
	(
		IFS=,
		echo "STOCKD__REDIS__URLS=${redis[*]}"
		echo "STOCKD__AMQP__URLS=${amqp[*]}"
	)
}

cmd_cluster() {
	case "${1:-}" in
	up) cmd_cluster_up ;;
	down) cmd_cluster_down ;;
	status) cmd_cluster_status ;;
	env) cmd_cluster_env ;;
	ctl)
		[ "$#" -ge 3 ] && [[ " ${CLUSTER_RABBIT_NODES[*]} " == *" $2 "* ]] || {
			echo "usage: $0 cluster ctl $(IFS='|' && echo "${CLUSTER_RABBIT_NODES[*]}") RABBITMQCTL_ARGS..." >&2
			exit 2
		}
		cluster_ctl "${@:2}"
		;;
	*)
		echo "usage: $0 cluster up|down|status|env|ctl" >&2
		exit 2
		;;
	esac
}
