# Workload 2: contended hand-off. N sessions (2, 4, 8) take turns on one
# lock name; each holds it for a fixed short time in a plpgsql loop and
# records clock_timestamp() right after acquiring and right before releasing
# (kept in plpgsql arrays, inserted into an unlogged table at the end).
# Hand-off latency = an acquisition - the previous holder's release start.
#
# Redis commands per hold come from INFO commandstats deltas over the run:
# they must not grow with the hold time (waiters sleep on pub/sub, no
# polling).
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use BenchLib;
use RedisLockTest;
use Time::HiRes qw(time);

my $out = shift // 'RESULTS-handoff.md';
my @ns = split /[,\s]+/, ($ENV{REDISLOCK_BENCH_HANDOFF_SESSIONS} // '2,4,8');
my @holds_ms = split /[,\s]+/, ($ENV{REDISLOCK_BENCH_HOLD_MS} // '1,20');
# total holds per run: this many for a 1 ms hold, fewer for longer holds
my $total_short = int(($ENV{REDISLOCK_BENCH_HANDOFFS} // 1500) * BenchLib::scale());

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('bench_handoff', $redis, 'max_connections' => 30);
$node->safe_psql('postgres', <<'SQL');
CREATE UNLOGGED TABLE handoff(run text, pid int, acq timestamptz, rel timestamptz);
CREATE FUNCTION bench_hold(run text, lockname text, n int, hold float8, fair boolean)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    a timestamptz[] := '{}';
    r timestamptz[] := '{}';
BEGIN
    FOR i IN 1 .. n LOOP
        IF NOT redis_lock_acquire(lockname, NULL, NULL, fair) THEN
            RAISE EXCEPTION 'not acquired';
        END IF;
        a := a || clock_timestamp();
        PERFORM pg_sleep(hold);
        r := r || clock_timestamp();
        PERFORM redis_lock_release(lockname);
    END LOOP;
    INSERT INTO handoff SELECT run, pg_backend_pid(), x, y FROM unnest(a, r) AS u(x, y);
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
			for (0 .. $n - 1)
			{
				my ($v, $err) = $sess[$_]->finish(600);
				die "session $_: $err" if defined $err;
			}
			my $wall = time - $t0;
			my $s1 = BenchLib::commandstats($redis);
			my $d = BenchLib::commandstats_delta($s0, $s1);
			my $holds = $per * $n;

			# hand-offs, in acquisition order, while all n sessions were active
			my @ev = map { [ split /\|/ ] } split /\n/, $node->safe_psql('postgres',
				"SELECT pid, extract(epoch FROM acq)::numeric(20,6), extract(epoch FROM rel)::numeric(20,6) "
				. "FROM handoff WHERE run = '$run' ORDER BY acq");
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
			};
			BenchLib::progress("%-8s n=%d hold=%sms holds=%d hand-off p50 %s p99 %s (other session: %.0f%%, p50 %s p99 %s) cmds/hold %.2f overlaps %d",
				$rows[-1]{mode}, $n, $hold, $holds, $rows[-1]{p50}, $rows[-1]{p99},
				$rows[-1]{cross_share}, $rows[-1]{xp50}, $rows[-1]{xp99}, $total_cmds / $holds, $overlaps);
		}
	}
}

my @lat_rows = map {
	[ $_->{mode}, $_->{n}, $_->{hold}, $_->{holds}, $_->{steady}, sprintf('%.0f %%', $_->{cross_share}),
	  $_->{p50}, $_->{p99}, $_->{xp50}, $_->{xp99}, $_->{overlaps} ]
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
my @bad = grep { !defined $_->{xp50_raw} || $_->{xp50_raw} >= 1 } @short;
my $verdict = @bad ? 'MISSED' : 'met';
my $worst = 0;
for (@short) { $worst = $_->{xp50_raw} if defined $_->{xp50_raw} && $_->{xp50_raw} > $worst; }
my $overlaps = 0;
$overlaps += $_->{overlaps} for @rows;

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

@{[ BenchLib::table(['mode', 'sessions', 'hold ms', 'holds', 'hand-offs measured', 'next holder is another session', 'p50 all', 'p99 all', 'p50 to another session', 'p99 to another session', 'overlaps'], @lat_rows) ]}
Redis commands per hold (INFO commandstats deltas over the whole run ÷
holds; commandstats also counts the commands a script runs with
`redis.call`, so "all" includes those; "client" = EVALSHA + SUBSCRIBE +
UNSUBSCRIBE + PING, the commands sessions sent):

@{[ BenchLib::table(['mode', 'sessions', 'hold ms', 'holds', 'all', 'client', @cmds, @other], @cmd_rows) ]}
All commands per hold, shortest → longest hold: @{[ join('; ', @growth) ]}.
A polling waiter would send more commands per hold the longer each hold lasts.

**Target: hand-off p50 under 1 ms on loopback — $verdict** (at a $holds_ms[0] ms hold, worst p50 of a hand-off to another session @{[ sprintf('%.3f', $worst) ]} ms). Mutual exclusion: $overlaps overlapping holds in all runs.
MD
close $fh;
BenchLib::progress("wrote %s", $out);
