# Workload 3: re-entering a lock the session already holds, against a fresh
# acquisition. plpgsql loops in one backend (no client round trips):
#   fresh      redis_lock_acquire(a, '0') + redis_lock_release(a)
#   reentrant  the same on b, which the session holds already (one
#              acquire before the loop, one release after)
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
SQL
my $s = RedisLockTest::Session->new($node);
my $pid = $s->pid;
$s->query("SELECT bench_pairs('bench:warm', 500, NULL)");

my %r;    # {lease}{kind} = [ {us, cpu, rcpu, calls, evalsha} ... ]
for my $round (1 .. $rounds)
{
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
Re-entry costs @{[ sprintf('%.2f', $med{NULL}{reentrant}{us} / $med{NULL}{fresh}{us}) ]}× a fresh pair (watchdog) and
@{[ sprintf('%.2f', $med{"'30 s'"}{reentrant}{us} / $med{"'30 s'"}{fresh}{us}) ]}× (fixed lease): as in Redisson, a re-entry goes to Redis
(it sets the lease again and the hold count in the hash), so it is one round
trip per acquire and per release, like a fresh pair; it skips the fencing
counter INCR and the unlock PUBLISH.
MD
close $fh;
BenchLib::progress("wrote %s", $out);
