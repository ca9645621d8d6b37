#!/usr/bin/env python3
"""Checks two lists of the user documentation against the code, so that
neither can fall behind it:

1. The least-privilege ACL of docs/security.md (the block marked
   `<!-- doctest: acl -->`) grants exactly the commands the Lua scripts run
   (`redis.call('x'` / `redis.pcall('x'` in lua/*.lua, the way
   test/t/435_acl.pl reads them) plus the commands of the permission table
   that follows it (the rows naming `+command`s, not the scripts' row).
2. Every SQLSTATE the C code raises to users (the ERRCODE_* names in
   src/*.c, resolved through PostgreSQL's utils/errcodes.h) has a row in
   the Errors table of docs/sql-reference.md, and every row names a
   SQLSTATE the code raises.  NOT_RAISED lists the ERRCODE_* names the code
   mentions without raising them to users, with the reason.

Prints what differs; exits 1 if anything does.

Usage: check-docs.py ROOT PATH/TO/utils/errcodes.h
"""
import glob
import os
import re
import sys

# ERRCODE_* names in src/*.c that are no error a user gets from redislock.
NOT_RAISED = {
    'ERRCODE_QUERY_CANCELED': 'compared in onlost.c (PostgreSQL raises it on a cancel)',
    'ERRCODE_ADMIN_SHUTDOWN': 'compared in onlost.c (PostgreSQL raises it on terminate)',
    'ERRCODE_WARNING': 'the SQLSTATE of a WARNING, not of an error',
    'ERRCODE_TO_CATEGORY': 'a macro of PostgreSQL, not an error code',
    'ERRCODE_CONNECTION_EXCEPTION': 'compared in wait.c (the class of the 08xxx errors a wait turns into its timeout)',
    'ERRCODE_INTERNAL_ERROR': 'a "cannot happen" check (XX000), as elog(ERROR) would be',
}


def check_acl(root):
    """Differences between the page's ACL block and what the scripts run."""
    page = os.path.join(root, 'docs', 'security.md')
    text = open(page, encoding='utf-8').read()
    m = re.search(r'<!-- doctest: acl -->\n```[a-z]*\n(.*?)\n```\n(.*?)\n\n(?=[^|])',
                  text, re.S)
    if not m:
        return ['%s: no block marked <!-- doctest: acl -->' % page]
    block, after = m.group(1), m.group(2)
    words = re.findall(r"'[^']*'|\S+", block.replace('\\\n', ' '))
    granted = {w.strip("'")[1:] for w in words if w.strip("'").startswith('+')}
    table = after[after.index('| permission |'):] if '| permission |' in after else ''
    fixed = set()
    for row in table.splitlines():
        cells = re.split(r'(?<!\\)\|', row)
        if len(cells) < 3 or 'lua/' in row:
            continue
        fixed |= {c.replace('\\', '') for c in re.findall(r'`\+([a-z|\\]+)`', cells[1])}
    scripts = set()
    for f in glob.glob(os.path.join(root, 'lua', '*.lua')):
        scripts |= set(re.findall(r"redis\.p?call\('([a-z]+)'",
                                  open(f, encoding='utf-8').read()))
    want = scripts | fixed
    errs = []
    for c in sorted(want - granted):
        errs.append('%s: the ACL block lacks +%s (%s)' % (
            page, c, 'run by lua/*.lua' if c in scripts else 'in the permission table'))
    for c in sorted(granted - want):
        errs.append('%s: the ACL block grants +%s, which neither the scripts nor '
                    'the permission table need' % (page, c))
    return errs


def sqlstates(errcodes_h):
    """ERRCODE_* name -> SQLSTATE, from PostgreSQL's utils/errcodes.h."""
    out = {}
    for line in open(errcodes_h, encoding='utf-8'):
        m = re.match(r"#define (ERRCODE_\w+) MAKE_SQLSTATE\('(.)','(.)','(.)','(.)','(.)'\)", line)
        if m:
            out[m.group(1)] = ''.join(m.group(i) for i in range(2, 7))
    return out


def check_errors(root, errcodes_h):
    """Differences between the Errors table and the SQLSTATEs the code raises."""
    codes = sqlstates(errcodes_h)
    raised = {}
    for f in sorted(glob.glob(os.path.join(root, 'src', '*.c'))):
        for name in re.findall(r'\bERRCODE_[A-Z_]+\b', open(f, encoding='utf-8').read()):
            if name in NOT_RAISED:
                continue
            if name not in codes:
                raise SystemExit('%s: %s is not in %s' % (f, name, errcodes_h))
            raised.setdefault(codes[name], set()).add('%s (%s)' % (name, os.path.basename(f)))
    page = os.path.join(root, 'docs', 'sql-reference.md')
    text = open(page, encoding='utf-8').read()
    m = re.search(r'^## Errors\n\n\| SQLSTATE \| when \|\n\|---\|---\|\n((?:\|.*\n)+)', text, re.M)
    if not m:
        return ['%s: no "## Errors" table with columns SQLSTATE, when' % page]
    documented = set()
    for row in m.group(1).splitlines():
        documented |= set(re.findall(r'`([0-9A-Z]{5})`', row.split('|')[1]))
    errs = []
    for code in sorted(set(raised) - documented):
        errs.append('%s: the Errors table has no row for %s, raised as %s' % (
            page, code, ', '.join(sorted(raised[code]))))
    for code in sorted(documented - set(raised)):
        errs.append('%s: the Errors table names %s, which src/*.c does not raise' % (page, code))
    return errs


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    root, errcodes_h = sys.argv[1], sys.argv[2]
    errs = check_acl(root) + check_errors(root, errcodes_h)
    for e in errs:
        print(e)
    if errs:
        sys.exit(1)
    print('check-docs: the ACL of docs/security.md and the Errors table of '
          'docs/sql-reference.md match the code')


if __name__ == '__main__':
    main()
