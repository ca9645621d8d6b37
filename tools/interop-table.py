#!/usr/bin/env python3
"""Renders the plain-layout clients' table of docs/lock-clients.md from the
results the peer tests wrote into $REDISLOCK_INTEROP_OUT (the contract is in
the page's source, in the comment above the table):
  <test>.clients  what test/t/540_plain_peers.pl and 545_plain_shedlock_spring.pl
                  write (test/peers/README.md): a header line "case client
                  versions check result detail", then one tab-separated line
                  per case and check; a wake check's detail is "<path>: <ms>
                  ms", or "<ms> ms" for the checks of CHECK_PATHS.

The table: client, version tested, the key it uses, how a SQL waiter wakes
(each wake path measured, with its latency), what to set.  Versions, keys,
latencies and failed checks come only from the results; the client's long
name, the key it uses when the results do not say, and "what to set" are
this tool's own (CLIENTS below).  A client of CLIENTS the results do not
have gets a row saying so; a later line of the same client and setup
replaces an earlier one.

Usage:
  python3 tools/interop-table.py RESULTS.clients...            the block, to stdout
  python3 tools/interop-table.py --write PAGE RESULTS.clients...
        replaces what is between <!-- interop-table:begin --> and
        <!-- interop-table:end --> in PAGE (docs/lock-clients.md)
Exits 1 on a file it cannot read, a line it does not understand, or a page
without the markers.
"""
import datetime
import os
import re
import sys

BEGIN = '<!-- interop-table:begin -->'
END = '<!-- interop-table:end -->'

# client -> (long name, the key it uses for name X, what to set)
CLIENTS = {
    'redsync': ('redsync (Go, `github.com/go-redsync/redsync/v4`)', '`X`, the mutex name',
                "`layout => 'plain'`; Redlock: `redislock.redlock_nodes` = the same masters"),
    'redlock': ('node `redlock` (with ioredis)', '`X`, each resource',
                "`layout => 'plain'`; several resources: `redis_lock_acquire_all(ARRAY[...], "
                "layout => 'plain')`; Redlock: the same masters"),
    'redispy': ('redis-py `Lock`', '`X`, the lock name', "`layout => 'plain'`"),
    'shedlock': ('ShedLock Redis provider',
                 '`job-lock:<env>:X` (`job-lock:default:X` by default) for `@SchedulerLock(name = "X")`',
                 "`layout => 'plain'`; on the Spring side **`safeUpdate(true)`** ([ShedLock](#shedlock))"),
    'spring': ('Spring Integration `RedisLockRegistry`', '`<registryKey>:X` for `registry.obtain("X")`',
               "`layout => 'plain'`; pub/sub type: `redislock.spring_registries = '<registryKey>'`"),
}
ORDER = ['redsync', 'redlock', 'redispy', 'shedlock', 'spring']

# 540_plain_peers.pl's cases and wake paths, in this tool's words
CASE_SETUP = {'redsync-redlock': 'Redlock, 3 masters', 'redlock-multi': 'several resources'}
TSV_PATHS = {
    'unlock, notifications on': 'release_notify',
    'lease end, notifications on': 'expiry_notify',
    'unlock, notifications off': 'release_poll',
    'lease end, notifications off': 'expiry_poll',
    'unlock, Redlock': 'release_redlock',
    'lease end, Redlock': 'expiry_redlock',
    'SQL release': 'sql_release_sql',
}

# 545_plain_shedlock_spring.pl's checks whose detail is a bare "<ms> ms"
CHECK_PATHS = {
    'a SQL waiter wakes when the client unlocks': 'release_notify',
    "a SQL waiter wakes when the client's lease ends": 'expiry_notify',
    'without keyspace notifications: a SQL waiter wakes when the client unlocks': 'release_poll',
    "without keyspace notifications: a SQL waiter wakes when the client's lease ends": 'expiry_poll',
    "without keyspace notifications, with spring_registries: a SQL waiter wakes on Spring's unlock message": 'release_spring',
    'without keyspace notifications: a SQL release lets the waiting client in (it polls)': 'sql_release',
    'with spring_registries: a SQL release wakes the Spring pub/sub waiter': 'sql_release',
}

# wake path -> words, in the order shown
# (by the server's state, not the mechanism: a plain multi-lock waiter polls
# even where the server notifies, see the page's "Waking")
PATHS = [
    ('release_notify', 'its release, notifications on'),
    ('expiry_notify', 'its lease end, notifications on'),
    ('release_spring', 'its release, Spring channel'),
    ('release_poll', 'its release, notifications off'),
    ('expiry_poll', 'its lease end, notifications off'),
    ('release_redlock', 'its release, Redlock'),
    ('expiry_redlock', 'its lease end, Redlock'),
    ('sql_release_sql', 'a SQL release'),
    ('sql_release', "a SQL release, the client's own waiter"),
]


def fail(msg):
    sys.exit('interop-table: ' + msg)


def read_tsv(f, fh, rows):
    """540_plain_peers.pl's <test>.clients into rows."""
    head = fh.readline().rstrip('\r\n')
    if head.split('\t') != ['case', 'client', 'versions', 'check', 'result', 'detail']:
        fail('%s: not a results file (its header)' % f)
    test = os.path.basename(f).rsplit('.', 1)[0]
    for n, line in enumerate(fh, 2):
        line = line.rstrip('\r\n')
        if not line:
            continue
        cells = line.split('\t')
        if len(cells) != 6 or cells[4] not in ('works', 'fails'):
            fail('%s line %d: cannot read %r' % (f, n, line))
        case, client, versions, check, result, detail = cells
        k = (client, CASE_SETUP.get(case, 'single' if case == client else case))
        r = rows.setdefault(k, {'client': client, 'test': test, 'wake': {}, 'checks': {}, 'key': None})
        m = re.match(r'%s=(\S+)' % ('redis-py' if client == 'redispy' else re.escape(client)), versions)
        r['version'] = m.group(1) if m else versions.split(' ')[0].split('=')[-1]
        r['versions'] = versions
        r['checks'][check] = 'pass' if result == 'works' else 'fail'
        m = re.match(r'(.+): ([\d.]+) ms$', detail)
        if m and m.group(1) in TSV_PATHS:
            r['wake'][TSV_PATHS[m.group(1)]] = {'ms': float(m.group(2))}
        m = re.match(r'([\d.]+) ms$', detail)
        if m and check in CHECK_PATHS:    # 545's rows: the check names the path
            r['wake'][CHECK_PATHS[check]] = {'ms': float(m.group(1))}


def read(files):
    """{(client, setup): record}, in first-seen order; newest file time."""
    rows = {}
    newest = 0
    for f in files:
        try:
            with open(f, encoding='utf-8') as fh:
                read_tsv(f, fh, rows)
        except OSError as e:
            fail('%s: %s' % (f, e))
        newest = max(newest, os.stat(f).st_mtime)
    return rows, newest


def ms(v):
    return ('%.0f ms' % v) if v >= 10 else ('%.1f ms' % v)


def version_cell(r):
    """The library's version, and what else the driver named (its Redis
    client, the runtime), without repeating the library."""
    others = []
    for w in (r.get('versions') or '').split():
        k, _, v = w.partition('=')
        if v != r['version']:
            others.append(v if v.startswith(k) else '%s %s' % (k, v))
    return r['version'] + (' (%s)' % ', '.join(others) if others else '')


def wake_cell(wake):
    known = [p for p, _ in PATHS]
    parts = ['%s %s' % (words, ms(wake[p]['ms'])) + (' (n=%d)' % wake[p]['n'] if wake[p].get('n', 1) > 1 else '')
             for p, words in PATHS if p in wake]
    parts += ['%s %s' % (p, ms(wake[p]['ms'])) for p in sorted(wake) if p not in known]
    return '; '.join(parts) if parts else 'not measured'


def render(rows, newest):
    when = datetime.datetime.fromtimestamp(newest, datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
    tests = sorted({r.get('test', '') for r in rows.values()} - {''})
    out = ['<!-- generated by tools/interop-table.py from the peer tests\' results; do not edit -->',
           'From the run of %s%s. Wake-up latencies: milliseconds from the '
           'moment the lock became free (the client\'s release, the key\'s expiry, '
           'a SQL release) to the SQL waiter\'s return (a median where n is shown).' % (
               when, ' (%s)' % ', '.join(tests) if tests else ''),
           '',
           '| client | version tested | key it uses (for name or job `X`) | how a SQL waiter wakes | what to set |',
           '|---|---|---|---|---|']

    def order(k):
        c, setup = k
        return (ORDER.index(c) if c in ORDER else len(ORDER), c, setup != 'single', setup)

    lines = []
    for c in ORDER:
        if not any(k[0] == c for k in rows):
            name, key, what = CLIENTS[c]
            lines.append((order((c, 'single')),
                          '| %s | not run in these results | %s | not measured | %s |' % (name, key, what)))
    for k in rows:
        r = rows[k]
        client, setup = k
        name, key, what = CLIENTS.get(client, ('`%s`' % client, '', ''))
        if setup != 'single':
            name += ', ' + setup
        version = version_cell(r)
        if r.get('key'):
            key = '`%s`' % r['key'] + (' for `%s`' % r['name'] if r.get('name') and r['name'] != r['key'] else '')
        checks = r.get('checks') or {}
        failed = sorted(c for c, v in checks.items() if v != 'pass')
        if checks and not failed:
            wake_ok = '; %d checks passed' % len(checks)
        else:
            wake_ok = ''
        wake = wake_cell(r.get('wake', {}))
        if failed:
            wake += '; **failed: %s**' % ', '.join(failed)
        lines.append((order(k), '| %s | %s%s | %s | %s | %s |' % (name, version, wake_ok, key, wake, what)))
    out += [line for _, line in sorted(lines)]
    return '\n'.join(out) + '\n'


def main():
    args = sys.argv[1:]
    page = None
    if args[:1] == ['--write']:
        if len(args) < 2:
            sys.exit(__doc__)
        page, args = args[1], args[2:]
    if not args:
        sys.exit(__doc__)
    rows, newest = read(args)
    if not rows:
        fail('no results in %s' % ' '.join(args))
    block = render(rows, newest)
    if page is None:
        sys.stdout.write(block)
        return
    text = open(page, encoding='utf-8').read()
    m = re.search(re.escape(BEGIN) + r'\n.*?' + re.escape(END), text, re.S)
    if not m:
        fail('%s: no %s ... %s block' % (page, BEGIN, END))
    text = text[:m.start()] + BEGIN + '\n' + block + END + text[m.end():]
    with open(page, 'w', encoding='utf-8') as fh:
        fh.write(text)
    print('interop-table: wrote %d rows into %s' % (len(rows), page))


if __name__ == '__main__':
    main()
