#!/usr/bin/env bash
# Manage the local services stockd needs, without systemd (containers / CI):
#   Redis    127.0.0.1:6379
#   MariaDB  127.0.0.1:3306  (root, empty password, over TCP)
#   RabbitMQ 127.0.0.1:5672  (guest/guest)
#
# Usage: scripts/services.sh up|down|status|users|env [runtime|migrate]
#        scripts/services.sh cluster up|down|status|env|ctl
#   up      start whatever is not answering (installing Debian packages if
#           missing and running as root), wait until all answer, then create
#           stockd's least-privilege users (as `users`)
#   status  one line per service; exit 1 if any is down
#   down    stop all three
#   users   (re)create the users below on the running services; idempotent
#   env     print the STOCKD__…_URL lines of the runtime users (default) or,
#           with `migrate`, of the migration/admin users (`eval` them)
#   cluster a 6-node Redis Cluster and a 3-node RabbitMQ cluster on private
#           loopback ports, beside the services above (scripts/services-cluster.sh)
#
# Least-privilege users (docs/operations.md, "Users and grants"). The passwords
# are for this laptop/CI only; production sets its own through the environment.
#   MySQL  stockd_migrate  DDL + DML on `stockd%` databases: `stockd migrate`,
#                          test set-up and clean-up
#          stockd_app      SELECT, INSERT, UPDATE on `stockd%`.*: every role
#   Redis  stockd_app      keys `stockd:*` and `t_*:*` (tests), the sold-out
#                          channels, and only the commands stockd sends
#   RabbitMQ stockd_app    configure/write/read on names starting `stockd.` or
#                          `t_<hex>.` (tests), write on amq.default
set -euo pipefail

REDIS_HOST=127.0.0.1
REDIS_PORT=6379
REDIS_DIR=/var/lib/redis
REDIS_LOG=/var/log/redis/ci.log

MYSQL_HOST=127.0.0.1
MYSQL_PORT=3306
MYSQL_DATADIR=/var/lib/mysql
MYSQL_RUNDIR=/run/mysqld
MARIADBD=/usr/sbin/mariadbd

RABBIT_PORT=5672

# Users and passwords: keep in step with tests/it/helpers.rs (`users`) and
# deploy/systemd/stockd.env.example.
MYSQL_MIGRATE_USER=stockd_migrate
MYSQL_MIGRATE_PASSWORD=stockd-migrate-local
MYSQL_APP_USER=stockd_app
MYSQL_APP_PASSWORD=stockd-app-local
REDIS_APP_USER=stockd_app
REDIS_APP_PASSWORD=stockd-app-local
RABBIT_APP_USER=stockd_app
RABBIT_APP_PASSWORD=stockd-app-local

# Key prefixes (glob) the Redis user may touch: production `stockd:` and the
# tests' `t_<id>:` (tests/it/helpers.rs test_settings).
REDIS_KEY_PATTERNS=('stockd:*' 't_*:*')
# Pub/Sub channels: `<prefix>soldout` (src/redis/keys.rs), for any prefix under `stockd:` as the keys.
REDIS_CHANNELS=('stockd:*soldout' 't_*:soldout')
# Every command stockd sends, directly or from its Lua scripts (Redis checks a
# script's commands against the caller's ACL too); UNWATCH and PING are
# deadpool's health check. Not CLIENT SETINFO: the driver sends it on connect
# and ignores the answer. No SCAN, KEYS, UNLINK, FLUSH*, CONFIG or INFO:
# clean-up and the bench's server stats use the default user.
REDIS_COMMANDS=(
	evalsha eval script\|load script\|exists
	get set mget incrby decrby del exists pexpire pexpireat pttl
	hget hmget hgetall hset hsetnx hdel hexists hincrby hlen
	sadd srem smembers sscan scard sismember smismember
	zadd zrem zrangebyscore zcard
	xadd xrange xdel xlen
	publish subscribe unsubscribe
	time ping unwatch
)
# Exchange and queue names the RabbitMQ user may configure, write and read:
# production `stockd.` and the tests' `t_<hex>.`; amq.default is the default
# exchange (dead-letter replay publishes straight to a queue).
RABBIT_NAMES='^(stockd|t_[0-9a-f]+)\.'
RABBIT_WRITE="$RABBIT_NAMES|^amq\.default\$"

REDIS_WAIT=60
MARIADB_WAIT=60
RABBIT_WAIT=120

log() { echo "services: $*"; }
warn() { echo "services: $*" >&2; }
die() {
	echo "services: ERROR: $*" >&2
	exit 1
}

is_root() { [ "$(id -u)" -eq 0 ]; }

# First of the given commands that exists (empty if none).
first_cmd() {
	local c
	for c in "$@"; do
		if command -v "$c" >/dev/null 2>&1; then
			command -v "$c"
			return 0
		fi
	done
	return 0
}

MYSQL_CLIENT=$(first_cmd mariadb mysql)
MYSQL_ADMIN=$(first_cmd mariadb-admin mysqladmin)

tcp_open() { timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" >/dev/null 2>&1; }

# ---------------------------------------------------------------- checks

redis_up() {
	[ "$(timeout 5 redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]
}

# The server answers on 127.0.0.1:3306 (even if our login would be refused).
# `ping` exits 0 on "access denied", but not on "host not allowed" (1130),
# which is what a fresh install with skip-name-resolve answers to TCP clients;
# so if the port is open, also accept a ping over the unix socket.
mariadb_alive() {
	[ -n "$MYSQL_ADMIN" ] || return 1
	timeout 10 "$MYSQL_ADMIN" --connect-timeout=3 -h"$MYSQL_HOST" -P"$MYSQL_PORT" -uroot ping >/dev/null 2>&1 && return 0
	tcp_open "$MYSQL_PORT" &&
		timeout 10 "$MYSQL_ADMIN" --connect-timeout=3 --protocol=socket -uroot ping >/dev/null 2>&1
}

# What the app does: root, empty password, TCP.
mariadb_tcp_login() {
	[ -n "$MYSQL_CLIENT" ] &&
		timeout 10 "$MYSQL_CLIENT" --connect-timeout=3 --protocol=tcp -h"$MYSQL_HOST" -P"$MYSQL_PORT" \
			-uroot --password= -N -e 'SELECT 1' >/dev/null 2>&1
}

mariadb_up() { mariadb_alive && mariadb_tcp_login; }

# The broker answers an AMQP 0-9-1 protocol header with a method frame (type 1).
amqp_greets() {
	local first
	first=$(timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1; printf 'AMQP\\0\\0\\x09\\x01' >&3; head -c 1 <&3" 2>/dev/null |
		od -An -tx1 | tr -d ' \n') || true
	[ "$first" = 01 ]
}

rabbit_up() {
	tcp_open "$RABBIT_PORT" || return 1
	# The rabbitmq CLI tools only work as root or as the rabbitmq user.
	if is_root || [ "$(id -un)" = rabbitmq ]; then
		if command -v rabbitmq-diagnostics >/dev/null 2>&1; then
			timeout 30 rabbitmq-diagnostics -q check_port_connectivity >/dev/null 2>&1
		else
			timeout 30 rabbitmqctl -q await_startup >/dev/null 2>&1
		fi
	else
		amqp_greets "$RABBIT_PORT"
	fi
}

# wait_for NAME SECONDS CHECK_FN [ARGS...] -- progress dot every second.
wait_for() {
	local name=$1 limit=$2 start=$SECONDS
	shift 2
	if "$@"; then
		log "$name is up"
		return 0
	fi
	printf 'services: waiting for %s (max %ss) ' "$name" "$limit"
	while ! "$@"; do
		if ((SECONDS - start >= limit)); then
			echo " timed out"
			return 1
		fi
		printf .
		sleep 1
	done
	echo " up after $((SECONDS - start))s"
}

show_log() { # show_log FILE...
	local f found=0
	for f in "$@"; do
		[ -f "$f" ] || continue
		found=1
		warn "--- last lines of $f:"
		tail -n 20 "$f" | sed 's/^/services:   /' >&2
	done
	[ "$found" -eq 1 ] || warn "(no log found at: $*)"
}

# ---------------------------------------------------------------- install

APT_UPDATED=0
ensure_installed() { # ensure_installed NAME BINARY PACKAGE
	local name=$1 bin=$2 pkg=$3 out
	if command -v "$bin" >/dev/null 2>&1 || [ -x "$bin" ]; then
		return 0
	fi
	is_root || die "$name is not running and $bin is missing; install it first (apt-get install $pkg) or run this script as root"
	command -v apt-get >/dev/null 2>&1 || die "$name: $bin is missing and apt-get is not available to install $pkg"
	out=$(mktemp)
	if [ "$APT_UPDATED" -eq 0 ]; then
		log "apt-get update"
		apt-get update >"$out" 2>&1 || {
			show_log "$out"
			die "apt-get update failed"
		}
		APT_UPDATED=1
	fi
	log "installing $pkg"
	DEBIAN_FRONTEND=noninteractive apt-get install -y "$pkg" >"$out" 2>&1 || {
		show_log "$out"
		die "apt-get install $pkg failed"
	}
	rm -f "$out"
	# The package's maintainer script may have started it; re-resolve clients.
	MYSQL_CLIENT=$(first_cmd mariadb mysql)
	MYSQL_ADMIN=$(first_cmd mariadb-admin mysqladmin)
}

# ---------------------------------------------------------------- start

have_ipv6_loopback() {
	grep -qi '^00000000000000000000000000000001 ' /proc/net/if_inet6 2>/dev/null
}

start_redis() {
	mkdir -p "$REDIS_DIR" "$(dirname "$REDIS_LOG")"
	local bind=(127.0.0.1 -::1)
	have_ipv6_loopback || bind=(127.0.0.1)
	local before=0 i
	[ -f "$REDIS_LOG" ] && before=$(wc -l <"$REDIS_LOG")
	log "starting redis (bind ${bind[*]})"
	if redis-server --daemonize yes --bind "${bind[@]}" --port "$REDIS_PORT" --save "" --appendonly no \
		--dir "$REDIS_DIR" --logfile "$REDIS_LOG"; then
		[ "${#bind[@]}" -gt 1 ] || return 0
		# With --daemonize the bind happens in the child; watch for an IPv6 failure.
		for i in 1 2 3 4 5; do
			redis_up && return 0
			sleep 1
		done
		tail -n +"$((before + 1))" "$REDIS_LOG" 2>/dev/null | grep -q '::1' || return 0
	fi
	log "redis: binding ::1 failed, retrying with 127.0.0.1 only"
	redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
		--dir "$REDIS_DIR" --logfile "$REDIS_LOG"
}

start_mariadb() {
	mkdir -p "$MYSQL_RUNDIR"
	chown mysql:mysql "$MYSQL_RUNDIR"
	[ -d /var/log/mysql ] || install -d -o mysql -g adm -m 2750 /var/log/mysql
	if [ -z "$(ls -A "$MYSQL_DATADIR" 2>/dev/null)" ]; then
		log "mariadb: $MYSQL_DATADIR is empty, initialising it"
		mkdir -p "$MYSQL_DATADIR"
		chown mysql:mysql "$MYSQL_DATADIR"
		local out installer
		installer=$(first_cmd mariadb-install-db mysql_install_db)
		[ -n "$installer" ] || die "mariadb: mariadb-install-db not found"
		out=$(mktemp)
		"$installer" --user=mysql --datadir="$MYSQL_DATADIR" >"$out" 2>&1 || {
			show_log "$out"
			die "mariadb: $installer failed"
		}
		rm -f "$out"
	fi
	log "starting mariadb"
	# --user=mysql: mariadbd refuses to run as root unless a config file says user=mysql.
	start-stop-daemon --start --oknodo --background --exec "$MARIADBD" -- --user=mysql
}

# Fresh Debian installs give root@localhost unix_socket auth only, which is
# fine for `mysql -uroot` as OS root but not for the app (TCP, empty password).
ensure_mariadb_root_tcp() {
	mariadb_tcp_login && return 0
	is_root || die "mariadb: root cannot log in over TCP with an empty password (fixing it needs OS root)"
	[ -n "$MYSQL_CLIENT" ] || die "mariadb: no mariadb/mysql client found"
	log "mariadb: root TCP login with empty password fails; enabling it via the unix socket"
	"$MYSQL_CLIENT" --protocol=socket -uroot -e \
		"ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket;" ||
		die "mariadb: could not change root@localhost authentication over the unix socket"
	mariadb_tcp_login && return 0
	# With skip-name-resolve, TCP clients from 127.0.0.1 never match 'localhost'.
	log "mariadb: still failing (skip-name-resolve?); granting root@127.0.0.1 with an empty password"
	"$MYSQL_CLIENT" --protocol=socket -uroot -e "
		CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING PASSWORD('');
		ALTER USER 'root'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING PASSWORD('');
		GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;" ||
		die "mariadb: could not create root@127.0.0.1"
	mariadb_tcp_login || die "mariadb: root still cannot log in over TCP with an empty password"
}

start_rabbit() {
	log "starting rabbitmq"
	rabbitmq-server -detached >/dev/null 2>&1 || true # it reports failure via the wait below
}

# ---------------------------------------------------------------- users

mysql_root() { # statements on stdin, as root over TCP (what mariadb_tcp_login checked)
	timeout 30 "$MYSQL_CLIENT" --connect-timeout=5 --protocol=tcp -h"$MYSQL_HOST" -P"$MYSQL_PORT" \
		-uroot --password= -N
}

ensure_mysql_users() {
	local host sql=""
	# 'localhost': mysql_async moves loopback TCP connections to the Unix socket.
	for host in 127.0.0.1 localhost; do
		sql+="CREATE USER IF NOT EXISTS '$MYSQL_MIGRATE_USER'@'$host' IDENTIFIED BY '$MYSQL_MIGRATE_PASSWORD';
ALTER USER '$MYSQL_MIGRATE_USER'@'$host' IDENTIFIED BY '$MYSQL_MIGRATE_PASSWORD';
GRANT CREATE, ALTER, DROP, INDEX, REFERENCES, SELECT, INSERT, UPDATE, DELETE ON \`stockd%\`.* TO '$MYSQL_MIGRATE_USER'@'$host';
CREATE USER IF NOT EXISTS '$MYSQL_APP_USER'@'$host' IDENTIFIED BY '$MYSQL_APP_PASSWORD';
ALTER USER '$MYSQL_APP_USER'@'$host' IDENTIFIED BY '$MYSQL_APP_PASSWORD';
GRANT SELECT, INSERT, UPDATE ON \`stockd%\`.* TO '$MYSQL_APP_USER'@'$host';
"
	done
	mysql_root <<<"$sql" || die "mariadb: could not create the stockd users"
	log "mariadb: users $MYSQL_MIGRATE_USER (DDL) and $MYSQL_APP_USER (SELECT/INSERT/UPDATE) on \`stockd%\`"
}

# redis_acl_setuser PORT [EXTRA_COMMAND...]: stockd's ACL user on one server.
redis_acl_setuser() {
	local port=$1 rule=(reset on ">$REDIS_APP_PASSWORD" -@all) p c
	shift
	for p in "${REDIS_KEY_PATTERNS[@]}"; do rule+=("~$p"); done
	for p in "${REDIS_CHANNELS[@]}"; do rule+=("&$p"); done
	for c in "${REDIS_COMMANDS[@]}" "$@"; do rule+=("+$c"); done
	[ "$(timeout 10 redis-cli -h "$REDIS_HOST" -p "$port" ACL SETUSER "$REDIS_APP_USER" "${rule[@]}")" = OK ]
}

ensure_redis_user() {
	redis_acl_setuser "$REDIS_PORT" || die "redis: ACL SETUSER $REDIS_APP_USER failed"
	log "redis: ACL user $REDIS_APP_USER (keys ${REDIS_KEY_PATTERNS[*]}, ${#REDIS_COMMANDS[@]} commands)"
}

rabbitmqctl_q() { timeout 60 rabbitmqctl -q "$@"; }

# ensure_rabbit_user [CTL_FN LABEL]: on the system node by default; the
# cluster passes its own rabbitmqctl (users are shared by a cluster's nodes).
ensure_rabbit_user() {
	local ctl=${1:-rabbitmqctl_q} label=${2:-rabbitmq} want have
	if [ "$ctl" = rabbitmqctl_q ] && ! is_root && [ "$(id -un)" != rabbitmq ]; then
		warn "rabbitmq: cannot check user $RABBIT_APP_USER without root (rabbitmqctl); skipped"
		return 0
	fi
	want=$(printf '/\t%s\t%s\t%s' "$RABBIT_NAMES" "$RABBIT_WRITE" "$RABBIT_NAMES")
	have=$("$ctl" list_user_permissions "$RABBIT_APP_USER" --no-table-headers 2>/dev/null | head -n 1) || true
	if [ "$have" = "$want" ] && "$ctl" authenticate_user "$RABBIT_APP_USER" "$RABBIT_APP_PASSWORD" >/dev/null 2>&1; then
		log "$label: user $RABBIT_APP_USER is set up"
		return 0
	fi
	"$ctl" add_user "$RABBIT_APP_USER" "$RABBIT_APP_PASSWORD" >/dev/null 2>&1 ||
		"$ctl" change_password "$RABBIT_APP_USER" "$RABBIT_APP_PASSWORD" >/dev/null ||
		die "$label: could not create user $RABBIT_APP_USER"
	"$ctl" set_permissions -p / "$RABBIT_APP_USER" "$RABBIT_NAMES" "$RABBIT_WRITE" "$RABBIT_NAMES" >/dev/null ||
		die "$label: could not set the permissions of $RABBIT_APP_USER"
	log "$label: user $RABBIT_APP_USER (names $RABBIT_NAMES, write also amq.default)"
}

cmd_users() {
	ensure_mysql_users
	ensure_redis_user
	ensure_rabbit_user
}

cmd_env() {
	case "${1:-runtime}" in
	runtime)
		echo "STOCKD__MYSQL__URL=mysql://$MYSQL_APP_USER:$MYSQL_APP_PASSWORD@$MYSQL_HOST:$MYSQL_PORT/stockd"
		echo "STOCKD__REDIS__URL=redis://$REDIS_APP_USER:$REDIS_APP_PASSWORD@$REDIS_HOST:$REDIS_PORT"
		echo "STOCKD__AMQP__URL=amqp://$RABBIT_APP_USER:$RABBIT_APP_PASSWORD@127.0.0.1:$RABBIT_PORT/%2f"
		;;
	migrate)
		echo "STOCKD__MYSQL__URL=mysql://$MYSQL_MIGRATE_USER:$MYSQL_MIGRATE_PASSWORD@$MYSQL_HOST:$MYSQL_PORT/stockd"
		;;
	*)
		echo "usage: $0 env [runtime|migrate]" >&2
		exit 2
		;;
	esac
}

# ---------------------------------------------------------------- commands

cmd_up() {
	local redis_started=0 mariadb_started=0 rabbit_started=0 failed=()

	if redis_up; then
		log "redis already up on $REDIS_HOST:$REDIS_PORT"
	else
		ensure_installed redis redis-server redis-server
		if ! redis_up; then
			is_root || die "redis is down and starting it needs root (or start it yourself)"
			start_redis
		fi
		redis_started=1
	fi

	if mariadb_alive; then
		log "mariadb already up on $MYSQL_HOST:$MYSQL_PORT"
	else
		ensure_installed mariadb "$MARIADBD" mariadb-server
		if ! mariadb_alive; then
			is_root || die "mariadb is down and starting it needs root (or start it yourself)"
			start_mariadb
		fi
		mariadb_started=1
	fi

	if rabbit_up; then
		log "rabbitmq already up on 127.0.0.1:$RABBIT_PORT"
	else
		ensure_installed rabbitmq rabbitmq-server rabbitmq-server
		if ! rabbit_up; then
			is_root || die "rabbitmq is down and starting it needs root (or start it yourself)"
			start_rabbit
		fi
		rabbit_started=1
	fi

	if [ "$redis_started" -eq 1 ] && ! wait_for redis "$REDIS_WAIT" redis_up; then
		show_log "$REDIS_LOG"
		failed+=(redis)
	fi
	if [ "$mariadb_started" -eq 1 ] && ! wait_for mariadb "$MARIADB_WAIT" mariadb_alive; then
		show_log /var/log/mysql/error.log
		failed+=(mariadb)
	fi
	if [ "$rabbit_started" -eq 1 ] && ! wait_for rabbitmq "$RABBIT_WAIT" rabbit_up; then
		show_log /var/log/rabbitmq/startup_err /var/log/rabbitmq/rabbit@*.log
		warn "hint: run 'rabbitmq-server' in the foreground to see why it does not start"
		failed+=(rabbitmq)
	fi
	if [[ ! " ${failed[*]} " =~ " mariadb " ]]; then
		ensure_mariadb_root_tcp
	fi
	if [ "${#failed[@]}" -gt 0 ]; then
		die "did not come up: ${failed[*]}"
	fi
	cmd_users
	log "all up"
}

cmd_status() {
	local down=0
	if redis_up; then log "redis    up   ($REDIS_HOST:$REDIS_PORT)"; else
		log "redis    DOWN ($REDIS_HOST:$REDIS_PORT)"
		down=1
	fi
	if mariadb_up; then log "mariadb  up   ($MYSQL_HOST:$MYSQL_PORT)"; elif mariadb_alive; then
		log "mariadb  DOWN ($MYSQL_HOST:$MYSQL_PORT answers, but root login over TCP with empty password fails)"
		down=1
	else
		log "mariadb  DOWN ($MYSQL_HOST:$MYSQL_PORT)"
		down=1
	fi
	if rabbit_up; then log "rabbitmq up   (127.0.0.1:$RABBIT_PORT)"; else
		log "rabbitmq DOWN (127.0.0.1:$RABBIT_PORT)"
		down=1
	fi
	return "$down"
}

rabbit_node_alive() {
	tcp_open "$RABBIT_PORT" || timeout 15 rabbitmq-diagnostics -q ping >/dev/null 2>&1
}

# wait_gone NAME CHECK_FN -- wait (max 30 s) until CHECK_FN stops succeeding.
wait_gone() {
	local name=$1 check=$2 start=$SECONDS
	while "$check"; do
		if ((SECONDS - start >= 30)); then
			warn "$name still answering after 30s"
			return 1
		fi
		sleep 1
	done
	log "$name stopped"
}

cmd_down() {
	local rc=0
	if redis_up; then
		redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
		wait_gone redis redis_up || rc=1
	else
		log "redis not running"
	fi
	if mariadb_alive; then
		# Prefer TCP as root with no password; fall back to the unix socket (OS root).
		timeout 60 "$MYSQL_ADMIN" -h"$MYSQL_HOST" -P"$MYSQL_PORT" -uroot --password= shutdown >/dev/null 2>&1 ||
			timeout 60 "$MYSQL_ADMIN" --protocol=socket -uroot shutdown >/dev/null 2>&1 || true
		wait_gone mariadb mariadb_alive || rc=1
	else
		log "mariadb not running"
	fi
	if rabbit_node_alive; then
		timeout 60 rabbitmqctl -q stop >/dev/null 2>&1 || true
		wait_gone rabbitmq rabbit_node_alive || rc=1
	else
		log "rabbitmq not running"
	fi
	return "$rc"
}

# shellcheck source=scripts/services-cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/services-cluster.sh"

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
users) cmd_users ;;
env) cmd_env "${2:-}" ;;
cluster) cmd_cluster "${@:2}" ;;
*)
	echo "usage: $0 up|down|status|users|env [runtime|migrate] | cluster up|down|status|env|ctl" >&2
	exit 2
	;;
esac
