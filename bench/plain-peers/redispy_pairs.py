# redispy_pairs.py: redis-py's own lock/unlock rate, for bench/plain.pl.
# THREADS threads share one redis.Redis client (its connection pool), each
# looping Lock(name_i, timeout=LEASE).acquire(blocking=False) + release()
# on a lock name of its own for SECONDS after a 1 s warm-up; every acquire
# must succeed.  Run with the interpreter of test/peers' redis-py build
# (bash test/peers/build.sh redispy: redis-py pinned there).
# Usage: python redispy_pairs.py URL SECONDS THREADS PREFIX LEASE_MS
# Prints: client=redispy version=V threads=N pairs=P seconds=S rate=R
import sys
import threading
import time

import redis


def main():
    url, secs, threads, prefix, lease_ms = sys.argv[1:6]
    secs, threads, lease = float(secs), int(threads), int(lease_ms) / 1000.0
    r = redis.Redis.from_url(url)
    counts = [0] * threads
    state = {"measure": False, "stop": False}
    errors = []

    def loop(i):
        lock = r.lock("%s%d" % (prefix, i), timeout=lease)
        n = 0
        try:
            while not state["stop"]:
                if not lock.acquire(blocking=False):
                    raise RuntimeError("not acquired")
                lock.release()
                if state["measure"]:
                    n += 1
        except Exception as e:  # reported below: a failed pair ends the run
            errors.append(repr(e))
        counts[i] = n

    ts = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    time.sleep(1.0)
    state["measure"] = True
    t0 = time.monotonic()
    time.sleep(secs)
    state["stop"] = True
    elapsed = time.monotonic() - t0
    for t in ts:
        t.join()
    if errors:
        sys.exit("redispy_pairs: " + errors[0])
    pairs = sum(counts)
    print("client=redispy version=%s threads=%d pairs=%d seconds=%.3f rate=%.1f"
          % (redis.__version__, threads, pairs, elapsed, pairs / elapsed))


main()
