// The node redlock peer driver: redlock 5 with ioredis 5, speaking the line
// protocol of test/peers/README.md on stdin/stdout, so that redislock's TAP
// tests (test/lib/LockPeer.pm) can run a real Node lock client against the
// same Redis as SQL sessions.  One url= is a single server; several are
// Redlock over those masters.  A name with commas ("a,b,c") is several
// resources locked by one acquire (redlock's multi-resource lock); unlock,
// extend and key take the same joined name.
"use strict";

const fs = require("fs");
const path = require("path");
const readline = require("readline");
const Redis = require("ioredis");
const { default: Redlock, ExecutionError } = require("redlock");

function fatal(msg) {
  process.stderr.write(`redlock-driver: ${msg}\n`);
  process.exit(2);
}

// A package's version from its package.json, found above its main file
// (redlock's "exports" do not export package.json).
function pkgVersion(name) {
  try {
    let dir = path.dirname(require.resolve(name));
    for (;;) {
      const f = path.join(dir, "package.json");
      if (fs.existsSync(f)) {
        const p = JSON.parse(fs.readFileSync(f, "utf8"));
        if (p.name === name) return p.version;
      }
      if (path.dirname(dir) === dir) return "unknown";
      dir = path.dirname(dir);
    }
  } catch (e) {
    return "unknown";
  }
}

const args = process.argv.slice(2);
if (args[0] !== "redlock") fatal("usage: driver.js redlock url=redis://HOST:PORT [url=...] [retry_delay=MS] [retry_jitter=MS] [release_retry_count=N]");
const urls = [];
const opt = {};
for (const a of args.slice(1)) {
  const i = a.indexOf("=");
  if (i < 0) fatal(`bad option ${a} (want name=value)`);
  const k = a.slice(0, i), v = a.slice(i + 1);
  if (k === "url") urls.push(v);
  else if (["retry_delay", "retry_jitter", "release_retry_count"].includes(k)) opt[k] = Number(v);
  else fatal(`unknown option ${k}`);
}
if (urls.length === 0) fatal("no url= given");

// ioredis reconnects forever by default; a test that stops a server wants
// the command to fail, not to queue
const clients = urls.map((u) => new Redis(u, { lazyConnect: true, maxRetriesPerRequest: 1 }));
const settings = {};
if (opt.retry_delay !== undefined) settings.retryDelay = opt.retry_delay;
if (opt.retry_jitter !== undefined) settings.retryJitter = opt.retry_jitter;
const redlock = new Redlock(clients, settings);
const retryDelay = redlock.settings.retryDelay;
const releaseSettings = opt.release_retry_count !== undefined ? { retryCount: opt.release_retry_count } : undefined;

const locks = new Map();

function reply(line) {
  process.stdout.write(line.replace(/[\r\n]+/g, "; ") + "\n");
}

function ms(s) {
  const n = Number(s);
  if (!Number.isInteger(n) || n < 0) throw new Error(`bad milliseconds ${s}`);
  return n;
}

function need(a, n, usage) {
  if (a.length !== n) throw new Error(`usage: ${usage}`);
}

const resources = (name) => name.split(",");

// Not acquired on a quorum within redlock's retries: redlock's
// ExecutionError (its votes against were ResourceLockedError); a Redis
// error on a quorum is an error.
function refused(e) {
  if (!(e instanceof ExecutionError)) return false;
  return e.attempts.length > 0;
}

// wait_ms 0 is one attempt; otherwise redlock's own retries
// (retryDelay +- retryJitter apart, default 200 +- 100 ms), as many as fit
// in wait_ms.
async function lock(name, lease, wait) {
  const retryCount = wait === 0 ? 0 : Math.max(1, Math.ceil(wait / retryDelay));
  try {
    return await redlock.acquire(resources(name), lease, { retryCount });
  } catch (e) {
    if (refused(e) && (await lockedAgainst(e))) return null;
    throw e;
  }
}

// Refused, not failed: some vote against in the last attempt was "a key is
// taken" (a Redis error on every server is an error).  Redlock resolves an
// attempt's stats once all votes are in.
async function lockedAgainst(e) {
  const last = await e.attempts[e.attempts.length - 1];
  let other = null;
  for (const err of last.votesAgainst.values()) {
    if (err && err.name === "ResourceLockedError") return true;
    other = other || err;
  }
  throw other || e;
}

async function unlock(l) {
  await redlock.release(l, releaseSettings);
}

const sleep = (t) => new Promise((r) => setTimeout(r, t));

async function counter(name, key, n, lease, wait, hold, gap) {
  const c = clients[0];
  for (let i = 0; i < n; i++) {
    let l = null;
    while (l === null) l = await lock(name, lease, wait);
    const v = Number((await c.get(key)) || 0);
    if (hold > 0) await sleep(hold);
    await c.set(key, String(v + 1));
    try {
      await unlock(l);
    } catch (e) {
      throw new Error(`round ${i}: unlock: ${e.message}`);
    }
    if (gap > 0) await sleep(gap);
  }
  return String(n);
}

async function run(op, a) {
  switch (op) {
    case "lock": {
      need(a, 3, "lock <name> <lease_ms> <wait_ms>");
      const l = await lock(a[0], ms(a[1]), ms(a[2]));
      if (l === null) return "false";
      locks.set(a[0], l);
      return "true";
    }
    case "unlock": {
      need(a, 1, "unlock <name>");
      const l = locks.get(a[0]);
      if (!l) throw new Error("no lock held under this name");
      await unlock(l);
      if (locks.get(a[0]) === l) locks.delete(a[0]);
      return "true";
    }
    case "extend": {
      need(a, 2, "extend <name> <lease_ms>");
      const l = locks.get(a[0]);
      if (!l) throw new Error("no lock held under this name");
      let l2;
      try {
        l2 = await l.extend(ms(a[1]));
      } catch (e) {
        if (e instanceof ExecutionError) return "false";
        throw e;
      }
      if (locks.get(a[0]) === l) locks.set(a[0], l2);
      return "true";
    }
    case "key":
      need(a, 1, "key <name>");
      return resources(a[0]).join(",");
    case "counter":
      if (a.length < 5 || a.length > 7) throw new Error("usage: counter <name> <counter_key> <n> <lease_ms> <wait_ms> [<hold_ms> [<gap_ms>]]");
      return counter(a[0], a[1], ms(a[2]), ms(a[3]), ms(a[4]), ms(a[5] || "0"), ms(a[6] || "0"));
    case "versions":
      return `redlock=${pkgVersion("redlock")} ioredis=${pkgVersion("ioredis")} node=${process.versions.node}`;
  }
  throw new Error(`unknown op ${op}`);
}

async function main() {
  try {
    await Promise.all(clients.map((c) => c.connect()));
  } catch (e) {
    fatal(`connect: ${e.message}`);
  }
  reply(`ready redlock ${pkgVersion("redlock")}`);
  const rl = readline.createInterface({ input: process.stdin, terminal: false });
  rl.on("line", (line) => {
    const w = line.trim().split(/\s+/);
    if (w[0] === "") return;
    if (w.length < 2) return reply(`${w[0]} err no op`);
    if (w[1] === "quit") {
      reply(`${w[0]} ok bye`);
      process.exit(0);
    }
    run(w[1], w.slice(2)).then(
      (v) => reply(`${w[0]} ok ${v}`),
      (e) => reply(`${w[0]} err ${e && e.name ? e.name + ": " : ""}${e && e.message ? e.message : e}`)
    );
  });
  rl.on("close", () => process.exit(0));
}

main();
