#!/usr/bin/env python3
"""Checks the Markdown links of the user documentation: README.md, docs/*.md
(docs/notes/ excepted: drafts), CHANGELOG.md and the READMEs under test/.
Every relative link must name a file or directory of the checkout, and a
#fragment must be the anchor of a heading in the file it names, as GitHub
makes anchors (lower case; punctuation other than - and _ dropped; spaces
become -; a repeated heading gets -1, -2, ...).  Links to other sites are not
followed.  Prints each broken link with its file and line; exits 1 if any.

Usage: check-doc-links.py ROOT
"""
import glob
import os
import re
import sys

LINK = re.compile(r'(?<!!)\[[^\]]*\]\(([^)\s]+)\)')
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')


def anchors(path):
    """The anchors GitHub gives the headings of a Markdown file."""
    seen = {}
    out = set()
    fence = False
    with open(path, encoding='utf-8') as f:
        for line in f:
            if line.startswith('```'):
                fence = not fence
                continue
            m = None if fence else HEADING.match(line)
            if not m:
                continue
            text = re.sub(r'`([^`]*)`', r'\1', m.group(2))
            text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', text)
            slug = re.sub(r'[^\w\- ]', '', text.lower()).replace(' ', '-')
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else '%s-%d' % (slug, n))
    return out


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else '.')
    files = [os.path.join(root, 'README.md'), os.path.join(root, 'CHANGELOG.md')]
    files += sorted(glob.glob(os.path.join(root, 'docs', '*.md')))
    files += sorted(glob.glob(os.path.join(root, 'test', '**', 'README.md'), recursive=True))
    bad = 0
    cache = {}
    for path in files:
        if not os.path.isfile(path):
            continue
        fence = False
        with open(path, encoding='utf-8') as f:
            for lineno, line in enumerate(f, 1):
                if line.startswith('```'):
                    fence = not fence
                if fence:
                    continue
                for target in LINK.findall(line):
                    if re.match(r'^[a-z][a-z0-9+.-]*:', target):
                        continue
                    file_part, _, frag = target.partition('#')
                    dest = path if not file_part else os.path.normpath(
                        os.path.join(os.path.dirname(path), file_part))
                    where = '%s:%d: %s' % (os.path.relpath(path, root), lineno, target)
                    if not os.path.exists(dest):
                        print('%s: no such file' % where)
                        bad += 1
                    elif frag and dest.endswith('.md'):
                        if dest not in cache:
                            cache[dest] = anchors(dest)
                        if frag not in cache[dest]:
                            print('%s: no heading with that anchor' % where)
                            bad += 1
    if bad:
        print('check-doc-links: %d broken link(s)' % bad)
        return 1
    print('check-doc-links: %d file(s), every link resolves' % len(files))
    return 0


if __name__ == '__main__':
    sys.exit(main())
