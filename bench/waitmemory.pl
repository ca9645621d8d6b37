# Workload: memory over a long wait. One waiting session per kind of wait
# (lock, transaction lock, fair lock, read, write, multi-lock, semaphore,
# expiring permit, count-down latch), each blocked by a holder that never
# lets go, all waiting at once for REDISLOCK_BENCH_WAIT_SECONDS (default 60)
# at redislock.deadlock_timeout = REDISLOCK_BENCH_DEADLOCK_TIMEOUT (default:
# the server's deadlock_timeout, 1 s): a blocked wait runs one deadlock check
# per interval. For each waiter, the total of its memory contexts
# (pg_log_backend_memory_contexts, "Grand total" in the server log) and its
# RssAnon (/proc/<pid>/status) once it has waited 5 s, and again at the end;
# reported as bytes per minute of waiting. Target: flat (0 bytes/minute).
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use BenchLib;
use RedisLockTest;
use Time::HiRes ();

my $out     = shift // 'RESULTS-waitmemory.md';
my $seconds = $ENV{REDISLOCK_BENCH_WAIT_SECONDS} // 60;
my $dt      = $ENV{REDISLOCK_BENCH_DEADLOCK_TIMEOUT};
my $warmup  = 5;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('bench_waitmemory', $redis);
my $obs   = RedisLockTest::Session->new($node);
my $h     = RedisLockTest::Session->new($node);

# kind => [ what the holder does, the waiter's statement ]
my @kinds = (
	[ 'lock',      "SELECT redis_lock_acquire('bw:lock')", "SELECT redis_lock_acquire('bw:lock', '1 day')" ],
	[ 'xact lock', "SELECT redis_lock_acquire('bw:xact')", "SELECT redis_xact_lock_acquire('bw:xact', '1 day')" ],
	[ 'fair lock', "SELECT redis_lock_acquire('bw:fair', NULL, NULL, true)",
		"SELECT redis_lock_acquire('bw:fair', '1 day', NULL, true)" ],
	[ 'read',  "SELECT redis_write_lock_acquire('bw:rw')", "SELECT redis_read_lock_acquire('bw:rw', '1 day')" ],
	[ 'write', "SELECT redis_read_lock_acquire('bw:wr')",  "SELECT redis_write_lock_acquire('bw:wr', '1 day')" ],
	[ 'multi-lock', "SELECT redis_lock_acquire('bw:m2')",
		"SELECT redis_lock_acquire_all(ARRAY['bw:m1', 'bw:m2'], '1 day')" ],
	[ 'semaphore', "SELECT redis_semaphore_try_set_permits('bw:sem', 1), redis_semaphore_acquire('bw:sem')",
		"SELECT redis_semaphore_acquire('bw:sem', 1, '1 day')" ],
	[ 'expiring permit', "SELECT redis_permit_try_set_permits('bw:permit', 1), redis_permit_acquire('bw:permit')",
		"SELECT redis_permit_acquire('bw:permit', '1 day')" ],
	[ 'latch', "SELECT redis_latch_try_set_count('bw:latch', 1)", "SELECT redis_latch_await('bw:latch', '1 day')" ],
);

# The Grand total (bytes) of pid's memory contexts, from the server log.
sub contexts_total
{
	my ($pid) = @_;
	my $from = -s $node->logfile;
	$obs->query("SELECT pg_log_backend_memory_contexts($pid)");
	my $total;
	RedisLockTest::wait_until(30, "the memory contexts of $pid in the log", sub {
		my $new = substr(RedisLockTest::slurp($node->logfile), $from);
		($total) = $new =~ /\[$pid\][^\n]*Grand total: (\d+) bytes/;
		return defined $total;
	}) or die "no memory context log of $pid";
	return $total;
}

sub measure
{
	my ($w) = @_;
	return [ Time::HiRes::time(), contexts_total($w->pid), BenchLib::proc_status($w->pid)->{RssAnon} ];
}

my @waiters;
for my $k (@kinds)
{
	my ($kind, $hold, $wait) = @$k;
	$h->query($hold);
	my $w = RedisLockTest::Session->new($node);
	$w->query("SET redislock.deadlock_timeout = '$dt'") if defined $dt;
	# a lock taken first: the session has its tables before it waits
	$w->query("SELECT redis_lock_acquire('bw:warm'), redis_lock_release('bw:warm')");
	$w->start($wait);
	push @waiters, [ $kind, $w ];
}
my $interval = $obs->query("SELECT current_setting('deadlock_timeout')");
$interval = $dt if defined $dt;
sleep $warmup;
my $c0 = $obs->query('SELECT deadlock_checks FROM redis_lock_stats');
# (no $_ here: BenchLib::proc_status reads lines into it)
my (%first, %last);
for my $wt (@waiters) { $first{ $wt->[0] } = measure($wt->[1]); }
BenchLib::progress('%d waiters; measuring over %d s', scalar @waiters, $seconds);
sleep $seconds;
for my $wt (@waiters) { $last{ $wt->[0] } = measure($wt->[1]); }
my $c1 = $obs->query('SELECT deadlock_checks FROM redis_lock_stats');

my @rows;
my $worst = 0;
for my $wt (@waiters)
{
	my ($kind, $w) = @$wt;
	my ($p, $q) = ($first{$kind}, $last{$kind});
	my $minutes = ($q->[0] - $p->[0]) / 60;
	my $ctx_rate = ($q->[1] - $p->[1]) / $minutes;
	my $anon_rate = ($q->[2] - $p->[2]) / $minutes;
	$worst = $ctx_rate if abs($ctx_rate) > abs($worst);
	push @rows, [ $kind, sprintf('%.2f', $minutes), $p->[1], $q->[1], sprintf('%.0f', $ctx_rate),
		$p->[2], $q->[2], sprintf('%.0f', $anon_rate) ];
	BenchLib::progress('%-16s contexts %d -> %d bytes (%.0f bytes/min), RssAnon %d -> %d kB',
		$kind, $p->[1], $q->[1], $ctx_rate, $p->[2], $q->[2]);
	$w->cancel;
	$w->close;
}
my $checks = ($c1 - $c0) / @waiters;
$h->query('SELECT redis_lock_release_all()');
my $verdict = $worst == 0 ? 'met' : 'MISSED';

open my $fh, '>', $out or die;
print $fh <<"MD";
## Memory over a long wait

Command: `bash bench/run.sh waitmemory` (bench/waitmemory.pl;
REDISLOCK_BENCH_WAIT_SECONDS=$seconds@{[ defined $dt ? ", REDISLOCK_BENCH_DEADLOCK_TIMEOUT=$dt" : '' ]}).
@{[ BenchLib::machine($node, $redis) ]}

One session per kind of wait, each blocked by a holder that never lets go,
all waiting at once; redislock.deadlock_timeout $interval, so that each waiter runs
one deadlock check per $interval (@{[ sprintf('%.0f', $checks) ]} checks per waiter on average
in the measured span, from `redis_lock_stats.deadlock_checks`). After $warmup s
of waiting and again $seconds s later: the total of the waiter's memory contexts
(`pg_log_backend_memory_contexts`, the "Grand total" it logs, in bytes) and
its RssAnon (`/proc/<pid>/status`, kB: the backend's private heap).

@{[ BenchLib::table(['wait', 'minutes', 'contexts bytes, first', 'contexts bytes, last', 'contexts bytes per minute', 'RssAnon kB, first', 'RssAnon kB, last', 'RssAnon kB per minute'], @rows) ]}
**Target: a waiting session's memory flat over its wait (0 bytes per minute) — $verdict** (largest growth of a waiter's memory contexts: @{[ sprintf('%.0f', $worst) ]} bytes per minute).
MD
close $fh;
BenchLib::progress('wrote %s', $out);
