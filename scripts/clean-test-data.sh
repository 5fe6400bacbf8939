#!/usr/bin/env bash
# Remove what stockd tests leave behind in the local services:
#   MariaDB   databases named stockd_t_*
#   RabbitMQ  queues and exchanges named t_* (default vhost "/")
#   Redis     keys named t_* (db 0)
# Best effort per service; exits 1 if a service could not be reached.
set -euo pipefail

log() { echo "clean-test-data: $*"; }
rc=0

# ---- MariaDB (same login as the app: root, empty password, TCP)
MYSQL=$(command -v mariadb || command -v mysql || true)
mysql_q() {
	"$MYSQL" --connect-timeout=5 --protocol=tcp -h127.0.0.1 -P3306 -uroot --password= -N -B "$@"
}
if [ -n "$MYSQL" ] && dbs=$(mysql_q -e "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'stockd\\_t\\_%'" 2>/dev/null); then
	sql="" n=0
	while IFS= read -r db; do
		[ -n "$db" ] || continue
		sql+="DROP DATABASE IF EXISTS \`${db//\`/\`\`}\`;"
		n=$((n + 1))
	done <<<"$dbs"
	[ -z "$sql" ] || mysql_q -e "$sql"
	log "mariadb: dropped $n database(s)"
else
	log "mariadb: not reachable as root@127.0.0.1:3306, skipped" >&2
	rc=1
fi

# ---- RabbitMQ (rabbitmqctl needs root or the rabbitmq user)
if queues=$(timeout 60 rabbitmqctl -q list_queues --no-table-headers name 2>/dev/null) &&
	exchanges=$(timeout 60 rabbitmqctl -q list_exchanges --no-table-headers name 2>/dev/null); then
	nq=0
	while IFS= read -r q; do
		[[ $q == t_* ]] || continue
		timeout 60 rabbitmqctl -q delete_queue "$q" >/dev/null
		nq=$((nq + 1))
	done <<<"$queues"
	nx=0
	if grep -q '^t_' <<<"$exchanges"; then
		# rabbitmqctl has no delete_exchange (and rabbitmqadmin is not installed),
		# so delete them inside the broker in one go.
		nx=$(timeout 60 rabbitmqctl -q eval '
			lists:foldl(fun(X, N) ->
				R = element(2, X),
				case element(4, R) of
					<<"t_", _/binary>> -> rabbit_exchange:delete(R, false, <<"clean-test-data">>), N + 1;
					_ -> N
				end
			end, 0, rabbit_exchange:list(<<"/">>)).')
	fi
	log "rabbitmq: deleted $nq queue(s), $nx exchange(s)"
else
	log "rabbitmq: rabbitmqctl could not reach the broker (not running, or not root?), skipped" >&2
	rc=1
fi

# ---- Redis
if [ "$(timeout 5 redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = PONG ]; then
	n=$(redis-cli -h 127.0.0.1 -p 6379 --scan --pattern 't_*' |
		xargs -r -d '\n' -n 500 redis-cli -h 127.0.0.1 -p 6379 del |
		awk '{ s += $1 } END { print s + 0 }')
	log "redis: deleted $n key(s)"
else
	log "redis: not reachable on 127.0.0.1:6379, skipped" >&2
	rc=1
fi

exit "$rc"
