#!/usr/bin/env python3
"""Workloads for scripts/bench-instructions.sh: what Redis and MariaDB are
asked per 3-line order, per single reservation and per release of an expired
one, written as plain command
text for redis-cli and the mariadb client (standard library only).

Why text and not stockd itself: the instruction counts must come from the
server alone (callgrind on a private redis-server or mariadbd), with a fixed
make-up of calls, so that two runs of the same code count the same.

  redis-order  <calls> <per-call>   EVALSHA of order.lua: <per-call> orders of
                                    one unit of each of SKUs 107, 108, 109
  redis-reserve <calls> <per-call>  EVALSHA of reserve.lua: <per-call>
                                    one-unit reservations of SKU 200
  sql-orders <orders> <shape>       the consumer's transactions of 160 orders
                                    (480 lines), src/db/ledger/apply_order.rs
  sql-singles <reservations>        the consumer's transactions of 500
                                    reservations of one SKU, apply.rs
  redis-seed <calls>|setup          EVALSHA of scripts/lib/seed-anchor.lua (the
                                    anchor: the seed's one-call script), one
                                    one-unit reservation of SKU 200 per call,
                                    a new buyer each
  redis-xdel <ids-per-call>         XDEL of the outbox entries whose ids come
                                    on stdin (one a line), <ids-per-call> ids
                                    per XDEL, as src/outbox/acker.rs sends
                                    them
  redis-finish <calls> <per-call> <first>
                                    EVALSHA of finish.lua: <per-call>
                                    expiries of SKU 200 (the reservations
                                    redis-reserve made from <first> + 1),
                                    src/redis/finish.rs
  sql-expire <reservations> <per-tx> <events>
                                    the closer's release of the rows
                                    sql-singles made, <per-tx> per batch
                                    (src/ops/lifecycle/expire_many.rs), with
                                    the outbox insert of their events when
                                    <events> is 1 (events on, the default);
                                    an optional 4th argument lists the parts
                                    to run (EXPIRE_PARTS, comma-separated)

The Redis ones print the script's SHA placeholder `SHA`; the caller puts in
the SHA of the loaded script. Keys and arguments follow src/redis/orders.rs
and src/redis/admission.rs. `<shape>` of sql-orders: `current` (orders and
lines inserted without a lookup, rows one SKU after another) or `lookups`
(the shape before 2026-12-05: the orders rows and each SKU's lines looked up
first, rows order after order). Keep both in step with the consumer.

MAX_LAPSED in the environment is the scripts' cap on lapsed holds
(`limits.max_lapsed_holds`, 0 = off, the default): the buyers here have
none, so a cap that is on measures the check itself.

REQUESTER in the environment is the requester argument of each reservation
and order (src/domain/ownership.rs `script_arg`): empty (the default) as with
`auth.required` false, which records no client; `c<name>` as a client with
`auth.required` true, whose holds record its name.
"""

import os
import sys

PREFIX = "p:"
ORDER_SKUS = (107, 108, 109)
SINGLE_SKU = 200
TTL_MS, RETENTION_MS, OUTBOX_MAX = 900000, 60000, 1000000
T0 = 1796500000000
MAX_LAPSED = int(os.environ.get("MAX_LAPSED", "0"))
# Quoted for redis-cli, which reads `""` as one empty argument.
REQUESTER = '"' + os.environ.get("REQUESTER", "") + '"'


def shard(order_id):
    """The order's shard: FNV-1a 64 of its id, mod 16 (src/redis/keys.rs)."""
    h = 0xCBF29CE484222325
    for b in order_id.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h % 16


def setup_redis():
    for sku in ORDER_SKUS + (SINGLE_SKU,):
        print(f"HSET {PREFIX}{{{sku}}} available 1000000000 limit 5 total 1000000000")


def redis_orders(calls, per_call, first=0):
    n = first
    for _ in range(calls):
        # the buyer's rate limit off (0 attempts per second, burst 0), as by default
        keys, args = [], [TTL_MS, RETENTION_MS, OUTBOX_MAX, PREFIX + "soldout", MAX_LAPSED, 0, 0]
        for _ in range(per_call):
            n += 1
            oid, user = f"o-{n:08d}", n
            s = shard(oid)
            keys += [f"{PREFIX}{{oi:{s}}}:order:{oid}", f"{PREFIX}{{oi:{s}}}:outbox"]
            lines = ",".join(f"{k}:1" for k in ORDER_SKUS)
            # the order carries no verified pass ('0'); the SKUs have no sale terms
            args += [oid, user, lines, len(ORDER_SKUS), REQUESTER, "0"]
            for sku in ORDER_SKUS:
                keys += [
                    f"{PREFIX}{{{sku}}}",
                    f"{PREFIX}{{{sku}}}:res:{oid}",
                    f"{PREFIX}{{{sku}}}:user:{user}",
                    f"{PREFIX}{{{sku}}}:winners",
                ]
                args += [sku, 1]
        print("EVALSHA SHA", len(keys), *keys, *args)


def redis_reservations(calls, per_call, first=0):
    n = first
    s = SINGLE_SKU
    for _ in range(calls):
        keys = [f"{PREFIX}{{{s}}}", f"{PREFIX}{{{s}}}:outbox", f"{PREFIX}{{{s}}}:winners"]
        args = [s, TTL_MS, RETENTION_MS, OUTBOX_MAX, PREFIX + "soldout", 0, 0, 1, s, MAX_LAPSED]
        for _ in range(per_call):
            n += 1
            keys += [f"{PREFIX}{{{s}}}:res:r-{n:08d}", f"{PREFIX}{{{s}}}:user:{n}"]
            # no verified pass ('0'); the SKU has no sale terms
            args += [f"r-{n:08d}", n, 1, REQUESTER, "0"]
        print("EVALSHA SHA", len(keys), *keys, *args)


SEED_STOCK_KEY = f"seed:{{{SINGLE_SKU}}}:stock"


def setup_seed():
    print(f"SET {SEED_STOCK_KEY} 1000000000")


def redis_seed(calls):
    """The seed's script as its design calls it: one reservation per call."""
    for n in range(1, calls + 1):
        limit_key = f"seed:{{{SINGLE_SKU}}}:limit:{n}"
        print("EVALSHA SHA 2", SEED_STOCK_KEY, limit_key, 1, 5)


def redis_xdel(ids, per_call):
    """The acker's removal of confirmed entries: one XDEL per pass."""
    key = f"{PREFIX}{{{SINGLE_SKU}}}:outbox"
    for b in range(0, len(ids), per_call):
        print("XDEL", key, *ids[b : b + per_call])


def redis_finishes(calls, per_call, first):
    """finish.lua as the closer's batch calls it (src/redis/finish.rs): one
    bucket, status RELEASED, an expiry (the lapse counted)."""
    n = first
    s = SINGLE_SKU
    for _ in range(calls):
        keys = [f"{PREFIX}{{{s}}}"]
        args = ["RELEASED", TTL_MS + RETENTION_MS, PREFIX + "soldout", s, 0, 1, 1, 0]
        for _ in range(per_call):
            n += 1
            keys += [f"{PREFIX}{{{s}}}:res:r-{n:08d}", f"{PREFIX}{{{s}}}:user:{n}"]
            args += [n, 1]
        print("EVALSHA SHA", len(keys), *keys, *args)


LEDGER_INSERT = (
    "INSERT INTO stock_deduct_idempotent (sku_id, deduct_request_id, user_id, deduct_count, "
    "status, reason, reserved_at_ms, expires_at_ms, redis_pending, order_line) VALUES "
)


def buyers(sku, users):
    ul = ",".join(str(u) for u in users)
    return (
        "SELECT user_id, CAST(SUM(deduct_count) AS SIGNED) FROM stock_deduct_idempotent "
        f"WHERE sku_id = {sku} AND user_id IN ({ul}) AND status IN ('RESERVED', 'CONFIRMED') "
        "GROUP BY user_id;"
    )


def lock(sku):
    return (
        "SELECT sku_id, total_stock, available_stock, limit_per_user, version "
        f"FROM sku_stock WHERE sku_id = {sku} FOR UPDATE;"
    )


def setup_sql():
    for sku in ORDER_SKUS + (SINGLE_SKU,):
        print(
            "INSERT INTO sku_stock (sku_id, total_stock, available_stock, limit_per_user) "
            f"VALUES ({sku}, 1000000, 1000000, 5);"
        )


def sql_orders(orders, shape, per_tx=160):
    lines_hex = "".join(f"{c:02x}" for c in ",".join(f"{k}:1" for k in ORDER_SKUS).encode())
    for b in range(0, orders, per_tx):
        ids = [f"x{b + i}-{(b + i) * 7919 % 100003:05x}" for i in range(per_tx)]
        users = [10**12 + b + i for i in range(per_tx)]
        t = T0 + b // 10
        print("SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION;")
        for sku in ORDER_SKUS:
            print(lock(sku))
        quoted = ",".join(f"'{i}'" for i in ids)
        if shape == "lookups":
            print(
                "SELECT order_id, user_id, order_lines, status, reason, failed_sku_id, "
                f"reserved_at_ms, expires_at_ms FROM orders WHERE order_id IN ({quoted}) FOR UPDATE;"
            )
        for sku in ORDER_SKUS:
            if shape == "lookups":
                print(
                    "SELECT deduct_request_id FROM stock_deduct_idempotent "
                    f"WHERE sku_id = {sku} AND deduct_request_id IN ({quoted});"
                )
            print(buyers(sku, users))
        for sku in ORDER_SKUS:
            print(
                f"UPDATE sku_stock SET available_stock = available_stock - {per_tx}, "
                f"version = version + 1 WHERE sku_id = {sku} AND available_stock >= {per_tx};"
            )
        row = lambda sku, i, u: f"({sku},'{i}',{u},1,'RESERVED',NULL,{t},{t + TTL_MS},0,1)"
        if shape == "lookups":
            rows = [row(s, i, u) for i, u in zip(ids, users) for s in ORDER_SKUS]
        else:
            rows = [row(s, i, u) for s in ORDER_SKUS for i, u in zip(ids, users)]
        print(LEDGER_INSERT + ",".join(rows) + ";")
        orows = [
            f"('{i}',{u},X'{lines_hex}','RESERVED',NULL,NULL,{t},{t + TTL_MS})"
            for i, u in zip(ids, users)
        ]
        print(
            "INSERT INTO orders (order_id, user_id, order_lines, status, reason, failed_sku_id, "
            "reserved_at_ms, expires_at_ms) VALUES " + ",".join(orows) + ";"
        )
        print("COMMIT;")


def sql_singles(count, per_tx=500):
    s = SINGLE_SKU
    for b in range(0, count, per_tx):
        ids = [f"r{b + i}-{(b + i) * 7919 % 100003:05x}" for i in range(per_tx)]
        users = [10**12 + b + i for i in range(per_tx)]
        t = T0 + b // 10
        print("SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION;")
        print(lock(s))
        quoted = ",".join(f"'{i}'" for i in ids)
        print(
            "SELECT deduct_request_id FROM stock_deduct_idempotent "
            f"WHERE sku_id = {s} AND deduct_request_id IN ({quoted});"
        )
        print(buyers(s, users))
        print(
            f"UPDATE sku_stock SET available_stock = available_stock - {per_tx}, "
            f"version = version + 1 WHERE sku_id = {s} AND available_stock >= {per_tx};"
        )
        rows = [
            f"({s},'{i}',{u},1,'RESERVED',NULL,{t},{t + TTL_MS},0,0)" for i, u in zip(ids, users)
        ]
        print(LEDGER_INSERT + ",".join(rows) + ";")
        print("COMMIT;")


LEDGER_COLUMNS = (
    "sku_id, deduct_request_id, user_id, deduct_count, status, reason, "
    "reserved_at_ms, expires_at_ms, redis_pending, client"
)


def single_ids(b, per_tx):
    """The request ids sql_singles gives rows b .. b + per_tx - 1."""
    return [f"r{i}-{i * 7919 % 100003:05x}" for i in range(b, b + per_tx)]


EXPIRE_PARTS = ("read", "lock", "locked_read", "update", "give_back", "events", "clear")


def sql_expire(count, per_tx, events, parts=EXPIRE_PARTS):
    """The closer's batched expiry of `per_tx` rows of one SKU, the
    statements of lifecycle::expire_many in order: the rows read, then one
    transaction (SKU row locked, the rows locked, one conditional update, the
    stock given back, the events staged), then the pending flags cleared.
    `parts` (a subset of EXPIRE_PARTS) leaves the others out, to see where a
    release's instructions go."""
    s = SINGLE_SKU
    for b in range(0, count, per_tx):
        ids = single_ids(b, min(per_tx, count - b))
        n = len(ids)
        t = T0 + TTL_MS + b
        quoted = ",".join(f"'{i}'" for i in sorted(ids))
        rows = (
            f"SELECT {LEDGER_COLUMNS} FROM stock_deduct_idempotent WHERE sku_id = {s} "
            f"AND order_line = 0 AND deduct_request_id IN ({quoted})"
        )
        if "read" in parts:
            print(rows + ";")
        print("SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION;")
        if "lock" in parts:
            print(
                "SELECT sku_id, total_stock, available_stock, limit_per_user, buckets, "
                f"low_stock_threshold FROM sku_stock WHERE sku_id = {s} FOR UPDATE;"
            )
        if "locked_read" in parts:
            print(rows + " ORDER BY deduct_request_id FOR UPDATE;")
        if "update" in parts:
            print(
                "UPDATE stock_deduct_idempotent SET status = 'RELEASED', reason = 'EXPIRED', "
                f"finished_at_ms = {t}, redis_pending = 1 WHERE sku_id = {s} "
                f"AND status = 'RESERVED' AND deduct_request_id IN ({quoted});"
            )
        if "give_back" in parts:
            print(
                f"UPDATE sku_stock SET available_stock = available_stock + {n}, "
                f"version = version + 1 WHERE sku_id = {s} AND available_stock + {n} <= total_stock;"
            )
        if events and "events" in parts:
            values = []
            for k, i in enumerate(ids):
                eid = f"{b + k:08x}-0000-4000-8000-{(b + k) * 7919:012x}"
                data = (
                    f'{{"available":{999000 + b + k},"count":1,"expires_at_ms":{t},'
                    f'"reason":"expired","request_id":"{i}","sku_id":{s},'
                    f'"status":"released","user_id":{10**12 + b + k}}}'
                )
                hexed = [
                    x.encode().hex()
                    for x in (eid, "stockd.reservation.released", f"skus/{s}/reservations/{i}")
                ]
                values.append(f"(X'{hexed[0]}',X'{hexed[1]}',X'{hexed[2]}',{t},X'{data.encode().hex()}')")
            print(
                "INSERT INTO event_outbox (event_id, type, subject, time_ms, data) VALUES "
                + ",".join(values)
                + ";"
            )
        print("COMMIT;")
        if "clear" in parts:
            print(
                f"UPDATE stock_deduct_idempotent SET redis_pending = 0 WHERE sku_id = {s} "
                f"AND deduct_request_id IN ({quoted});"
            )


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    kind, rest = argv[1], argv[2:]
    if kind == "redis-setup":
        setup_redis()
    elif kind == "redis-order":
        redis_orders(int(rest[0]), int(rest[1]), int(rest[2]) if len(rest) > 2 else 0)
    elif kind == "redis-reserve":
        redis_reservations(int(rest[0]), int(rest[1]), int(rest[2]) if len(rest) > 2 else 0)
    elif kind == "redis-seed":
        setup_seed() if rest[0] == "setup" else redis_seed(int(rest[0]))
    elif kind == "redis-xdel":
        redis_xdel(sys.stdin.read().split(), int(rest[0]))
    elif kind == "redis-finish":
        redis_finishes(int(rest[0]), int(rest[1]), int(rest[2]))
    elif kind == "sql-expire":
        parts = rest[3].split(",") if len(rest) > 3 else EXPIRE_PARTS
        sql_expire(int(rest[0]), int(rest[1]), rest[2] == "1", parts)
    elif kind == "sql-setup":
        setup_sql()
    elif kind == "sql-orders":
        sql_orders(int(rest[0]), rest[1] if len(rest) > 1 else "current")
    elif kind == "sql-singles":
        sql_singles(int(rest[0]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
