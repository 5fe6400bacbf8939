# Sourced by the instruction-counting scripts (bench-instructions.sh,
# profile-release-sql.sh): how a server running under
# `valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/cg.%p.out"`
# is measured. Needs $OUT, the directory of its dumps.

# instructions <pid> <events> <command...>: runs the command with the pid's
# instrumentation on, then prints the instructions counted per event.
instructions() {
    local pid=$1 events=$2
    shift 2
    callgrind_control -z "$pid" >/dev/null 2>&1
    callgrind_control -i on "$pid" >/dev/null 2>&1
    "$@" >/dev/null
    callgrind_control -i off "$pid" >/dev/null 2>&1
    rm -f "$OUT"/cg.$pid.out.*
    callgrind_control -d "$pid" >/dev/null 2>&1
    local dump=""
    for _ in $(seq 100); do
        dump=$(ls -t "$OUT"/cg.$pid.out.* 2>/dev/null | head -1 || true)
        [ -n "$dump" ] && grep -q '^totals:' "$dump" && break
        sleep 0.1
    done
    local total
    total=$(awk '/^totals:/ {print $2; exit}' "$dump")
    echo $((total / events))
}
