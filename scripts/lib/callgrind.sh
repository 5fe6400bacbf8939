# Sourced by the instruction-counting scripts (bench-instructions.sh,
# profile-release-sql.sh): how a process running under
# `valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/cg.%p.out"`
# is measured. Needs $OUT, the directory of its dumps.

# instructions <pid> <events> <command...>: runs the command with the pid's
# instrumentation on, then prints the instructions counted per event.
instructions() {
    local pid=$1 events=$2
    shift 2
    count_from "$pid"
    "$@" >/dev/null
    count_until "$pid" "$events"
}

# count_from <pid>: zeroes the pid's counters and turns its instrumentation
# on (for a window the caller closes with count_until, e.g. two processes
# measured over the same requests).
count_from() {
    callgrind_control -z "$1" >/dev/null 2>&1
    callgrind_control -i on "$1" >/dev/null 2>&1
}

# count_until <pid> <events>: turns the pid's instrumentation off, dumps, and
# prints the instructions counted per event; the dump stays as
# $OUT/cg.<pid>.out.<n> (last_dump) for callgrind_annotate, until the next
# count of the pid or the script's end; with KEEP_DUMPS=<dir> each is also
# copied there (the profile of every window, kept).
count_until() {
    local pid=$1 events=$2
    callgrind_control -i off "$pid" >/dev/null 2>&1
    rm -f "$OUT"/cg.$pid.out.*
    callgrind_control -d "$pid" >/dev/null 2>&1
    local dump=""
    for _ in $(seq 600); do
        dump=$(last_dump "$pid")
        [ -n "$dump" ] && grep -q '^totals:' "$dump" && break
        sleep 0.1
    done
    if [ -n "${KEEP_DUMPS:-}" ]; then
        mkdir -p "$KEEP_DUMPS"
        cp "$dump" "$KEEP_DUMPS/"
    fi
    local total
    total=$(awk '/^totals:/ {print $2; exit}' "$dump")
    echo $((total / events))
}

# last_dump <pid>: the newest dump of the pid, or nothing.
last_dump() {
    ls -t "$OUT"/cg.$1.out.* 2>/dev/null | head -1 || true
}
