# Semaphores, expiring permits and latches against the exclusive lock.
# plpgsql loops in one backend (no client round trips), each a pair of calls:
#   lock       redis_lock_acquire(n, '0') + redis_lock_release(n)     (anchor)
#   semaphore  redis_semaphore_acquire(n, 1, '0') + redis_semaphore_release(n)
#   permit     redis_permit_acquire(n, '0') + redis_permit_release(n, id)
#   latch      redis_latch_try_set_count(n, 1) + redis_latch_count_down(n)
# watchdog leases, several rounds alternating; medians and ratios against
# the lock pair of the same round.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use BenchLib;
use RedisLockTest;

my $out = shift // 'RESULTS-semaphore.md';
my $n = int(($ENV{REDISLOCK_BENCH_SEMAPHORE_LOOP} // 4000) * BenchLib::scale());
my $rounds = $ENV{REDISLOCK_BENCH_ROUNDS} // 3;

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('bench_semaphore', $redis);
$node->safe_psql('postgres', <<'SQL');
CREATE FUNCTION bench_loop(kind text, n int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz := clock_timestamp();
    id text;
BEGIN
    FOR i IN 1 .. n LOOP
        CASE kind
        WHEN 'lock' THEN
            IF NOT redis_lock_acquire('b:lock', '0') OR NOT redis_lock_release('b:lock') THEN
                RAISE EXCEPTION 'lock pair failed';
            END IF;
        WHEN 'semaphore' THEN
            IF NOT redis_semaphore_acquire('b:sem', 1, '0') OR NOT redis_semaphore_release('b:sem') THEN
                RAISE EXCEPTION 'semaphore pair failed';
            END IF;
        WHEN 'permit' THEN
            id := redis_permit_acquire('b:permit', '0');
            IF id IS NULL OR NOT redis_permit_release('b:permit', id) THEN
                RAISE EXCEPTION 'permit pair failed';
            END IF;
        WHEN 'latch' THEN
            IF NOT redis_latch_try_set_count('b:latch', 1) OR redis_latch_count_down('b:latch') <> 0 THEN
                RAISE EXCEPTION 'latch pair failed';
            END IF;
        END CASE;
    END LOOP;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / n;
END $$;
SELECT redis_semaphore_try_set_permits('b:sem', 1), redis_permit_try_set_permits('b:permit', 1);
SQL
my $s = RedisLockTest::Session->new($node);
my $pid = $s->pid;
my @kinds = qw(lock semaphore permit latch);
$s->query("SELECT bench_loop('$_', 200)") for @kinds;    # warm up: scripts loaded

my %r;    # {kind} = [ {us, cpu, rcpu, calls} ... ]
for my $round (1 .. $rounds)
{
	for my $kind (@kinds)
	{
		my ($c0, $r0, $k0) = (BenchLib::cpu_ns($pid), BenchLib::redis_cpu($redis), BenchLib::commandstats($redis));
		my $us = $s->query("SELECT bench_loop('$kind', $n)");
		my ($c1, $r1, $k1) = (BenchLib::cpu_ns($pid), BenchLib::redis_cpu($redis), BenchLib::commandstats($redis));
		my $d = BenchLib::commandstats_delta($k0, $k1);
		my $all = 0;
		$all += $_ for values %$d;
		push @{ $r{$kind} }, { us => $us, cpu => ($c1 - $c0) / 1e3 / $n,
			rcpu => ($r1 - $r0) * 1e6 / $n, evalsha => ($d->{evalsha} // 0) / $n, all => $all / $n };
		BenchLib::progress("round %d %-6s %.1f us/pair", $round, $kind, $us);
	}
}

my %label = (lock => 'exclusive lock (anchor)', semaphore => 'semaphore, 1 permit',
	permit => 'expiring permit', latch => 'latch set + count down');
my (@rows, %med);
for my $kind (@kinds)
{
	my $l = $r{$kind};
	my %m = map { my $f = $_; $f => BenchLib::median(map { $_->{$f} } @$l) } qw(us cpu rcpu evalsha all);
	my @ratio = map { $r{$kind}[$_]{us} / $r{lock}[$_]{us} } 0 .. $#$l;
	$m{ratio} = BenchLib::median(@ratio);
	$med{$kind} = \%m;
	push @rows, [ $label{$kind}, sprintf('%.1f', $m{us}), join(' / ', map { sprintf('%.1f', $_->{us}) } @$l),
		sprintf('%.2f×', $m{ratio}), sprintf('%.1f', $m{cpu}), sprintf('%.1f', $m{rcpu}),
		sprintf('%.2f', $m{evalsha}), sprintf('%.1f', $m{all}) ];
}

open my $fh, '>', $out or die;
print $fh <<"MD";
## 11. Semaphores, expiring permits and latches

Command: `bash bench/run.sh semaphore` (bench/semaphore.pl).
@{[ BenchLib::machine($node, $redis) ]}

One session, plpgsql loop of $n pairs per kind (acquire with wait '0' and a
watchdog lease, then release; for the latch, set a count of 1 and count it
down); $rounds rounds, alternating; the median is shown with each round's
value. The ratio is against the exclusive-lock pair of the same round (median
of the per-round ratios). "Redis commands" counts the commands the scripts
run inside Redis as well.

@{[ BenchLib::table(['pair', 'µs per pair (median)', 'each round', 'vs lock', 'backend CPU µs', 'Redis CPU µs', 'EVALSHA per pair', 'Redis commands per pair'], @rows) ]}
A semaphore pair costs @{[ sprintf('%.2f', $med{semaphore}{ratio}) ]}× an exclusive pair and an expiring-permit pair
@{[ sprintf('%.2f', $med{permit}{ratio}) ]}×: one round trip each way, like the exclusive lock. The
semaphore scripts also keep the per-owner record that gives permits back
when a session or server dies (a hash field and a zset member, written on
acquire and removed on release), and both release scripts publish the new
total, as Redisson's do.
MD
close $fh;
BenchLib::progress("wrote %s", $out);
