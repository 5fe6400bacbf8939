#!/bin/sh
# Validates the Grafana dashboard; installs nothing.
#
#   deploy/grafana/check.sh             # exit 0 = valid
#
#   1. stockd.json is JSON with uid "stockd", a `datasource` variable of type
#      prometheus, unique panel ids, and every panel querying "${datasource}".
#   2. Every panel query is valid PromQL: the queries, with Grafana's $__rate_interval
#      and $sku filled in, are checked as recording rules by `promtool check rules`
#      (skipped with a note when promtool is absent; PROMTOOL=/path overrides).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
promtool=${PROMTOOL:-promtool}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stockd-grafana.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

python3 - "$here/stockd.json" "$tmp/queries.yml" <<'PY'
import json, sys

path, rules_out = sys.argv[1], sys.argv[2]
with open(path) as f:
    d = json.load(f)  # raises, exit 1, on invalid JSON
errors = []
if d.get("uid") != "stockd":
    errors.append('uid is not "stockd"')
variables = {v["name"]: v for v in d.get("templating", {}).get("list", [])}
ds = variables.get("datasource")
if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
    errors.append("no `datasource` variable of type prometheus")
ids, exprs = set(), []
for p in d["panels"]:
    if p["id"] in ids:
        errors.append(f"duplicate panel id {p['id']}")
    ids.add(p["id"])
    if p["type"] == "row":
        continue
    if p.get("datasource", {}).get("uid") != "${datasource}":
        errors.append(f"panel {p['title']!r} does not use ${{datasource}}")
    for t in p.get("targets", []):
        exprs.append((p["title"], t["expr"]))
if errors:
    sys.exit("stockd.json: " + "; ".join(errors))
with open(rules_out, "w") as f:
    f.write("groups:\n  - name: dashboard\n    rules:\n")
    for i, (title, expr) in enumerate(exprs):
        expr = expr.replace("$__rate_interval", "1m").replace("$sku", ".*")
        f.write(f"      - record: dashboard:query_{i}\n        expr: {json.dumps(expr)}\n")
print(f"check: stockd.json is valid JSON: {len(d['panels'])} panels, {len(exprs)} queries")
PY

if command -v "$promtool" >/dev/null 2>&1; then
    if ! out=$("$promtool" check rules "$tmp/queries.yml" 2>&1); then
        printf '%s\n' "$out" >&2
        echo "check: FAIL: a dashboard query is not valid PromQL (rule N = query N+1)" >&2
        exit 1
    fi
    echo "check: every dashboard query is valid PromQL (promtool)"
else
    echo "check: promtool not found; PromQL of the queries NOT checked" >&2
fi
echo "check: dashboard OK"
