# Workload: the cost of deadlock detection (issue 14).
#   anchor     a failed try: redis_lock_acquire(held, '0'), one EVALSHA round
#              trip, in a plpgsql loop
#   check      one waiter blocked by a holder that runs (the common case: no
#              cycle): the same wait of T seconds with redislock.deadlock_timeout
#              at 20 ms and with detection off (0); the difference, per check,
#              is what detection costs
#   ABBA       time from the start of two waits that close a cycle until the
#              victim's 40P01, against deadlock_timeout
# Several rounds; medians reported.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use BenchLib;
use RedisLockTest;
use Time::HiRes qw(time);

my $out = shift // 'RESULTS-deadlock.md';
my $n = int(($ENV{REDISLOCK_BENCH_DEADLOCK_LOOP} // 5000) * BenchLib::scale());
my $wait_s = $ENV{REDISLOCK_BENCH_DEADLOCK_WAIT} // 3;
my $interval_ms = 20;
my $rounds = $ENV{REDISLOCK_BENCH_ROUNDS} // 3;

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('bench_deadlock', $redis);
$node->safe_psql('postgres', <<'SQL');
CREATE FUNCTION bench_tries(lockname text, n int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
    FOR i IN 1 .. n LOOP
        IF redis_lock_acquire(lockname, '0') THEN RAISE EXCEPTION 'acquired'; END IF;
    END LOOP;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / n;
END $$;
SQL

my $holder = RedisLockTest::Session->new($node);
$holder->query("SELECT redis_lock_acquire('bench:dl:held', '0', '1 h')");
my $w = RedisLockTest::Session->new($node);
my $wpid = $w->pid;
$w->query("SELECT bench_tries('bench:dl:held', 200)");

sub measure
{
	my ($code) = @_;
	my ($c0, $r0, $k0) = (BenchLib::cpu_ns($wpid), BenchLib::redis_cpu($redis), BenchLib::commandstats($redis));
	my $t0 = time();
	my $v = $code->();
	my $wall = time() - $t0;
	my ($c1, $r1, $k1) = (BenchLib::cpu_ns($wpid), BenchLib::redis_cpu($redis), BenchLib::commandstats($redis));
	my $d = BenchLib::commandstats_delta($k0, $k1);
	my $all = 0;
	$all += $_ for values %$d;
	return { v => $v, wall => $wall, cpu_us => ($c1 - $c0) / 1e3, rcpu_us => ($r1 - $r0) * 1e6,
		d => $d, all => $all };
}

my (@try, @check, @abba);
for my $round (1 .. $rounds)
{
	# anchor: failed tries
	my $m = measure(sub { $w->query("SELECT bench_tries('bench:dl:held', $n)") });
	push @try, { us => $m->{v}, cpu => $m->{cpu_us} / $n, rcpu => $m->{rcpu_us} / $n,
		evalsha => ($m->{d}{evalsha} // 0) / $n, all => $m->{all} / $n };
	BenchLib::progress("round %d failed try %.1f us", $round, $m->{v});

	# the same blocked wait with detection off and on
	my %wait;
	for my $dt (0, $interval_ms)
	{
		$w->query("SET redislock.deadlock_timeout = $dt");
		$wait{$dt} = measure(sub { $w->query("SELECT redis_lock_acquire('bench:dl:held', '${wait_s}s')") });
		die "the wait took the lock" unless $wait{$dt}{v} eq 'f';
	}
	# a check runs wait_holders.lua (one HGETALL inside) and one HGETALL of
	# the holder's edge: two per check; nothing else here calls HGETALL
	my $checks = ($wait{$interval_ms}{d}{hgetall} // 0) / 2;
	my ($on, $off) = ($wait{$interval_ms}, $wait{0});
	push @check, { checks => $checks,
		evalsha => (($on->{d}{evalsha} // 0) - ($off->{d}{evalsha} // 0)) / $checks,
		top => (($on->{d}{evalsha} // 0) - ($off->{d}{evalsha} // 0) + ($on->{d}{hgetall} // 0) / 2) / $checks,
		all => ($on->{all} - $off->{all}) / $checks,
		cpu => ($on->{cpu_us} - $off->{cpu_us}) / $checks,
		rcpu => ($on->{rcpu_us} - $off->{rcpu_us}) / $checks };
	BenchLib::progress("round %d: %d checks in %ss, %.1f Redis commands each", $round, $checks, $wait_s,
		$check[-1]{all});

	# ABBA: time until the victim's 40P01
	my $a = RedisLockTest::Session->new($node);
	my $b = RedisLockTest::Session->new($node);
	$_->query("SET redislock.deadlock_timeout = '100ms'") for ($a, $b);
	$a->query("SELECT redis_lock_acquire('bench:dl:a', '0', '1 min')");
	$b->query("SELECT redis_lock_acquire('bench:dl:b', '0', '1 min')");
	my $t0 = time();
	$a->start("SELECT redis_lock_acquire('bench:dl:b', NULL, '1 min')");
	$b->start("SELECT redis_lock_acquire('bench:dl:a', NULL, '1 min')");
	my $victim;
	RedisLockTest::wait_until(60, 'a victim', sub {
		for my $s ($a, $b) { if ($s->is_done) { $victim = $s; return 1; } }
		return 0;
	});
	push @abba, (time() - $t0) * 1000;
	my (undef, $err, $state) = $victim->finish(10);
	die "ABBA: expected 40P01, got [$state] $err" unless ($state // '') eq '40P01';
	$victim->query('SELECT redis_lock_release_all()');
	my $other = $victim == $a ? $b : $a;
	$other->finish(30);
	$other->query('SELECT redis_lock_release_all()');
	$_->close for ($a, $b);
	BenchLib::progress("round %d: ABBA victim after %.0f ms", $round, $abba[-1]);
}

my %t = map { my $f = $_; $f => BenchLib::median(map { $_->{$f} } @try) } qw(us cpu rcpu evalsha all);
my %c = map { my $f = $_; $f => BenchLib::median(map { $_->{$f} } @check) } qw(checks evalsha top all cpu rcpu);
my $abba = BenchLib::median(@abba);

open my $fh, '>', $out or die;
print $fh <<"MD";
## Deadlock detection: the cost of a check

Command: `bash bench/run.sh deadlock` (bench/deadlock.pl).
@{[ BenchLib::machine($node, $redis) ]}

One session waits ${wait_s} s for a lock another session holds (fixed 1 h
lease, so nothing but the checks wakes the wait), once with
`redislock.deadlock_timeout = 0` (off) and once with ${interval_ms} ms; the
difference divided by the number of checks is the cost of one check. The
holder runs, so each check is the common case without a cycle: one round trip
writes our edge and reads the holders of the lock (wait_edge.lua and
wait_holders.lua, pipelined), one reads the holder's edge (HGETALL, none);
waking up for a check does not retry the lock. A waiter
blocked for less than deadlock_timeout sends nothing extra. Anchor: a failed
try, `redis_lock_acquire(held, '0')`, one EVALSHA round trip. $rounds rounds,
medians. "Redis commands" counts the commands the scripts run inside Redis too.

@{[ BenchLib::table(['', 'per', 'round trips', 'EVALSHA', 'top-level commands', 'Redis commands', 'backend CPU µs', 'Redis CPU µs'],
	[ 'failed try (anchor)', 'try', '1', sprintf('%.2f', $t{evalsha}), sprintf('%.2f', $t{evalsha}), sprintf('%.2f', $t{all}),
	  sprintf('%.1f', $t{cpu}), sprintf('%.1f', $t{rcpu}) ],
	[ 'deadlock check, no cycle', 'check', '2', sprintf('%.2f', $c{evalsha}), sprintf('%.2f', $c{top}),
	  sprintf('%.2f', $c{all}), sprintf('%.1f', $c{cpu}), sprintf('%.1f', $c{rcpu}) ]) ]}
A failed try takes @{[ sprintf('%.1f', $t{us}) ]} µs (median). A check costs
@{[ sprintf('%.1f', $c{all} / $t{all}) ]}× the Redis commands, @{[ sprintf('%.1f', $c{rcpu} / ($t{rcpu} || 1)) ]}× the Redis CPU and
@{[ sprintf('%.1f', $c{cpu} / ($t{cpu} || 1)) ]}× the backend CPU of a failed try, once per deadlock_timeout
(1 s by default) per session blocked that long (@{[ sprintf('%.0f', $c{checks}) ]} checks in ${wait_s} s at ${interval_ms} ms here).
The edge is deleted with one DEL when the wait ends.

A walk adds two round trips per level of waiting sessions it follows (their
edges, then the holders of what they wait for, each level pipelined); on a
cycle, one more reads the whole cycle again before the victim aborts.

ABBA (two sessions, `redislock.deadlock_timeout = 100ms`): the victim's
40P01 came @{[ sprintf('%.0f', $abba) ]} ms (median; each round: @{[ join(' / ', map { sprintf('%.0f', $_) } @abba) ]})
after both waits started (seen by polling every 50 ms), i.e. @{[ sprintf('%.1f', $abba / 100) ]}× deadlock_timeout:
the larger owner finds the cycle at its first check if the other's edge is
already there, else at its second. CPU figures are from a machine shared with
other work (load average in RESULTS.md's header when run through run.sh), so
only their order of magnitude counts.
MD
close $fh;
BenchLib::progress("wrote %s", $out);
