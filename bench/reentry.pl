# Workload 3: re-entering a lock the session already holds, against a fresh
# acquisition. plpgsql loops in one backend (no client round trips):
#   fresh      redis_lock_acquire(a, '0') + redis_lock_release(a)
#   reentrant  the same on b, which the session holds already (one
#              acquire before the loop, one release after)
#   no-op      two calls of a trivial function (pg_backend_pid), the anchor
#              a watchdog-mode re-entry served in the session is held to
# for watchdog (lease NULL) and fixed-lease locks, alternating, several rounds;
# medians reported. Also Redis calls and CPU per pair.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use BenchLib;
use RedisLockTest;

my $out = shift // 'RESULTS-reentry.md';
my $n = int(($ENV{REDISLOCK_BENCH_REENTRY_LOOP} // 5000) * BenchLib::scale());
my $rounds = $ENV{REDISLOCK_BENCH_ROUNDS} // 3;

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('bench_reentry', $redis);
$node->safe_psql('postgres', <<'SQL');
CREATE FUNCTION bench_pairs(lockname text, n int, lease interval) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
    FOR i IN 1 .. n LOOP
        IF NOT redis_lock_acquire(lockname, '0', lease) THEN RAISE EXCEPTION 'not acquired'; END IF;
        IF NOT redis_lock_release(lockname) THEN RAISE EXCEPTION 'not released'; END IF;
    END LOOP;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / n;
END $$;
CREATE FUNCTION bench_noop(n int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
    FOR i IN 1 .. n LOOP
        IF pg_backend_pid() IS NULL THEN RAISE EXCEPTION 'no pid'; END IF;
        IF pg_backend_pid() IS NULL THEN RAISE EXCEPTION 'no pid'; END IF;
    END LOOP;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / n;
END $$;
SQL
my $s = RedisLockTest::Session->new($node);
my $pid = $s->pid;
$s->query("SELECT bench_pairs('bench:warm', 500, NULL)");

my %r;    # {lease}{kind} = [ {us, cpu, rcpu, calls, evalsha} ... ]
my @noop;    # µs per no-op pair, per round
for my $round (1 .. $rounds)
{
	push @noop, $s->query("SELECT bench_noop($n)");
	for my $lease ('NULL', "'30 s'")
	{
		for my $kind (qw(fresh reentrant))
		{
			my $name = "bench:$kind";
			$s->query("SELECT redis_lock_acquire('$name', '0', $lease)") if $kind eq 'reentrant';
			my ($c0, $r0, $k0) = (BenchLib::cpu_ns($pid), BenchLib::redis_cpu($redis), BenchLib::commandstats($redis));
			my $us = $s->query("SELECT bench_pairs('$name', $n, $lease)");
			my ($c1, $r1, $k1) = (BenchLib::cpu_ns($pid), BenchLib::redis_cpu($redis), BenchLib::commandstats($redis));
			$s->query("SELECT redis_lock_release('$name')") if $kind eq 'reentrant';
			my $d = BenchLib::commandstats_delta($k0, $k1);
			my $all = 0;
			$all += $_ for values %$d;
			push @{ $r{$lease}{$kind} }, { us => $us, cpu => ($c1 - $c0) / 1e3 / $n,
				rcpu => ($r1 - $r0) * 1e6 / $n, evalsha => ($d->{evalsha} // 0) / $n, all => $all / $n };
			BenchLib::progress("round %d lease %-6s %-9s %.1f us/pair", $round, $lease, $kind, $us);
		}
	}
}

my @rows;
my %med;
for my $lease ('NULL', "'30 s'")
{
	for my $kind (qw(fresh reentrant))
	{
		my $l = $r{$lease}{$kind};
		my %m = map { my $f = $_; $f => BenchLib::median(map { $_->{$f} } @$l) } qw(us cpu rcpu evalsha all);
		$med{$lease}{$kind} = \%m;
		push @rows, [ $lease eq 'NULL' ? 'NULL (watchdog)' : '30 s', $kind,
			sprintf('%.1f', $m{us}), join(' / ', map { sprintf('%.1f', $_->{us}) } @$l),
			sprintf('%.1f', $m{cpu}), sprintf('%.1f', $m{rcpu}),
			sprintf('%.2f', $m{evalsha}), sprintf('%.2f', $m{all}) ];
	}
}

# Through pgbench (one client, -M prepared), the lock-rate table's way: a
# re-entrant pair against two no-op SELECTs, the issue's anchor. The first
# transaction of the connection takes the base hold (and marks it taken).
my $tmp = $node->basedir;
my $pname = q{'bench_re' || :client_id::text};
my %pscript = (
	noop => BenchLib::script_file($tmp, 'noop', "SELECT $pname;\nSELECT $pname;\n"),
	reentrant => BenchLib::script_file($tmp, 'reentrant',
		"SELECT CASE WHEN current_setting('bench.held', true) = '1' THEN redis_lock_acquire($pname, '0') "
		  . "ELSE redis_lock_acquire($pname, '0') AND set_config('bench.held', '1', false) = '1' "
		  . "AND redis_lock_acquire($pname, '0') END;\nSELECT redis_lock_release($pname);\n"),
	fresh => BenchLib::script_file($tmp, 'fresh',
		"SELECT redis_lock_acquire('bench_fr' || :client_id::text, '0');\n"
		  . "SELECT redis_lock_release('bench_fr' || :client_id::text);\n"),
);
my %pg;    # {kind} = [ latency ms per transaction, per round ]
for my $round (1 .. $rounds)
{
	for my $kind (qw(noop reentrant fresh))
	{
		push @{ $pg{$kind} }, BenchLib::pgbench($node, $pscript{$kind}, 1)->{lat_ms};
		BenchLib::progress("round %d pgbench %-9s %.3f ms/xact", $round, $kind, $pg{$kind}[-1]);
	}
}
my @pg_ratio = map { $pg{reentrant}[$_] / $pg{noop}[$_] } 0 .. $rounds - 1;
my $pg_ratio = BenchLib::median(@pg_ratio);
my @pg_rows = map {
	my $k = $_;
	[ $k eq 'noop' ? 'two no-op SELECTs (anchor)' : $k eq 'reentrant' ? 're-entrant pair (watchdog)' : 'fresh pair (watchdog)',
	  sprintf('%.3f', BenchLib::median(@{ $pg{$k} })), join(' / ', map { sprintf('%.3f', $_) } @{ $pg{$k} }),
	  sprintf('%.2f×', BenchLib::median(map { $pg{$k}[$_] / $pg{noop}[$_] } 0 .. $rounds - 1)) ]
} qw(noop reentrant fresh);

my $noop = BenchLib::median(@noop);
my @ratio = map { $r{NULL}{reentrant}[$_]{us} / $noop[$_] } 0 .. $#noop;
my $ratio = BenchLib::median(@ratio);
push @rows, [ '-', 'no-op pair (anchor)', sprintf('%.1f', $noop), join(' / ', map { sprintf('%.1f', $_) } @noop),
	'', '', '0.00', '0.00' ];

open my $fh, '>', $out or die;
print $fh <<"MD";
## 3. Reentrant acquire vs fresh acquire

Command: `bash bench/run.sh reentry` (bench/reentry.pl).
@{[ BenchLib::machine($node, $redis) ]}

One session, plpgsql loop of $n `redis_lock_acquire(name, '0', lease)` +
`redis_lock_release(name)` pairs: "fresh" on a name the session does not hold,
"reentrant" on a name it already holds once (so every pair goes 1 → 2 → 1).
$rounds rounds, alternating; the median is shown with each round's value.
"Redis commands" counts the commands the scripts run inside Redis as well.

@{[ BenchLib::table(['lease', 'pair', 'µs per pair (median)', 'each round', 'backend CPU µs', 'Redis CPU µs', 'EVALSHA per pair', 'Redis commands per pair'], @rows) ]}
**Target: a watchdog-mode re-entrant pair ≤ 1.2× a no-op SQL pair — @{[ $pg_ratio <= 1.2 ? 'met' : 'not met' ]}** (@{[ sprintf('%.2f', $pg_ratio) ]}× through pgbench at one client, median of the per-round ratios; inside one backend, against two calls of `pg_backend_pid()` in the same plpgsql loop, it is @{[ sprintf('%.2f', $ratio) ]}×).

Through pgbench (`-M prepared`, one client, @{[ BenchLib::seconds() ]} s per run, $rounds rounds alternating), per transaction of two statements:

@{[ BenchLib::table(['pair', 'ms per transaction (median)', 'each round', 'vs no-op'], @pg_rows) ]}
In the plpgsql loop above the no-op pair costs almost nothing, so what is
left of a served-in-session re-entry shows: the argument checks, the hash
lookup of the session's entry, and the shared registry (is it lost? publish
the new count), each under the registry's lock (goal 5 of the contention
issue, not done yet).


A session-scope re-entry in watchdog mode, and the releases before the
last, are served in the session (docs/sql-reference.md, Reentry): no round trip, so the
watchdog re-entrant pair costs @{[ sprintf('%.2f', $med{NULL}{reentrant}{us} / $med{NULL}{fresh}{us}) ]}× a fresh pair. With a fixed lease a
re-entry goes to Redis as in Redisson (it sets the lease again and the hold
count in the hash): @{[ sprintf('%.2f', $med{"'30 s'"}{reentrant}{us} / $med{"'30 s'"}{fresh}{us}) ]}× a fresh pair, one round trip per acquire
and per release; it skips the fencing counter INCR and the unlock PUBLISH.
MD
close $fh;
BenchLib::progress("wrote %s", $out);
