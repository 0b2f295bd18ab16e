#!/bin/sh
# Run every test executable under valgrind with a full leak check.
# Usage: tools/valgrind-tests.sh [build-dir]
BUILD=${1:-build}
cd "$(dirname "$0")/../tests" || exit 1
status=0
for t in ../"$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    if valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect \
        --error-exitcode=99 "$t" > /tmp/tp-valgrind.log 2>&1; then
        echo "valgrind ok   $(basename "$t")"
    else
        echo "valgrind FAIL $(basename "$t")"
        tail -40 /tmp/tp-valgrind.log
        status=1
    fi
done
exit $status
