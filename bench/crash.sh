#!/bin/bash
# crash.sh: the crash test of tests/test_crash.py with many crash points.
#
# Four client threads write, replace, add, delete and incr their own keys
# on a server whose items live in a memory file on /dev/shm; the server is
# SIGKILLed at a random moment and restarted on the same file, POINTS
# times (every other killed run under the power-loss simulator,
# -o memory_file_strict).  After each restart every key must hold its last
# acknowledged state or the one of the request in flight.  The summary
# says how many points and keys were checked, how many writes were
# acknowledged, and how many were lost or torn (both must be 0).
# POLICY picks the tier policy: pmem, or cache (where the checks' reads
# copy items into DRAM and later requests go through the copies).
#
# Without MCPM_BIN the server is built out of tree in BUILD_DIR (configure
# once, then make), so a tree others build in is left alone.

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
POINTS=${POINTS:-200}
SEED=${SEED:-4242}
POLICY=${POLICY:-pmem}
BUILD_DIR=${BUILD_DIR:-/tmp/mcpm-crash-build}
PYTHON=${PYTHON:-}

usage() {
    cat <<EOF
usage: bench/crash.sh
environment (defaults in brackets):
  MCPM_BIN [built in BUILD_DIR]   BUILD_DIR [/tmp/mcpm-crash-build]
  POINTS [200] crash points       SEED [4242] (the run's random choices)
  POLICY [pmem] or cache
  PYTHON [.venv/bin/python if present, else python3]
EOF
}

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    usage
    exit 0
fi

die() {
    echo "crash.sh: $*" >&2
    exit 1
}

build() {
    mkdir -p "$BUILD_DIR"
    if [ ! -f "$BUILD_DIR/Makefile" ]; then
        echo "== configure in $BUILD_DIR"
        (cd "$BUILD_DIR" && "$ROOT/configure" -q) || die "configure failed"
    fi
    echo "== make in $BUILD_DIR"
    make -C "$BUILD_DIR" -j"$(nproc)" >/dev/null || die "make failed"
    MCPM_BIN=$BUILD_DIR/memcached-pm/memcached-pm
}

if [ -z "${MCPM_BIN:-}" ]; then
    build
fi
[ -x "$MCPM_BIN" ] || die "no server binary at $MCPM_BIN"
if [ -z "$PYTHON" ]; then
    PYTHON=python3
    [ -x "$ROOT/.venv/bin/python" ] && PYTHON=$ROOT/.venv/bin/python
fi

SUMMARY=$(mktemp /tmp/mcpm-crash-summary.XXXXXX)
trap 'rm -f "$SUMMARY"' EXIT

case $POLICY in
pmem|cache) ;;
*) die "POLICY is pmem or cache" ;;
esac
# Under cache the test runs half its points: ask for twice as many.
[ "$POLICY" = cache ] && POINTS=$((POINTS * 2))

echo "== crash points, tier_policy=$POLICY, seed $SEED, server $MCPM_BIN"
status=0
(cd "$ROOT" && MCPM_BIN=$MCPM_BIN MCPM_CRASH_POINTS=$POINTS \
    MCPM_CRASH_SEED=$SEED MCPM_CRASH_SUMMARY=$SUMMARY \
    "$PYTHON" -m pytest "tests/test_crash.py::test_sigkill_loses_nothing_acknowledged[$POLICY]" \
    -q -p no:cacheprovider) || status=$?
[ "$POLICY" = cache ] && POINTS=$((POINTS / 2))

"$PYTHON" - "$SUMMARY" "$POINTS" "$status" <<'EOF'
import json, sys
path, points, status = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    with open(path) as f:
        t = json.load(f)
except ValueError:
    sys.exit("crash.sh: the test left no summary")
print("crash points     %d of %d" % (t["points"], points))
print("keys checked     %d" % t["keys_checked"])
print("ops acknowledged %d" % t["ops_acked"])
print("in flight        %d happened, %d did not"
      % (t["inflight_applied"], t["inflight_dropped"]))
print("lost writes      %d (must be 0)" % t["lost_writes"])
print("torn values      %d served, %d dropped by recovery (must be 0)"
      % (t["torn_values"], t["torn_dropped"]))
print("time             %.1f s" % t["seconds"])
print("result           %s" % ("PASS" if status == 0 else "FAIL"))
EOF
exit "$status"
