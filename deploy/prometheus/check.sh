#!/bin/sh
# Validates the Prometheus alerting rules; installs nothing.
#
#   deploy/prometheus/check.sh          # exit 0 = rules valid and unit tests pass
#
#   1. promtool check rules alerts.yml       (syntax, PromQL, templates)
#   2. promtool test rules alerts_test.yml   (each alert fires, and only, when it should)
#
# promtool ships in Debian's `prometheus` package (apt-get install prometheus; the
# daemon need not run) or in the prometheus release tarball. PROMTOOL=/path overrides.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
promtool=${PROMTOOL:-promtool}

if ! command -v "$promtool" >/dev/null 2>&1; then
    echo "check: FAIL: promtool not found (apt-get install prometheus, or set PROMTOOL)" >&2
    exit 2
fi

echo "check: $("$promtool" --version 2>&1 | head -n 1)"
cd "$here"
"$promtool" check rules alerts.yml
"$promtool" test rules alerts_test.yml
echo "check: alert rules OK"
