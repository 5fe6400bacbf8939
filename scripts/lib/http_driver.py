#!/usr/bin/env python3
"""The fixed client of scripts/bench-instructions.sh's HTTP counts: the same
requests, connections and order for the actix floor (examples/actix_floor.rs)
and for stockd's api, so their instructions per request compare.

  http_driver.py <host:port> <sku> <requests> <connections> <tag> [token] [passes]

Sends <requests> one-unit reservations `POST /v1/skus/<sku>/reservations`,
request ids `<tag><n>` and a buyer each (user n, from a base set by <tag>),
over <connections> keep-alive connections, each closed-loop (its next request
after its answer), the requests split evenly. With [passes] (lines
`<user> <pass>`, scripts/lib/mint_passes.py), request n is line n's buyer
and carries its pass (contract §20). Prints one line
`statuses=<status:count,...> body_bytes=<mean>`; exits 1 unless every answer
was 201. Standard library only; its own cost is not counted (it runs outside
valgrind).
"""

import http.client
import sys
import threading
import zlib


def drive(host, port, sku, numbers, tag, token, passes, statuses, sizes, lock):
    conn = http.client.HTTPConnection(host, port, timeout=600)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    # A buyer base per tag: each run's buyers are new to the SKU.
    base = 10**9 + (zlib.crc32(tag.encode()) % 10**6) * 10**4
    for n in numbers:
        if passes:
            user, token_text = passes[n]
            body = (f'{{"request_id":"{tag}{n}","user_id":{user},"count":1,'
                    f'"pass":"{token_text}"}}')
        else:
            body = f'{{"request_id":"{tag}{n}","user_id":{base + n},"count":1}}'
        conn.request("POST", f"/v1/skus/{sku}/reservations", body, headers)
        resp = conn.getresponse()
        data = resp.read()
        with lock:
            statuses[resp.status] = statuses.get(resp.status, 0) + 1
            sizes.append(len(data))
    conn.close()


def main(argv):
    if len(argv) < 6:
        print(__doc__, file=sys.stderr)
        return 2
    host, port = argv[1].rsplit(":", 1)
    sku, requests, connections, tag = argv[2], int(argv[3]), int(argv[4]), argv[5]
    token = argv[6] if len(argv) > 6 else ""
    passes = []
    if len(argv) > 7 and argv[7]:
        with open(argv[7]) as f:
            passes = [tuple(line.split()) for line in f if line.strip()]
        if len(passes) < requests:
            print(f"{argv[7]}: {len(passes)} passes for {requests} requests", file=sys.stderr)
            return 2
    statuses, sizes, lock = {}, [], threading.Lock()
    threads = [
        threading.Thread(
            target=drive,
            args=(host, int(port), sku, range(c, requests, connections), tag, token,
                  passes, statuses, sizes, lock),
        )
        for c in range(connections)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counts = ",".join(f"{s}:{n}" for s, n in sorted(statuses.items()))
    mean = sum(sizes) / len(sizes) if sizes else 0
    print(f"statuses={counts} body_bytes={mean:.1f}")
    return 0 if set(statuses) == {201} and sum(statuses.values()) == requests else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
