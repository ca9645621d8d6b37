#!/usr/bin/env python3
"""tools/check-meta.py [REPO]: META.json is a valid PGXN distribution (PGXN
Meta Spec v1, validated with the official JSON schemas in tools/pgxn-meta-v1,
copied from the pgxn/meta repository) and agrees with the rest of the tree:

  - META.json version and provides.redislock.version are redislock.control's
    default_version (PGXN versions are SemVer: '1.1' is written 1.1.0);
  - provides.redislock.file and docfile exist; the abstract is set;
  - the PostgreSQL prerequisite is the oldest version debian/pgversions builds for;
  - CHANGELOG.md has a section for default_version, and debian/changelog's
    newest entry packages it (1.1-N).

Needs python3-jsonschema (Debian). Exits non-zero, naming each problem.
"""
import json
import os
import re
import sys

import jsonschema

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
schema_dir = os.path.join(root, "tools", "pgxn-meta-v1")
problems = []

# The schemas' regular expressions use classes Python's re lacks (POSIX
# [[:digit:]], \p{...}); each is replaced by its ASCII equivalent.
REGEX_CLASSES = {
    "[[:digit:]]": "[0-9]",
    "\\p{Cntrl}": "\\x00-\\x1f\\x7f",
    "\\p{Space}": "\\s",
    "\\p{lower}": "[a-z]",
}


def fix_patterns(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "pattern" and isinstance(v, str):
                for a, b in REGEX_CLASSES.items():
                    v = v.replace(a, b)
                node[k] = v
            else:
                fix_patterns(v)
        if "patternProperties" in node:
            pp = node["patternProperties"]
            for k in list(pp):
                nk = k
                for a, b in REGEX_CLASSES.items():
                    nk = nk.replace(a, b)
                if nk != k:
                    pp[nk] = pp.pop(k)
    elif isinstance(node, list):
        for v in node:
            fix_patterns(v)
    return node


store = {}
for name in sorted(os.listdir(schema_dir)):
    if name.endswith(".schema.json"):
        with open(os.path.join(schema_dir, name), encoding="utf-8") as f:
            s = fix_patterns(json.load(f))
        store[s["$id"]] = s
top = store["https://pgxn.org/meta/v1/distribution.schema.json"]

with open(os.path.join(root, "META.json"), encoding="utf-8") as f:
    meta = json.load(f)

try:    # jsonschema >= 4.18
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012
    registry = Registry().with_resources(
        (uri, DRAFT202012.create_resource(s)) for uri, s in store.items())
    validator = jsonschema.Draft202012Validator(top, registry=registry)
except ImportError:    # Debian 12's python3-jsonschema 4.10
    validator = jsonschema.Draft202012Validator(
        top, resolver=jsonschema.RefResolver.from_schema(top, store=store))
for e in sorted(validator.iter_errors(meta), key=lambda e: list(e.absolute_path)):
    where = "/".join(str(p) for p in e.absolute_path) or "(top)"
    problems.append(f"META.json {where}: {e.message}")

with open(os.path.join(root, "redislock.control"), encoding="utf-8") as f:
    m = re.search(r"^default_version\s*=\s*'([^']+)'", f.read(), re.M)
default_version = m.group(1) if m else None
if not default_version:
    problems.append("redislock.control: no default_version")
else:
    semver = default_version if default_version.count(".") >= 2 else default_version + ".0"
    if meta.get("version") != semver:
        problems.append(f"META.json version {meta.get('version')!r} is not default_version "
                        f"{default_version!r} of redislock.control (as SemVer {semver!r})")
    ext = meta.get("provides", {}).get("redislock", {})
    if ext.get("version") != semver:
        problems.append(f"META.json provides.redislock.version {ext.get('version')!r} is not {semver!r}")
    for key in ("file", "docfile"):
        if key in ext and not os.path.isfile(os.path.join(root, ext[key])):
            problems.append(f"META.json provides.redislock.{key}: no file {ext[key]}")

    with open(os.path.join(root, "CHANGELOG.md"), encoding="utf-8") as f:
        if not re.search(r"^## " + re.escape(default_version) + r"\b", f.read(), re.M):
            problems.append(f"CHANGELOG.md has no section '## {default_version}'")
    with open(os.path.join(root, "debian", "changelog"), encoding="utf-8") as f:
        m = re.match(r"redislock \(([^)-]+)-[^)]+\)", f.readline())
    if not m or m.group(1) != default_version:
        problems.append(f"debian/changelog's newest entry packages {m.group(1) if m else '?'}, "
                        f"not {default_version}")

pg = meta.get("prereqs", {}).get("runtime", {}).get("requires", {}).get("PostgreSQL")
with open(os.path.join(root, "debian", "pgversions"), encoding="utf-8") as f:
    pgv = [l.strip() for l in f if l.strip() and not l.startswith("#")]
if not pgv or not pgv[0].endswith("+") or pg != pgv[0][:-1] + ".0.0":
    problems.append(f"META.json requires PostgreSQL {pg!r}, debian/pgversions says {pgv}")

for p in problems:
    print("check-meta: " + p, file=sys.stderr)
if problems:
    sys.exit(1)
print(f"check-meta: META.json is valid PGXN Meta Spec {meta['meta-spec']['version']}, "
      f"version {meta['version']} = default_version {default_version}")
