# Workload 2: contended hand-off. N sessions (2, 8, 32, 64) take turns on one
# lock name; each holds it for a fixed short time in a plpgsql loop and
# records clock_timestamp() right after acquiring and right before releasing
# (kept in plpgsql arrays, inserted into an unlogged table at the end).
# Hand-off latency = an acquisition - the previous holder's release start.
#
# Redis commands per hold come from INFO commandstats deltas over the run:
# they must not grow with the hold time (waiters sleep on pub/sub, no
# polling) nor with the number of waiters (one listener per server wakes
# one waiter per release). Subscriber connections are counted from CLIENT
# LIST while the run goes on; each wait (acquisition − the time the session
# asked) gives the longest wait, so that starvation shows.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin, "$FindBin::Bin/../test/redisson";
use BenchLib;
use RedisLockTest;
use FakeRedisson;
use Time::HiRes qw(time);

my $out = shift // 'RESULTS-handoff.md';
my @ns = split /[,\s]+/, ($ENV{REDISLOCK_BENCH_HANDOFF_SESSIONS} // '2,8,32,64');
my @holds_ms = split /[,\s]+/, ($ENV{REDISLOCK_BENCH_HOLD_MS} // '1,20');
# total holds per run: this many for a 1 ms hold, fewer for longer holds
my $total_short = int(($ENV{REDISLOCK_BENCH_HANDOFFS} // 1500) * BenchLib::scale());

my $redis = RedisLockTest::Redis->new;
my $rc = FakeRedisson::Conn->new(port => $redis->port);
my $node = RedisLockTest::node('bench_handoff', $redis, 'max_connections' => 90);
$node->safe_psql('postgres', <<'SQL');
CREATE UNLOGGED TABLE handoff(run text, pid int, ask timestamptz, acq timestamptz, rel timestamptz);
CREATE FUNCTION bench_hold(run text, lockname text, n int, hold float8, fair boolean)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    w timestamptz[] := '{}';
    a timestamptz[] := '{}';
    r timestamptz[] := '{}';
BEGIN
    FOR i IN 1 .. n LOOP
        w := w || clock_timestamp();
        IF NOT redis_lock_acquire(lockname, NULL, NULL, fair) THEN
            RAISE EXCEPTION 'not acquired';
        END IF;
        a := a || clock_timestamp();
        PERFORM pg_sleep(hold);
        r := r || clock_timestamp();
        PERFORM redis_lock_release(lockname);
    END LOOP;
    INSERT INTO handoff SELECT run, pg_backend_pid(), v, x, y FROM unnest(w, a, r) AS u(v, x, y);
    RETURN n;
END $$;
SQL

my $maxn = 0;
$maxn = $_ > $maxn ? $_ : $maxn for @ns;
my @sess = map { RedisLockTest::Session->new($node) } 1 .. $maxn;
# warm up every session (plan cache, Redis connections, subscriber)
$_->start("SELECT bench_hold('warm', 'bench:warm', 20, 0.0005, false)") for @sess;
$_->finish(120) for @sess;

my @rows;
my %cmd_names;
my %verdict;
for my $hold (@holds_ms)
{
	for my $fair (0, 1)
	{
		for my $n (@ns)
		{
			my $total = int($total_short / ($hold >= 1 ? $hold : 1));
			$total = 20 * $n if $total < 20 * $n;
			my $per = int($total / $n);
			my $run = sprintf('%s-n%d-h%s', $fair ? 'fair' : 'nonfair', $n, $hold);
			my $lock = "bench:handoff:$run";
			my $s0 = BenchLib::commandstats($redis);
			my $t0 = time;
			$sess[$_]->start(sprintf("SELECT bench_hold('%s', '%s', %d, %.4f, %s)",
				$run, $lock, $per, $hold / 1000, $fair ? 'true' : 'false')) for 0 .. $n - 1;
			# subscriber connections (CLIENT LIST flag P), the most seen
			my $subs = 0;
			while (grep { !$sess[$_]->is_done } 0 .. $n - 1)
			{
				my $now = grep { /\bflags=\S*P/ } split /\n/, $rc->cmd('CLIENT', 'LIST');
				$subs = $now if $now > $subs;
				select(undef, undef, undef, 0.05);
				die "run $run: no end after 600 s" if time - $t0 > 600;
			}
			for (0 .. $n - 1)
			{
				my ($v, $err) = $sess[$_]->finish(600);
				die "session $_: $err" if defined $err;
			}
			my $wall = time - $t0;
			my $s1 = BenchLib::commandstats($redis);
			my $d = BenchLib::commandstats_delta($s0, $s1);
			delete $d->{'client|list'};    # the sampling above
			my $holds = $per * $n;

			# hand-offs, in acquisition order, while all n sessions were active
			my @ev = map { [ split /\|/ ] } split /\n/, $node->safe_psql('postgres',
				"SELECT pid, extract(epoch FROM acq)::numeric(20,6), extract(epoch FROM rel)::numeric(20,6), "
				. "extract(epoch FROM acq - ask) * 1000 FROM handoff WHERE run = '$run' ORDER BY acq");
			my @waits = sort { $a <=> $b } map { $_->[3] } @ev;
			my %first; my %last;
			for (@ev) { $first{$_->[0]} //= $_->[1]; $last{$_->[0]} = $_->[2]; }
			# from: every session has held it once (if that happens before
			# the first one finished: a non-fair lock may let one session
			# finish all its holds first); to: the first session finished
			my ($from) = sort { $b <=> $a } values %first;
			my ($to) = sort { $a <=> $b } values %last;
			$from = $ev[0][1] if $from >= $to;
			my (@all, @cross);
			my $overlaps = 0;
			my $self = 0;
			for my $i (1 .. $#ev)
			{
				my $h = ($ev[$i][1] - $ev[$i - 1][2]) * 1e3;    # ms
				$overlaps++ if $ev[$i][1] < $ev[$i - 1][2];
				next unless $ev[$i - 1][2] >= $from && $ev[$i][1] <= $to;
				push @all, $h;
				if ($ev[$i][0] == $ev[$i - 1][0]) { $self++; } else { push @cross, $h; }
			}
			@all = sort { $a <=> $b } @all;
			@cross = sort { $a <=> $b } @cross;
			my $total_cmds = 0;
			$total_cmds += $_ for values %$d;
			$cmd_names{$_} = 1 for keys %$d;
			my $f = sub { defined $_[0] ? sprintf('%.3f', $_[0]) : '–' };
			push @rows, {
				mode => $fair ? 'fair' : 'non-fair', n => $n, hold => $hold, holds => $holds,
				steady => scalar(@all), cross_share => @all ? 100 * @cross / @all : 0,
				p50 => $f->(BenchLib::pct(\@all, 50)), p99 => $f->(BenchLib::pct(\@all, 99)),
				xp50 => $f->(BenchLib::pct(\@cross, 50)), xp99 => $f->(BenchLib::pct(\@cross, 99)),
				overlaps => $overlaps, wall => $wall, d => $d, total_cmds => $total_cmds,
				xp50_raw => BenchLib::pct(\@cross, 50),
				p50_raw => BenchLib::pct(\@all, 50), p99_raw => BenchLib::pct(\@all, 99),
				max => @all ? $f->($all[-1]) : '–',
				subs => $subs, max_wait => $waits[-1], p99_wait => BenchLib::pct(\@waits, 99),
			};
			BenchLib::progress("%-8s n=%d hold=%sms holds=%d hand-off p50 %s p99 %s (other session: %.0f%%, p50 %s p99 %s) cmds/hold %.2f subscribers %d max wait %.1f ms overlaps %d",
				$rows[-1]{mode}, $n, $hold, $holds, $rows[-1]{p50}, $rows[-1]{p99},
				$rows[-1]{cross_share}, $rows[-1]{xp50}, $rows[-1]{xp99}, $total_cmds / $holds,
				$subs, $waits[-1], $overlaps);
		}
	}
}

my @lat_rows = map {
	[ $_->{mode}, $_->{n}, $_->{hold}, $_->{holds}, $_->{steady}, sprintf('%.0f %%', $_->{cross_share}),
	  $_->{p50}, $_->{p99}, $_->{max}, $_->{xp50}, $_->{xp99}, sprintf('%.1f', $_->{p99_wait}),
	  sprintf('%.1f', $_->{max_wait}), $_->{subs}, $_->{overlaps} ]
} @rows;
my @cmds = grep { $cmd_names{$_} } qw(evalsha subscribe unsubscribe publish hexists exists hset hget pexpire pttl incr get del lindex lpop zscore zadd zrem rpush lrem time);
my %shown = map { $_ => 1 } @cmds;
my @other = sort grep { !$shown{$_} } keys %cmd_names;
my @cmd_rows = map {
	my $r = $_;
	[ $r->{mode}, $r->{n}, $r->{hold}, $r->{holds},
	  sprintf('%.2f', $r->{total_cmds} / $r->{holds}),
	  sprintf('%.2f', (($r->{d}{evalsha} // 0) + ($r->{d}{subscribe} // 0) + ($r->{d}{unsubscribe} // 0)
	      + ($r->{d}{ping} // 0)) / $r->{holds}),
	  (map { sprintf('%.2f', ($r->{d}{$_} // 0) / $r->{holds}) } @cmds, @other) ]
} @rows;

# growth of commands per hold from the shortest to the longest hold
my @growth;
for my $fair ('non-fair', 'fair')
{
	for my $n (@ns)
	{
		my @r = sort { $a->{hold} <=> $b->{hold} } grep { $_->{mode} eq $fair && $_->{n} == $n } @rows;
		next unless @r >= 2;
		push @growth, sprintf('%s n=%d: %.2f → %.2f', $fair, $n,
			$r[0]{total_cmds} / $r[0]{holds}, $r[-1]{total_cmds} / $r[-1]{holds});
	}
}
my @short = grep { $_->{hold} == $holds_ms[0] } @rows;
# runs where the lock never went to another session have no such hand-off
my @bad = grep { defined $_->{xp50_raw} && $_->{xp50_raw} >= 1 } @short;
my $none = grep { !defined $_->{xp50_raw} } @short;
my $verdict = @bad ? 'MISSED' : 'met';
my $worst = 0;
for (@short) { $worst = $_->{xp50_raw} if defined $_->{xp50_raw} && $_->{xp50_raw} > $worst; }
my $overlaps = 0;
$overlaps += $_->{overlaps} for @rows;

# Scaling targets: commands per hold at the most sessions ≤ 1.5× those at
# the fewest (non-fair, shortest hold); p50 < 1 ms and p99 < 5 ms of all
# hand-offs at the most sessions; subscriber connections at most 1.
my ($lo, $hi) = (sort { $a <=> $b } @ns)[0, -1];
my ($r_lo) = grep { $_->{mode} eq 'non-fair' && $_->{n} == $lo && $_->{hold} == $holds_ms[0] } @rows;
my ($r_hi) = grep { $_->{mode} eq 'non-fair' && $_->{n} == $hi && $_->{hold} == $holds_ms[0] } @rows;
my $ratio = ($r_hi->{total_cmds} / $r_hi->{holds}) / ($r_lo->{total_cmds} / $r_lo->{holds});
my @at_hi = grep { $_->{n} == $hi && $_->{hold} == $holds_ms[0] } @rows;
my @lat_bad = grep { !defined $_->{p50_raw} || $_->{p50_raw} >= 1 || $_->{p99_raw} >= 5 } @at_hi;
my $max_subs = 0;
for (@rows) { $max_subs = $_->{subs} if $_->{subs} > $max_subs; }
my $scaling = sprintf(
	"**Target: commands per hold at %d sessions ≤ 1.5× those at %d (non-fair, %s ms holds) — %s** (%.2f ÷ %.2f = %.2f×).\n\n"
	  . "**Target: hand-off p50 < 1 ms and p99 < 5 ms at %d sessions (%s ms holds) — %s** (%s).\n\n"
	  . "**Target: subscriber connections O(1) per server — %s** (at most %d seen in any run, with up to %d sessions waiting).",
	$hi, $lo, $holds_ms[0], $ratio <= 1.5 ? 'met' : 'MISSED',
	$r_hi->{total_cmds} / $r_hi->{holds}, $r_lo->{total_cmds} / $r_lo->{holds}, $ratio,
	$hi, $holds_ms[0], @lat_bad ? 'MISSED' : 'met',
	join('; ', map { "$_->{mode}: p50 $_->{p50}, p99 $_->{p99}" } @at_hi),
	$max_subs <= 1 ? 'met' : 'MISSED', $max_subs, $hi);

open my $fh, '>', $out or die;
print $fh <<"MD";
## 2. Contended hand-off

Command: `bash bench/run.sh handoff` (bench/handoff.pl).
@{[ BenchLib::machine($node, $redis) ]}

N sessions run, at the same time, `bench_hold(run, name, holds, hold, fair)`:
a plpgsql loop of `redis_lock_acquire(name, NULL, NULL, fair)` (wait without
limit), `clock_timestamp()` into an array, `pg_sleep(hold)`,
`clock_timestamp()` into a second array, `redis_lock_release(name)`; the
arrays go into an unlogged table at the end. About $total_short holds per run
at $holds_ms[0] ms (fewer at longer holds; at least 20 per session).
Hand-off latency = an acquisition time − the release start of the hold
before it (all holds sorted by acquisition time), counted from the moment
every session has held the lock once (or from the start, when one session
finished all its holds before another got its first) until the first
session finished its loop. "Next holder is another session" is the
share of hand-offs that went to a different session; in non-fair mode the
releasing session often takes the lock straight back (it is running, the
woken waiters are not yet), as with Redisson's RLock. Latencies in ms.
"Overlaps" counts acquisitions before the previous holder's release started:
it must be 0 (mutual exclusion).

@{[ BenchLib::table(['mode', 'sessions', 'hold ms', 'holds', 'hand-offs measured', 'next holder is another session', 'p50 all', 'p99 all', 'max all', 'p50 to another session', 'p99 to another session', 'p99 wait', 'max wait', 'subscriber connections', 'overlaps'], @lat_rows) ]}
"Wait" is how long an acquisition took, from the call to the lock (ms):
the longest shows whether a waiter starves. "Subscriber connections" is
the most connections in pub/sub mode that Redis CLIENT LIST showed during
the run (sampled every 50 ms).

Redis commands per hold (INFO commandstats deltas over the whole run ÷
holds; commandstats also counts the commands a script runs with
`redis.call`, so "all" includes those; "client" = EVALSHA + SUBSCRIBE +
UNSUBSCRIBE + PING, the commands sessions sent):

@{[ BenchLib::table(['mode', 'sessions', 'hold ms', 'holds', 'all', 'client', @cmds, @other], @cmd_rows) ]}
All commands per hold, shortest → longest hold: @{[ join('; ', @growth) ]}.
A polling waiter would send more commands per hold the longer each hold lasts.

$scaling

**Target: hand-off p50 under 1 ms on loopback — $verdict** (at a $holds_ms[0] ms hold, worst p50 of a hand-off to another session @{[ sprintf('%.3f', $worst) ]} ms@{[ $none ? "; $none run(s) had no hand-off to another session" : '' ]}). Mutual exclusion: $overlaps overlapping holds in all runs.
MD
close $fh;
BenchLib::progress("wrote %s", $out);
