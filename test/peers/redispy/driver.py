"""The redis-py peer driver: redis.lock.Lock (Redis.lock()), speaking the
line protocol of test/peers/README.md on stdin/stdout, so that redislock's TAP
tests (test/lib/LockPeer.pm) can run a real Python lock client against the
same Redis as SQL sessions.  Single server only (redis-py has no Redlock).

Every op runs in a thread of its own; locks are made with
thread_local=False, since a test may lock in one op's thread and unlock in
another's (redis-py's default keeps the token in the acquiring thread).
"""

import os
import sys
import threading
import time

import redis
from redis.exceptions import LockError, LockNotOwnedError

out_lock = threading.Lock()
locks = {}
locks_lock = threading.Lock()


def fatal(msg):
    sys.stderr.write("redispy-driver: %s\n" % msg)
    sys.exit(2)


def reply(line):
    line = line.replace("\r", " ").replace("\n", "; ")
    with out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def ms(s):
    try:
        n = int(s)
    except ValueError:
        n = -1
    if n < 0:
        raise ValueError("bad milliseconds %s" % s)
    return n


def need(a, n, usage):
    if len(a) != n:
        raise ValueError("usage: " + usage)


class Driver:
    def __init__(self, url, sleep):
        self.r = redis.Redis.from_url(url)
        self.r.ping()
        self.sleep = sleep

    # wait_ms 0 is one attempt (blocking=False); otherwise redis-py's own
    # loop: a try every `sleep` seconds (default 0.1) until blocking_timeout.
    def lock(self, name, lease, wait):
        lk = self.r.lock(name, timeout=lease / 1000.0, sleep=self.sleep, thread_local=False)
        if wait == 0:
            got = lk.acquire(blocking=False)
        else:
            got = lk.acquire(blocking=True, blocking_timeout=wait / 1000.0)
        return lk if got else None

    def counter(self, name, key, n, lease, wait, hold=0, gap=0):
        for i in range(n):
            lk = None
            while lk is None:
                lk = self.lock(name, lease, wait)
            v = int(self.r.get(key) or 0)
            if hold:
                time.sleep(hold / 1000.0)
            self.r.set(key, v + 1)
            try:
                lk.release()
            except LockError as e:
                raise RuntimeError("round %d: unlock: %s: %s" % (i, type(e).__name__, e))
            if gap:
                time.sleep(gap / 1000.0)
        return str(n)

    def run(self, op, a):
        if op == "lock":
            need(a, 3, "lock <name> <lease_ms> <wait_ms>")
            lk = self.lock(a[0], ms(a[1]), ms(a[2]))
            if lk is None:
                return "false"
            with locks_lock:
                locks[a[0]] = lk
            return "true"
        if op == "unlock":
            need(a, 1, "unlock <name>")
            lk = held(a[0])
            lk.release()
            with locks_lock:
                if locks.get(a[0]) is lk:
                    del locks[a[0]]
            return "true"
        if op == "extend":
            need(a, 2, "extend <name> <lease_ms>")
            lk = held(a[0])
            try:
                lk.extend(ms(a[1]) / 1000.0, replace_ttl=True)
            except LockNotOwnedError:
                return "false"
            return "true"
        if op == "key":
            need(a, 1, "key <name>")
            return self.r.lock(a[0]).name
        if op == "counter":
            if not 5 <= len(a) <= 7:
                raise ValueError("usage: counter <name> <counter_key> <n> <lease_ms> <wait_ms> [<hold_ms> [<gap_ms>]]")
            return self.counter(a[0], a[1], *[ms(x) for x in a[2:]])
        if op == "versions":
            return "redis-py=%s python=%s" % (redis.__version__, sys.version.split()[0])
        raise ValueError("unknown op %s" % op)


def held(name):
    with locks_lock:
        lk = locks.get(name)
    if lk is None:
        raise ValueError("no lock held under this name")
    return lk


def serve(d, tag, op, a):
    try:
        v = d.run(op, a)
    except Exception as e:  # every error is the op's answer, not the driver's end
        reply("%s err %s: %s" % (tag, type(e).__name__, e))
        return
    reply("%s ok %s" % (tag, v))


def main():
    args = sys.argv[1:]
    if not args or args[0] != "redispy":
        fatal("usage: driver.py redispy url=redis://HOST:PORT [sleep=SECONDS]")
    urls, sleep = [], 0.1
    for a in args[1:]:
        k, eq, v = a.partition("=")
        if not eq:
            fatal("bad option %s (want name=value)" % a)
        if k == "url":
            urls.append(v)
        elif k == "sleep":
            sleep = float(v)
        else:
            fatal("unknown option %s" % k)
    if len(urls) != 1:
        fatal("redis-py's Lock takes exactly one url=")
    try:
        d = Driver(urls[0], sleep)
    except Exception as e:
        fatal("connect: %s" % e)
    reply("ready redispy %s" % redis.__version__)
    for line in sys.stdin:
        w = line.split()
        if not w:
            continue
        if len(w) < 2:
            reply("%s err no op" % w[0])
            continue
        if w[1] == "quit":
            reply("%s ok bye" % w[0])
            sys.stdout.flush()
            os._exit(0)
        threading.Thread(target=serve, args=(d, w[0], w[1], w[2:]), daemon=True).start()
    sys.exit(0)


if __name__ == "__main__":
    main()
