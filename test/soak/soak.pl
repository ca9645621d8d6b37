# soak.pl — the chaos soak across every primitive (run by test/soak/run.sh,
# which sets up PATH, TESTDIR, PERL5LIB as test/run-all.sh does).
#
# One event loop drives, for --minutes:
#   - SQL workers (DBD::Pg sessions, every statement asynchronous so that it
#     can be cancelled), each doing one random operation at a time on a few
#     names: exclusive lock, fair lock, xact lock, read lock, write lock,
#     multi-lock, semaphore, expiring permit, latch count-down / await, at
#     session or transaction scope, with random waits, ended randomly:
#     release (COMMIT for xact scope), rollback, own timeout, cancel,
#     terminate (then reconnect), disconnect (then reconnect);
#   - Redisson-protocol clients (FakeRedisson: Redisson's own scripts) doing
#     the same kinds with polling waits, ended by release, timeout or
#     disconnect;
#   - a fault driver (one fault at a time, at random times): listener
#     terminated, CLIENT KILL TYPE pubsub, CLIENT PAUSE, SIGSTOP/SIGCONT of a
#     holder backend and of the watchdog worker, Redis restarted (AOF on),
#     and the scripted rounds of SoakSchedules.pm: a hold lost and re-entered
#     with varying leases, a release meeting an error reply.
# Invariants, checked online and at the end (see test/soak/README.md):
#   exclusion of exclusive holders on a fenced resource (a second Redis that
#   no fault touches), fencing tokens increasing, readers never see a
#   writer's half-written state, never more semaphore / permit holders than
#   permits, no lost wake-up, waiters' memory flat, no statement hung, no
#   crash in the server log, nothing left in Redis or redis_locks at the end;
#   and the schedules' (SoakSchedules.pm): a true re-entry backed by Redis, a
#   confirmed loss reported in time, never two sessions holding one exclusive
#   lock in redis_locks for long, nothing left in Redis that SQL released.
#
# Output: the seed first, then progress, a closing summary, and the line
#   soak-driver: N violations
# Exit status 0 only without violations.
use strict;
use warnings;
# The harness sends STDOUT and STDERR to tmp_check/log/regress_log_soak;
# what the soak says goes to the terminal as well.
our $TTY;
BEGIN { open($TTY, '>&', \*STDOUT) or die "dup STDOUT: $!"; $TTY->autoflush(1); }
sub say { print $TTY @_; print STDOUT @_; }
use FindBin;
use lib "$FindBin::RealBin", "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use Getopt::Long;
use POSIX ();
use Time::HiRes qw(time sleep);
use RedisLockTest;
use FakeRedisson;
use SoakRng;
use SoakSchedules;

# --- options ----------------------------------------------------------------------
my %FAULT_KINDS = map { $_ => 1 } qw(listener pubsub pause stop-holder stop-watchdog restart reentry release-error);
# a control, not in "all": the listener stopped for 8 s without the lost
# wake-up check being told, so that the check must fire (it can fail)
# force-release: a held exclusive lock deleted under its holder
# (redis_lock_force_release), so that the exclusion check must fire
my %CONTROL_KINDS = ('stop-listener' => 1, 'force-release' => 1);
my ($MINUTES, $SEED, $FAULTS, $SQL_N, $JAVA_N, $PRIME, $ROUND) = (3, undef, 'all', 8, 3, 0, '');
GetOptions(
	'minutes=f' => \$MINUTES,
	'seed=i'    => \$SEED,
	'faults=s'  => \$FAULTS,
	'sql=i'     => \$SQL_N,
	'java=i'    => \$JAVA_N,
	'prime!'    => \$PRIME,
	'round=s'   => \$ROUND,
) or die "usage: soak.pl --minutes N [--seed S] [--faults all|none|k1,k2] [--sql N] [--java N] [--prime] [--round k=v,...]\n";
# --round kind=lock,loss=force,taker=sql: every reentry / release-error
# round takes these decisions (the others are drawn as usual)
my %ROUND_FIX;
for my $kv (split /,/, $ROUND)
{
	my ($k, $v) = split /=/, $kv, 2;
	die "soak: --round: '$kv' is not one of " . join(', ', map { "$_=" . join('|', @{ $SoakSchedules::FIXABLE{$_} }) } sort keys %SoakSchedules::FIXABLE) . "\n"
	  unless defined $v && $SoakSchedules::FIXABLE{$k} && grep { $_ eq $v } @{ $SoakSchedules::FIXABLE{$k} };
	$ROUND_FIX{$k} = $v;
}
$SEED //= int(time() * 1000) % 2147483647;
my %fault_on;
if ($FAULTS eq 'all') { %fault_on = %FAULT_KINDS; }
elsif ($FAULTS ne 'none')
{
	for my $k (split /,/, $FAULTS)
	{
		die "soak: unknown fault kind '$k' (known: " . join(',', sort keys %FAULT_KINDS, keys %CONTROL_KINDS) . ")\n"
		  unless $FAULT_KINDS{$k} || $CONTROL_KINDS{$k};
		$fault_on{$k} = 1;
	}
}
$| = 1;
say "soak: seed $SEED (replay: --seed $SEED; the same decisions per worker, client and fault "
  . "driver, but timing and so the interleaving differ)\n";
say "soak: $MINUTES min, $SQL_N SQL workers, $JAVA_N Redisson clients, faults: "
  . (join(',', sort keys %fault_on) || 'none') . ($PRIME ? ', sessions primed' : '')
  . ($ROUND ? ", rounds fixed to $ROUND" : '') . "\n";
srand($SEED);

# --- settings (the bounds below are stated in test/soak/README.md) --------------------
my $WATCHDOG_S  = 9;      # redislock.watchdog_timeout: renewal every 3 s
my $DEADLOCK_MS = 200;    # redislock.deadlock_timeout: a check every 200 ms of a wait
my $FAIR_WAIT_S = 4;      # redislock.fair_wait_timeout
my $LOCK_TIMEOUT_S = 20;  # lock_timeout of every SQL session (wait => NULL)
my $JAVA_LEASE_MS = 8000; # Redisson clients' fixed lease
my $STOP_MAX_S  = 2.5;    # SIGSTOP lasts at most this (< one renewal period)
my $WAKE_BOUND_S = 5;     # lost wake-up: free this long with the listener up
my $SETTLE_S    = 2;      # after a fault that touches wake-ups, before windows count
my $HANG_SLACK_S = 15;    # a statement running past its own bound by this is hung
my $MEM_RATIO   = 1.5;    # waiter memory: end/start above this (and +1 MB) is growth
my $PERMITS     = 2;      # semaphore and expiring-permit pool
my $P = 'soak:';
my @EXCL = map { "${P}L$_" } 1 .. 3;
my $FAIR = "${P}F1";
my $RW   = "${P}R1";
my $SEM  = "${P}S1";
my $PMT  = "${P}P1";
my $LATCH = "${P}C1";

# --- servers ---------------------------------------------------------------------------
my $redis = RedisLockTest::Redis->new(appendonly => 1);    # the locks; faults hit it
my $res   = RedisLockTest::Redis->new;                     # the fenced resource; no faults
my $node  = RedisLockTest::node('soak', $redis,
	'max_connections'              => '80',
	'redislock.watchdog_timeout'   => "${WATCHDOG_S}s",
	'redislock.deadlock_timeout'   => "${DEADLOCK_MS}ms",
	'redislock.fair_wait_timeout'  => "${FAIR_WAIT_S}s",
	'redislock.connect_timeout'    => '1s',
	'redislock.command_timeout'    => '2s',
	'log_min_messages'             => 'warning',
	# a crash is a violation, and the run goes on after it
	'restart_after_crash'          => 'on');
sub obs { return RedisLockTest::observer($node); }
my $rc  = FakeRedisson::Conn->new(port => $res->port, timeout => 10);
my $lr;    # sampling connection to the locks Redis (reopened after errors)
sub lr
{
	$lr //= FakeRedisson::Conn->new(port => $redis->port, timeout => 5);
	return $lr;
}
sub lcmd
{
	my @cmd = @_;
	my $v = eval { lr()->cmd(@cmd) };
	if ($@) { $lr->close if $lr; $lr = undef; die $@; }
	return $v;
}

# stopped pids => time to continue; written to a file run.sh reads on exit
my %stopped;
my $STOPPED_FILE = $ENV{SOAK_STOPPED_FILE};
sub write_stopped
{
	return unless $STOPPED_FILE;
	open my $fh, '>', "$STOPPED_FILE.tmp" or return;
	print $fh "$_\n" for sort keys %stopped;
	close $fh;
	rename "$STOPPED_FILE.tmp", $STOPPED_FILE;
}
sub cont_all
{
	kill 'CONT', $_ for keys %stopped;
	%stopped = ();
	write_stopped();
}
END { cont_all(); }

# --- bookkeeping ---------------------------------------------------------------------------
my %ops;        # "kind" => started; "kind:how" => ended so
my %faults;     # kind => injected
my %errs;       # sqlstate => count
my @viol;       # [time, category, detail]
my %viol_n;     # category => count
my $T0 = time();
sub ts { sprintf('%7.1fs', time() - $T0) }
sub violation
{
	my ($cat, $detail) = @_;
	$viol_n{$cat}++;
	push @viol, [ ts(), $cat, $detail ];
	say "soak: VIOLATION [$cat] at " . ts() . ": $detail\n";
}
sub note { say "soak: " . ts() . " $_[0]\n"; }

# --- setup: pools and latch --------------------------------------------------------------------
obs()->query("SELECT redis_semaphore_try_set_permits('$SEM', $PERMITS)");
obs()->query("SELECT redis_permit_try_set_permits('$PMT', $PERMITS)");
$rc->cmd('FLUSHALL');

# --- the scripted schedules (test/soak/SoakSchedules.pm) ------------------------------------------
# reentry: a hold lost under its session, re-entered with longer leases and
# then without one; release-error: a release that meets an error reply
my %sched_n;    # what the rounds did, for the summary
my $SCHED_SLACK_S = 9;    # a confirmed loss is reported within a renewal period and this
my $sched = SoakSchedules->new(node => $node, redis => $redis, renew_s => $WATCHDOG_S / 3,
	lease_s => $WATCHDOG_S, slack_s => $SCHED_SLACK_S, violation => \&violation, note => \&note,
	lcmd => \&lcmd, obs => \&obs, count => \%sched_n);
my $srng = SoakRng->new($SEED, 3);
END { $sched->finish if $sched; }

# --- the fenced resource ------------------------------------------------------------------------
# own:<name>  the exclusive holder in its critical section ("who token")
# rw:readers  readers of $RW in their section; rw:a, rw:b the writer's two values
# sem:<name>  holders of permits in their section
my $ENTER_EXCL = <<'LUA';
local cur = redis.call('get', KEYS[1])
if cur then return cur end
redis.call('set', KEYS[1], ARGV[1])
return false
LUA

my %last_token;    # name => last fencing token seen granted
my %acq_at;        # name => time of the last acquisition we saw (any client)
my %who_desc;      # holder id => description

sub enter_excl
{
	my ($name, $who, $token) = @_;
	$acq_at{$name} = time();
	if (defined $token && $token > 0)
	{
		if (defined $last_token{$name} && $token <= $last_token{$name})
		{
			violation('fencing', "$who got $name with token $token, not above the last one granted ($last_token{$name})");
		}
		$last_token{$name} = $token if !defined $last_token{$name} || $token > $last_token{$name};
	}
	my $other = $rc->cmd('EVAL', $ENTER_EXCL, 1, "own:$name", "$who " . ($token // '-'));
	violation('exclusion', "$who (token " . ($token // '-') . ") holds $name while $other is in its critical section "
		  . "(lost_locks so far: " . lost_locks() . ")") if defined $other;
}

sub exit_excl
{
	my ($name, $who) = @_;
	my $cur = $rc->cmd('GET', "own:$name");
	$rc->cmd('DEL', "own:$name") if defined $cur && $cur =~ /^\Q$who\E /;
}

my $wseq = 0;
sub enter_read
{
	my ($who) = @_;
	$acq_at{$RW} = time();
	my $w = $rc->cmd('GET', "own:$RW");
	violation('rw', "reader $who holds $RW while writer $w is in its section") if defined $w;
	$rc->cmd('INCR', 'rw:readers');
	check_rw($who, 'entry');
}
sub check_rw
{
	my ($who, $when) = @_;
	my ($a, $b) = @{ $rc->cmd('MGET', 'rw:a', 'rw:b') };
	$_ //= '' for $a, $b;
	violation('rw', "reader $who saw a writer's broken state at $when: a=$a b=$b") if $a ne $b;
}
sub exit_read
{
	my ($who) = @_;
	check_rw($who, 'exit');
	$rc->cmd('DECR', 'rw:readers');
}
sub enter_write
{
	my ($who, $token) = @_;
	my $r = $rc->cmd('GET', 'rw:readers') // 0;
	violation('rw', "writer $who holds $RW while $r reader(s) are in their section") if $r > 0;
	enter_excl($RW, $who, $token);
	$rc->cmd('SET', 'rw:a', "$who#" . ++$wseq);    # the first half of a non-atomic write
}
sub exit_write
{
	my ($who) = @_;
	$rc->cmd('SET', 'rw:b', $rc->cmd('GET', 'rw:a'));    # the second half, only now
	exit_excl($RW, $who);
}
sub enter_sem
{
	my ($name, $who) = @_;
	$acq_at{$name} = time();
	my $n = $rc->cmd('INCR', "sem:$name");
	violation('semaphore', "$who is holder number $n of $name, which has $PERMITS permits") if $n > $PERMITS;
}
sub exit_sem { my ($name) = @_; $rc->cmd('DECR', "sem:$name"); }

# enter/exit by kind; a hold is { kind, names, tokens }
my %sections;    # kind => critical sections entered
sub enter_hold
{
	my ($h, $who) = @_;
	my $k = $h->{kind};
	$sections{$k}++;
	if ($k eq 'read') { enter_read($who); }
	elsif ($k eq 'write') { enter_write($who, $h->{tokens}[0]); }
	elsif ($k eq 'sem' || $k eq 'permit') { enter_sem($h->{names}[0], $who); }
	else
	{
		my @t = @{ $h->{tokens} // [] };
		enter_excl($h->{names}[$_], $who, $t[$_]) for 0 .. $#{ $h->{names} };
	}
	$h->{entered} = 1;
}
sub exit_hold
{
	my ($h, $who) = @_;
	return unless $h && delete $h->{entered};
	my $k = $h->{kind};
	if ($k eq 'read') { exit_read($who); }
	elsif ($k eq 'write') { exit_write($who); }
	elsif ($k eq 'sem' || $k eq 'permit') { exit_sem($h->{names}[0]); }
	else { exit_excl($_, $who) for @{ $h->{names} }; }
}

my $lost_cache = [ 0, 0 ];
sub lost_locks
{
	return $lost_cache->[1] if time() - $lost_cache->[0] < 1;
	my $v = eval { obs()->query('SELECT lost_locks FROM redis_lock_stats') } // '?';
	$lost_cache = [ time(), $v ];
	return $v;
}

sub lit { my ($s) = @_; $s =~ s/'/''/g; return "'$s'"; }

# --- SQL workers ----------------------------------------------------------------------------------
my %OWNER_TO_W;    # owner id => worker (for the fair queue head)
my %PID_OPS;       # backend pid => the operations its session started

sub connect_worker
{
	my ($w) = @_;
	my $s = eval { RedisLockTest::Session->new($node, application_name => "soak$w->{i}") };
	if (!$s) { $w->{s} = undef; $w->{state} = 'down'; $w->{retry_at} = time() + 0.5; return; }
	$s->query("SET lock_timeout = '${LOCK_TIMEOUT_S}s'");
	$w->{s} = $s;
	$w->{pid} = $s->pid;
	$w->{owner} = undef;
	$w->{nops} = 0;
	$w->{state} = 'idle';
	$w->{gen}++;
	if ($PRIME)
	{
		# a first call that sets the session up, so that the known
		# first-call defects stay out of the way (--prime)
		$s->query("SELECT redis_lock_acquire('${P}prime', '0'), redis_lock_release('${P}prime')");
	}
}

my @W = map { my $w = { i => $_, rng => SoakRng->new($SEED, 100 + $_), gen => 0 }; connect_worker($w); $w } 1 .. $SQL_N;
sub wid { my ($w) = @_; return "sql$w->{i}.$w->{gen}(pid $w->{pid})"; }

my %SQL_KIND_W = (lock => 14, fair => 8, xact => 12, read => 10, write => 8, multi => 8,
	sem => 10, permit => 10, latch_down => 4, latch_await => 6, latch_set => 2);

sub wait_arg
{
	my ($r) = @_;
	my $c = $r->weighted({ zero => 1, short => 4, medium => 4, null => 3 });
	return ("'0'", 0) if $c eq 'zero';
	if ($c eq 'short') { my $x = $r->between(0.1, 1.0); return (sprintf("'%.0f ms'", 1000 * $x), $x); }
	if ($c eq 'medium') { my $x = $r->between(2, 8); return (sprintf("'%.1f s'", $x), $x); }
	return ('NULL', undef);
}

# decide an operation: everything about it from the worker's stream
sub decide_op
{
	my ($w) = @_;
	my $r = $w->{rng};
	my $kind = $r->weighted(\%SQL_KIND_W);
	my ($wait, $wait_s) = wait_arg($r);
	my $xact = $r->float < 0.4 ? 1 : 0;
	$xact = 1 if $kind eq 'xact';
	$xact = 0 if $kind =~ /^(lock|fair|latch_)/;
	# how the wait ends if the lock does not come at once, and when
	my $wait_end = $r->weighted({ natural => 10, cancel => 2, terminate => 1, disconnect => 1 });
	my $wait_end_at = $r->between(0.05, 3);
	# how the hold ends, and how long it lasts
	my $hold_end = $r->weighted({ release => 10, cancel => 2, terminate => 1.5, disconnect => 1.5,
			($xact ? (rollback => 3) : ()) });
	my $hold_s = $r->float < 0.06 ? $r->between(9, 15) : $r->between(0.02, 1.5);
	# where in the hold a cancel, terminate or disconnect comes (drawn
	# whether or not the lock comes: every operation draws alike)
	my $end_frac = $r->float;
	# a call during the hold: the owner id drawn while holding (a session
	# whose first call was the acquisition draws it only now)
	my $hold_call = $r->float < 0.3 ? 'redis_lock_owner_id() IS NOT NULL, ' : '';
	my $fair = $kind eq 'fair' || ($kind eq 'xact' && $r->float < 0.3) ? 'true' : 'false';
	my $lock = $kind eq 'fair' || $fair eq 'true' ? $FAIR : $r->pick(@EXCL);
	my @pair = do { my $a = $r->int(3); my $b = ($a + 1 + $r->int(2)) % 3; sort($EXCL[$a], $EXCL[$b]) };
	my ($sql, $h);
	my $B = $xact ? 'BEGIN; ' : '';
	my $x = $xact ? 'xact_' : '';
	if ($kind eq 'lock' || $kind eq 'fair' || $kind eq 'xact')
	{
		$sql = "${B}SELECT CASE WHEN redis_${x}lock_acquire(" . lit($lock) . ", $wait, NULL, $fair) "
		  . "THEN coalesce(redis_lock_fencing_token(" . lit($lock) . "), 0)::text END";
		$h = { kind => 'excl', names => [$lock] };
	}
	elsif ($kind eq 'read')
	{
		$sql = "${B}SELECT CASE WHEN redis_${x}read_lock_acquire(" . lit($RW) . ", $wait) THEN 'ok' END";
		$h = { kind => 'read', names => [$RW] };
	}
	elsif ($kind eq 'write')
	{
		$sql = "${B}SELECT CASE WHEN redis_${x}write_lock_acquire(" . lit($RW) . ", $wait) "
		  . "THEN coalesce(redis_lock_fencing_token(" . lit($RW) . "), 0)::text END";
		$h = { kind => 'write', names => [$RW] };
	}
	elsif ($kind eq 'multi')
	{
		my $arr = 'ARRAY[' . join(',', map { lit($_) } @pair) . ']';
		$sql = "${B}SELECT CASE WHEN redis_${x}lock_acquire_all($arr, $wait) THEN concat_ws(',', "
		  . join(', ', map { 'coalesce(redis_lock_fencing_token(' . lit($_) . '), 0)' } @pair) . ') END';
		$h = { kind => 'excl', names => [@pair] };
	}
	elsif ($kind eq 'sem')
	{
		$sql = "${B}SELECT CASE WHEN redis_${x}semaphore_acquire(" . lit($SEM) . ", 1, $wait) THEN 'ok' END";
		$h = { kind => 'sem', names => [$SEM] };
	}
	elsif ($kind eq 'permit')
	{
		$sql = "${B}SELECT redis_${x}permit_acquire(" . lit($PMT) . ", $wait)";
		$h = { kind => 'permit', names => [$PMT] };
	}
	elsif ($kind eq 'latch_await')
	{
		$sql = "SELECT CASE WHEN redis_latch_await(" . lit($LATCH) . ", $wait) THEN 'ok' END";
		$h = { kind => 'latch', names => [$LATCH] };
	}
	elsif ($kind eq 'latch_down') { $sql = "SELECT redis_latch_count_down(" . lit($LATCH) . ")"; }
	else { $sql = "SELECT redis_latch_try_set_count(" . lit($LATCH) . ", 1 + " . $r->int(3) . ")"; }

	my $label = $kind . ($xact && $kind ne 'xact' ? '(xact)' : '');
	my @touch = $h ? @{ $h->{names} } : ($LATCH);
	return { kind => $kind, label => $label, xact => $xact, wait_s => $wait_s, wait_end => $wait_end,
		wait_end_at => $wait_end_at, hold_end => $hold_end, hold_s => $hold_s, end_frac => $end_frac,
		hold_call => $hold_call,
		hold => $h, sql => $sql, touch => \@touch };
}

# start the decided operation, unless a name it touches is in a lull (then
# it waits, decided as it is, so that the worker's decisions replay)
sub launch_op
{
	my ($w) = @_;
	my $op = $w->{pending} //= decide_op($w);
	return if grep { lulled($_) } @{ $op->{touch} };
	delete $w->{pending};
	my ($label, $sql, $h) = @$op{qw(label sql hold)};
	$ops{$label}++;
	$op->{t0} = time();
	$w->{op} = $op;
	push @{ $PID_OPS{ $w->{pid} } }, $label . ($w->{nops} ? '' : ' (first call of the session)');
	$w->{s}->start($sql);
	$w->{state} = $h ? 'acq' : 'simple';
	$w->{st_since} = time();
	$w->{hang_reported} = 0;
	$w->{nops}++;
}

sub count_err
{
	my ($w, $where, $err, $state) = @_;
	$state //= '?';
	$errs{$state}++;
	# 40P01 cannot happen here: a worker holds one thing at a time and a
	# one-node multi-lock holds nothing while it waits, so no cycle exists.
	violation('false-deadlock', wid($w) . " $where: [$state] $err") if $state eq '40P01';
	# 38000 is a Redis error reply: while a release-error round holds Redis
	# a replica, every write answers -READONLY
	my $expected = '57014|55P03|08001|08006|57P01|25P02|08P01|57P02|57P03|XX000|08003|55000'
	  . ($fault_on{'release-error'} ? '|38000' : '');
	if ($state !~ /^($expected)$/ && $state ne '?')
	{
		note(wid($w) . " $where: unexpected error [$state] $err");
	}
}

# A new session for the slot.  Whatever the old one held goes with it (the
# server releases it at session end), so the critical section is left
# first; the driver's own ending ways (terminate, disconnect) have left it
# already, this is for sessions that broke (a crash, say).
sub reconnect
{
	my ($w) = @_;
	exit_hold($w->{op}{hold}, wid($w)) if $w->{op} && $w->{op}{hold};
	my $s = delete $w->{s};
	if ($s) { delete $s->{sth_async} unless $s->{dbh} && $s->{dbh}{pg_socket} >= 0; eval { $s->close }; }
	connect_worker($w);
}

sub end_session
{
	my ($w, $how) = @_;
	my $s = $w->{s};
	if ($how eq 'disconnect') { reconnect($w); return; }
	# terminate: not waiting here (the backend may be stopped); polled
	eval { obs()->query("SELECT pg_terminate_backend($w->{pid})") };
	$w->{state} = 'term';
	$w->{term_at} = time();
}

sub after_failed_acq
{
	my ($w) = @_;
	$w->{s}->try('ROLLBACK') if $w->{op}{xact};
	$w->{state} = 'idle';
}

sub step_worker
{
	my ($w, $ending) = @_;
	my $st = $w->{state};
	my $now = time();
	if ($st eq 'down') { connect_worker($w) if $now >= $w->{retry_at}; return; }
	if ($st eq 'term')
	{
		return if $now - ($w->{term_polled} // 0) < 0.1;
		$w->{term_polled} = $now;
		my $alive = eval { obs()->query("SELECT 1 FROM pg_stat_activity WHERE pid = $w->{pid}") };
		if (!defined $alive)
		{
			my $s = delete $w->{s};
			if ($s) { delete $s->{sth_async}; $s->close; }
			connect_worker($w);
		}
		elsif ($now - $w->{term_at} > 30 + ($stopped{ $w->{pid} } ? $STOP_MAX_S : 0))
		{
			violation('hang', wid($w) . " did not exit within 30 s of pg_terminate_backend");
			$w->{term_at} = $now + 3600;
		}
		return;
	}
	if ($st eq 'idle')
	{
		return if $ending;
		if ($w->{nops} && !defined $w->{owner})
		{
			$w->{owner} = eval { $w->{s}->query('SELECT redis_lock_owner_id()') };
			$OWNER_TO_W{ $w->{owner} } = $w if defined $w->{owner};
		}
		launch_op($w);
		return;
	}
	my $s = $w->{s};
	my $op = $w->{op};
	# a release, COMMIT, ROLLBACK, count-down or cancelled sleep: bounded by
	# command_timeout (2 s) and the settling of a hold (2 s) once its
	# backend runs again
	if ($st =~ /^(simple|rel|cancelling)$/ && !$s->is_done && $now - $w->{st_since} > $HANG_SLACK_S
		&& !$stopped{ $w->{pid} } && !$w->{hang_reported}++)
	{
		violation('hang', wid($w) . " $op->{label}: '$st' statement still running after ${HANG_SLACK_S}s");
	}
	if ($st eq 'simple')
	{
		return unless $s->is_done;
		my ($v, $err, $state) = $s->finish(1);
		count_err($w, $op->{label}, $err, $state) if defined $err;
		$ops{"$op->{label}:" . (defined $err ? 'error' : 'done')}++;
		$w->{state} = 'idle';
		return;
	}
	if ($st eq 'acq')
	{
		if (!$s->is_done)
		{
			my $el = $now - $op->{t0};
			my $bound = ($op->{wait_s} // $LOCK_TIMEOUT_S) + $HANG_SLACK_S;
			if ($el > $bound && !$op->{hang_reported})
			{
				$op->{hang_reported} = 1;
				violation('hang', wid($w) . " $op->{label}: still waiting after ${bound}s ($op->{sql})");
			}
			if ($op->{wait_end} ne 'natural' && $el >= $op->{wait_end_at} && !$op->{wait_ended})
			{
				$op->{wait_ended} = 1;
				$ops{"$op->{label}:wait_$op->{wait_end}"}++;
				if ($op->{wait_end} eq 'cancel') { eval { obs()->query("SELECT pg_cancel_backend($w->{pid})") }; }
				else { end_session($w, $op->{wait_end}); }
			}
			return;
		}
		my ($v, $err, $state) = $s->finish(1);
		if (defined $err)
		{
			count_err($w, "$op->{label} acquire", $err, $state);
			$ops{"$op->{label}:" . ($state && $state eq '57014' ? 'cancelled' : $state && $state eq '55P03' ? 'lock_timeout' : 'error')}++
			  unless $op->{wait_ended};
			if (!$s->{dbh} || !$s->{dbh}->ping) { reconnect($w); return; }
			after_failed_acq($w);
			return;
		}
		if (!defined $v)
		{
			$ops{"$op->{label}:timeout"}++;
			after_failed_acq($w);
			return;
		}
		# acquired
		my $h = $op->{hold};
		if ($h->{kind} eq 'latch') { $ops{"$op->{label}:opened"}++; $w->{state} = 'idle'; return; }
		$h->{tokens} = [ split /,/, $v ] if $h->{kind} eq 'excl' || $h->{kind} eq 'write';
		$h->{permit_id} = $v if $h->{kind} eq 'permit';
		$ops{"$op->{label}:acquired"}++;
		enter_hold($h, wid($w));
		$op->{held_at} = $now;
		$w->{state} = 'hold';
		$s->start("SELECT $op->{hold_call}pg_sleep($op->{hold_s})");
		$op->{end_at} = $now + ($op->{hold_end} =~ /^(release|rollback)$/ ? 0 : $op->{end_frac} * $op->{hold_s});
		return;
	}
	if ($st eq 'hold')
	{
		if (!$op->{slept} && $s->is_done)
		{
			my ($v, $err, $state) = $s->finish(1);
			$op->{slept} = 1;
			if (defined $err && (!$s->{dbh} || !$s->{dbh}->ping))
			{
				# the session broke under the hold (a crash-restart, say):
				# its holds are gone with it or expire with their lease
				count_err($w, "$op->{label} hold", $err, $state);
				$ops{"$op->{label}:session_lost"}++;
				reconnect($w);
				return;
			}
		}
		my $how = $ending ? 'disconnect' : $op->{hold_end};
		if ($how =~ /^(release|rollback)$/)
		{
			return unless $op->{slept};
			exit_hold($op->{hold}, wid($w));
			$ops{"$op->{label}:$how"}++;
			start_release($w, $how);
			return;
		}
		return if $now < $op->{end_at} && !$ending;
		exit_hold($op->{hold}, wid($w));
		$ops{"$op->{label}:$how"}++;
		if ($how eq 'cancel')
		{
			if ($op->{slept}) { start_release($w, 'release'); return; }
			eval { obs()->query("SELECT pg_cancel_backend($w->{pid})") };
			$w->{state} = 'cancelling';
			$w->{st_since} = $now;
			$w->{hang_reported} = 0;
			return;
		}
		end_session($w, $how);
		return;
	}
	if ($st eq 'cancelling')
	{
		return unless $s->is_done;
		$s->finish(1);
		start_release($w, 'release');
		return;
	}
	if ($st eq 'rel')
	{
		return unless $s->is_done;
		my ($v, $err, $state) = $s->finish(1);
		if (defined $err)
		{
			count_err($w, "$op->{label} release", $err, $state);
			$ops{"$op->{label}:release_error"}++;
			# a session whose release failed may still hold the lock (and
			# renew it): ending it gives back whatever it holds
			if (!$s->{dbh} || !$s->{dbh}->ping || !$op->{xact}) { reconnect($w); return; }
			$s->try('ROLLBACK');
		}
		elsif ($op->{xact} == 0 && defined $v && $v eq 'f')
		{
			$ops{"$op->{label}:release_false"}++;
			note(wid($w) . " $op->{label}: release said false (hold no longer held): " . join(' | ', $s->notices));
		}
		$w->{state} = 'idle';
		return;
	}
}

sub start_release
{
	my ($w, $how) = @_;
	my $op = $w->{op};
	my $h = $op->{hold};
	my $s = $w->{s};
	my $sql;
	if ($op->{xact}) { $sql = $how eq 'rollback' ? 'ROLLBACK' : 'COMMIT'; }
	elsif ($h->{kind} eq 'excl')
	{
		$sql = 'SELECT ' . join(' AND ', map { 'redis_lock_release(' . lit($_) . ')' } @{ $h->{names} });
	}
	elsif ($h->{kind} eq 'read') { $sql = 'SELECT redis_read_lock_release(' . lit($RW) . ')'; }
	elsif ($h->{kind} eq 'write') { $sql = 'SELECT redis_write_lock_release(' . lit($RW) . ')'; }
	elsif ($h->{kind} eq 'sem') { $sql = 'SELECT redis_semaphore_release(' . lit($SEM) . ', 1)'; }
	elsif ($h->{kind} eq 'permit')
	{
		$sql = 'SELECT redis_permit_release(' . lit($PMT) . ', ' . lit($h->{permit_id}) . ')';
	}
	$s->start($sql);
	$w->{state} = 'rel';
	$w->{st_since} = time();
	$w->{hang_reported} = 0;
}

# --- Redisson clients ---------------------------------------------------------------------------
my %JAVA_KIND_W = (lock => 10, fair => 6, read => 8, write => 6, sem => 8, permit => 8, latch_down => 3, latch_set => 1);

sub java_client
{
	my ($j, $uuid) = @_;
	my $c = eval { FakeRedisson->new(port => $redis->port, timeout => 5, lease => $JAVA_LEASE_MS,
			fair_wait => 5000, ($uuid ? (uuid => $uuid) : ())) };
	return $c;
}
my @J = map { { i => $_, rng => SoakRng->new($SEED, 200 + $_), state => 'idle', thread => 1, gen => 1 } } 1 .. $JAVA_N;
$_->{c} = java_client($_) for @J;
sub jid { my ($j) = @_; return "java$j->{i}.$j->{gen}:$j->{thread}"; }

# one Redisson call; on a connection error the client reconnects (same uuid)
# and the call counts as not made: the loop that restarts Redis is this one,
# so a call never straddles a restart, and a refused connection sent nothing.
sub jcall
{
	my ($j, $code) = @_;
	$j->{c} //= java_client($j, $j->{uuid}) or return (undef, 'connect');
	$j->{uuid} = $j->{c}->uuid;
	my @r = eval { $code->($j->{c}) };
	return (\@r, undef) unless $@;
	my $e = $@;
	$j->{c}->conn->close if $j->{c};
	$j->{c} = undef;
	$errs{'java:' . ($e =~ /^redis error for \S+: (\S+)/ ? $1 : 'io')}++;
	return (undef, $e);
}

sub step_java
{
	my ($j, $ending) = @_;
	my $now = time();
	my $st = $j->{state};
	my $r = $j->{rng};
	if ($st eq 'idle')
	{
		return if $ending || $now < ($j->{next_at} // 0);
		if (!$j->{pending})
		{
			my $kind = $r->weighted(\%JAVA_KIND_W);
			# the polling interval and the pause after the operation are
			# drawn here too, so that the stream does not depend on timing
			my $o = { kind => $kind, wait_s => $r->between(0, 3), hold_s => $r->between(0.05, 2),
				poll_s => $r->between(0.05, 0.3), pause_s => $r->between(0.05, 0.5),
				hold_end => $r->weighted({ release => 8, disconnect => 1 }), lock => $r->pick(@EXCL) };
			$o->{touch} = $kind eq 'lock' ? $o->{lock} : $kind eq 'fair' ? $FAIR : $kind =~ /^(read|write)$/ ? $RW
			  : $kind eq 'sem' ? $SEM : $kind eq 'permit' ? $PMT : $LATCH;
			$j->{pending} = $o;
		}
		return if lulled($j->{pending}{touch});
		$j->{op} = delete $j->{pending};
		$j->{op}{deadline} = $now + $j->{op}{wait_s};
		$ops{"java_$j->{op}{kind}"}++;
		$j->{thread}++;
		$j->{state} = 'try';
		$j->{next_try} = 0;
		$st = 'try';
	}
	my $op = $j->{op};
	my $k = $op->{kind};
	if ($st eq 'try')
	{
		if ($ending || $now > $op->{deadline})
		{
			if ($k eq 'fair') { my ($ok) = jcall($j, sub { $_[0]->fair_acquire_failed($FAIR, $j->{thread}) }); return unless $ok; }
			$ops{"java_$k:timeout"}++;
			$j->{state} = 'idle';
			$j->{next_at} = $now + $op->{pause_s};
			return;
		}
		return if $now < $j->{next_try};
		$j->{next_try} = $now + $op->{poll_s};
		my $t = $j->{thread};
		my ($res, $err);
		if ($k eq 'latch_down') { ($res) = jcall($j, sub { $_[0]->count_down($LATCH) }); $ops{'java_latch_down:done'}++ if $res; $j->{state} = 'idle' if $res; return; }
		if ($k eq 'latch_set') { ($res) = jcall($j, sub { $_[0]->try_set_count($LATCH, 2) }); $ops{'java_latch_set:done'}++ if $res; $j->{state} = 'idle' if $res; return; }
		my $h;
		if ($k eq 'lock')
		{
			($res) = jcall($j, sub { [ $_[0]->fenced_try_lock($op->{lock}, $t) ] }); return unless $res;
			my ($ttl, $token) = @{ $res->[0] };
			return unless defined $ttl && $ttl == -1;
			$h = { kind => 'excl', names => [ $op->{lock} ], tokens => [$token] };
		}
		elsif ($k eq 'fair')
		{
			($res) = jcall($j, sub { $_[0]->fair_try_lock($FAIR, $t) }); return unless $res;
			return if defined $res->[0];
			$h = { kind => 'excl', names => [$FAIR] };
		}
		elsif ($k eq 'read')
		{
			($res) = jcall($j, sub { $_[0]->try_read_lock($RW, $t) }); return unless $res;
			return if defined $res->[0];
			$h = { kind => 'read', names => [$RW] };
		}
		elsif ($k eq 'write')
		{
			($res) = jcall($j, sub { $_[0]->try_write_lock($RW, $t) }); return unless $res;
			return if defined $res->[0];
			$h = { kind => 'write', names => [$RW] };
		}
		elsif ($k eq 'sem')
		{
			($res) = jcall($j, sub { $_[0]->try_acquire($SEM, 1) }); return unless $res;
			return unless $res->[0];
			$h = { kind => 'sem', names => [$SEM] };
		}
		elsif ($k eq 'permit')
		{
			($res) = jcall($j, sub { $_[0]->try_acquire_permit($PMT, $JAVA_LEASE_MS) }); return unless $res;
			return unless defined $res->[0] && $res->[0] =~ /^[0-9a-f]{32}$/;
			$h = { kind => 'permit', names => [$PMT], permit_id => $res->[0] };
		}
		$ops{"java_$k:acquired"}++;
		enter_hold($h, jid($j));
		$op->{hold} = $h;
		$op->{end_at} = $now + $op->{hold_s};
		# semaphores and permits have no owner in Redisson: a client that
		# vanishes keeps them (for good, or until the lease), so they are
		# always given back
		$op->{hold_end} = 'release' if $k eq 'sem' || $k eq 'permit';
		$j->{state} = 'hold';
		return;
	}
	if ($st eq 'hold')
	{
		return if $now < $op->{end_at} && !$ending;
		my $h = $op->{hold};
		exit_hold($h, jid($j)) if $h->{entered};
		my $t = $j->{thread};
		if ($op->{hold_end} eq 'disconnect')
		{
			$ops{"java_$k:disconnect"}++;
			$j->{c}->conn->close if $j->{c};
			$j->{c} = undef;
			$j->{uuid} = undef;    # another "JVM"
			$j->{gen}++;
			$j->{state} = 'idle';
			return;
		}
		my ($res) = jcall($j, sub {
				return $_[0]->unlock($op->{lock}, $t) if $k eq 'lock';
				return $_[0]->fair_unlock($FAIR, $t) if $k eq 'fair';
				return $_[0]->unlock_read($RW, $t) if $k eq 'read';
				return $_[0]->unlock_write($RW, $t) if $k eq 'write';
				return $_[0]->release($SEM, 1) if $k eq 'sem';
				return $_[0]->release_permit($PMT, $h->{permit_id}) if $k eq 'permit';
			});
		return unless $res;    # retried at the next step
		$ops{"java_$k:release"}++;
		# unlock: nil = not held by this thread (Java's IllegalMonitorStateException)
		if ($k =~ /^(lock|fair|read|write)$/ && !defined $res->[0])
		{
			$ops{"java_$k:release_not_held"}++;
			note(jid($j) . " $k: unlock said " . ($res->[0] // 'nil') . ' (hold gone before its lease)');
		}
		$j->{state} = 'idle';
		$j->{next_at} = $now + $op->{pause_s};
		return;
	}
}

# --- lulls ------------------------------------------------------------------------------------------
# Every 10-25 s one name gets 8 s in which no new operation starts on it
# (those decided wait): the waiters already there must get it once its
# holders leave.  Without lulls a free resource is taken at once by a new
# arrival, and a waiter that missed its wake-up would go unseen.
my $lrng = SoakRng->new($SEED, 2);
my %lull;    # name => until
my $lulls = 0;
my $next_lull = time() + $lrng->between(10, 20);
my $LULL_S = 8;
sub lulled { my ($n) = @_; return ($lull{$n} // 0) > time(); }
sub lull_step
{
	my $now = time();
	return if $now < $next_lull;
	my $n = $lrng->pick(@EXCL, $FAIR, $RW, $SEM, $PMT, $LATCH);
	$lull{$n} = $now + $LULL_S;
	$lulls++;
	$next_lull = $now + $lrng->between(10, 25);
}

# --- faults ---------------------------------------------------------------------------------------
my $frng = SoakRng->new($SEED, 1);
my $next_fault = time() + $frng->between(3, 10);
my $fault;               # the fault in progress: { kind, until, ... }
my $quiet_since = time();    # no wake-up-affecting fault since (minus settle)

sub listener_pid { return eval { obs()->query("SELECT pid FROM pg_stat_activity WHERE backend_type = 'redislock listener'") }; }
sub watchdog_pid { return eval { obs()->query("SELECT pid FROM pg_stat_activity WHERE backend_type = 'redislock watchdog'") }; }

sub stop_pid
{
	my ($pid, $secs) = @_;
	return 0 unless $pid && kill('STOP', $pid);
	$stopped{$pid} = time() + $secs;
	write_stopped();
	return 1;
}

sub fault_step
{
	my ($ending) = @_;
	my $now = time();
	# continue what is due, whatever else happens
	for my $pid (keys %stopped)
	{
		if ($ending || $now >= $stopped{$pid}) { kill 'CONT', $pid; delete $stopped{$pid}; write_stopped(); }
	}
	if ($fault)
	{
		if ($fault->{sched})
		{
			$sched->step unless $ending;
			$sched->finish if $ending;
			return if $sched->busy;
		}
		return if $now < $fault->{until} && !$ending;
		if ($fault->{kind} eq 'listener' && !$ending)
		{
			my $p = listener_pid();
			if (!defined $p || $p == $fault->{pid})
			{
				violation('listener', "no new listener 30 s after terminating $fault->{pid}")
				  if $now - $fault->{at} > 30 && !$fault->{reported}++;
				return;
			}
		}
		$quiet_since = $now + $SETTLE_S if $fault->{wake};
		$next_fault = $now + $fault->{gap};
		$fault = undef;
		return;
	}
	return if $ending || !%fault_on || $now < $next_fault;
	# every fault draws the same five numbers, whatever happens to it
	my $kind = $frng->pick(sort keys %fault_on);
	my $dur = $frng->between(0.3, $STOP_MAX_S);
	my $ms = int(1000 * $frng->between(0.2, 1.5));
	my $frac = $frng->float;
	my $gap = $frng->between(3, 15);
	$faults{$kind}++;
	# stopping a holder or the watchdog does not touch wake-ups: the
	# windows of the lost wake-up check go on through them
	# (nor do the schedules' rounds, on names of their own; but while a
	# release meets -READONLY every other write is refused too)
	my $wake = $kind =~ /^(listener|pubsub|pause|restart|release-error)$/ ? 1 : 0;
	$fault = { kind => $kind, at => $now, until => $now, wake => $wake, gap => $gap };
	note("fault: $kind" . ($kind =~ /^stop/ ? sprintf(' for %.1f s', $dur) : $kind eq 'pause' ? " for $ms ms" : ''));
	$quiet_since = 9e9 if $wake;
	if ($kind eq 'reentry' || $kind eq 'release-error')
	{
		$fault->{sched} = 1;
		note("round: " . $sched->start($kind, $srng, %ROUND_FIX));
	}
	elsif ($kind eq 'listener')
	{
		my $p = listener_pid();
		if (!$p) { $faults{$kind}--; $faults{'listener(not running)'}++; $fault->{until} = $now; $fault->{pid} = -1; return; }
		$fault->{pid} = $p;
		eval { obs()->query("SELECT pg_terminate_backend($p)") };
	}
	elsif ($kind eq 'pubsub') { eval { lcmd('CLIENT', 'KILL', 'TYPE', 'pubsub') }; }
	elsif ($kind eq 'pause')
	{
		eval { lcmd('CLIENT', 'PAUSE', $ms) };
		$fault->{until} = $now + $ms / 1000;
	}
	elsif ($kind eq 'stop-holder')
	{
		my @h = grep { $_->{state} eq 'hold' && $_->{s} } @W;
		if (!@h) { $faults{$kind}--; $faults{"$kind(nobody held)"}++; $fault->{wake} = 0; return; }
		my $w = $h[ int($frac * @h) ];
		stop_pid($w->{pid}, $dur);
		$fault->{until} = $now + $dur;
	}
	elsif ($kind eq 'stop-listener')
	{
		$dur = 8;
		stop_pid(listener_pid(), $dur);
		$fault->{until} = $now + $dur;
	}
	elsif ($kind eq 'force-release')
	{
		my @h = grep { $_->{state} eq 'hold' && $_->{op}{hold}{kind} eq 'excl' } @W;
		if (!@h) { $faults{$kind}--; $faults{"$kind(nobody held)"}++; $fault->{wake} = 0; return; }
		my $w = $h[ int($frac * @h) ];
		eval { obs()->query('SELECT redis_lock_force_release(' . lit($w->{op}{hold}{names}[0]) . ')') };
	}
	elsif ($kind eq 'stop-watchdog')
	{
		stop_pid(watchdog_pid(), $dur);
		$fault->{until} = $now + $dur;
	}
	elsif ($kind eq 'restart')
	{
		$lr->close if $lr;
		$lr = undef;
		$redis->restart;    # SIGTERM (AOF, appendfsync always), start, PING
	}
}

# --- lost wake-ups -----------------------------------------------------------------------------------
# A waiter is judged when its resource was seen free at every sample (every
# 0.25 s), nobody we drive acquired it meanwhile, the listener ran (the same
# pid) with a subscriber connection in Redis, and no fault touching
# wake-ups happened (plus $SETTLE_S), for more than $WAKE_BOUND_S.
my $SAMPLE_LUA = <<'LUA';
local r = {}
for i = 1, 4 do r[#r + 1] = redis.call('exists', KEYS[i]) end
r[#r + 1] = redis.call('lindex', KEYS[5], 0) or ''
r[#r + 1] = redis.call('hget', KEYS[6], 'mode') or ''
r[#r + 1] = redis.call('exists', KEYS[7])
r[#r + 1] = redis.call('get', KEYS[8]) or '0'
r[#r + 1] = redis.call('get', KEYS[9]) or '0'
r[#r + 1] = redis.call('exists', KEYS[10])
return r
LUA
my %free_since;    # resource key => time it has been free since (continuously)
my $listener_seen = [ undef, 0 ];    # pid, since
my $next_sample = 0;
my %judged;        # worker op => 1
my %cover;         # samples, max: see below

sub sample_wakeups
{
	my $now = time();
	return if $now < $next_sample;
	$next_sample = $now + 0.25;
	my @wait = grep { $_->{state} eq 'acq' && $_->{s} && $_->{op}{hold} } @W;
	my $lp = listener_pid();
	if (!defined $lp || !defined $listener_seen->[0] || $lp != $listener_seen->[0]) { $listener_seen = [ $lp, $now ]; }
	my ($v, $subs);
	eval {
		$v = lcmd('EVAL', $SAMPLE_LUA, 10, @EXCL, $FAIR, FakeRedisson::queue_key($FAIR), $RW,
			"redislock_rwlock_writer:{$RW}", $SEM, $PMT, $LATCH);
		my $cl = lcmd('CLIENT', 'LIST', 'TYPE', 'pubsub');
		$subs = scalar grep { /\bsub=[1-9]/ || /\bssub=[1-9]/ } split /\n/, $cl;
	};
	my %free;
	if ($v && $subs && defined $lp)
	{
		my ($l1, $l2, $l3, $f, $qhead, $mode, $mark, $sem, $pmt, $latch) = @$v;
		my %ex = ($EXCL[0] => $l1, $EXCL[1] => $l2, $EXCL[2] => $l3);
		$free{"lock:$_"} = !$ex{$_} for @EXCL;
		my $hw = $OWNER_TO_W{$qhead};
		$free{"lock:$FAIR"} = !$f && ($qhead eq '' || ($hw && $hw->{state} eq 'acq' && $hw->{op}{hold}{names}[0] eq $FAIR));
		$free{"write:$RW"} = $mode eq '';
		$free{"read:$RW"} = $mode eq '' || ($mode eq 'read' && !$mark);
		$free{"sem:$SEM"} = $sem >= 1;
		$free{"sem:$PMT"} = $pmt >= 1;
		$free{"latch:$LATCH"} = !$latch;
	}
	my @all = ((map { "lock:$_" } @EXCL, $FAIR), "write:$RW", "read:$RW", "sem:$SEM", "sem:$PMT", "latch:$LATCH");
	for my $key (@all)
	{
		if ($free{$key}) { $free_since{$key} //= $now; }
		else { delete $free_since{$key}; }
	}
	for my $w (@wait)
	{
		my $op = $w->{op};
		next if $judged{$op};
		my $h = $op->{hold};
		my @keys = $h->{kind} eq 'excl' ? map { "lock:$_" } @{ $h->{names} }
		  : $h->{kind} eq 'read' ? ("read:$RW") : $h->{kind} eq 'write' ? ("write:$RW")
		  : $h->{kind} eq 'latch' ? ("latch:$LATCH") : ("sem:$h->{names}[0]");
		my $since = $op->{t0};
		for my $key (@keys)
		{
			my $fs = $free_since{$key};
			$since = 9e9, last unless defined $fs;
			$since = $fs if $fs > $since;
			my ($nm) = $key =~ /^[a-z]+:(.*)$/;
			$since = $acq_at{$nm} if defined $acq_at{$nm} && $acq_at{$nm} > $since;
		}
		$since = $quiet_since if $quiet_since > $since;
		$since = $listener_seen->[1] if $listener_seen->[1] > $since;
		if ($now > $since)
		{
			# coverage: how often a waiter was seen with its resource free
			# and the listener up, and the longest such stretch
			$cover{samples}++;
			$cover{max} = $now - $since if $now - $since > ($cover{max} // 0);
		}
		next if $now - $since <= $WAKE_BOUND_S;
		next if $w->{s}->is_done;    # it did end: its result is read next step
		$judged{$op} = 1;
		$ops{'lost_wakeup'}++;
		violation('lost-wakeup', sprintf('%s %s (%s) waits since %.1fs; %s free, listener up and no fault for %.1fs',
				wid($w), $op->{label}, $op->{sql}, $now - $op->{t0}, join('+', @keys), $now - $since));
	}
}

# --- waiters' memory -----------------------------------------------------------------------------------
# pg_log_backend_memory_contexts(pid) of a waiter at 2 s into its wait and
# again at 10 s; the grand totals come from the server log.
my @mem;           # { w, op, pid, first_req, last_req, first, last }
my $log_off = 0;
my %mem_total;     # pid => [ [offset, total], ... ]
sub mem_step
{
	my $now = time();
	for my $w (@W)
	{
		next unless $w->{state} eq 'acq' && $w->{op}{hold} && $w->{s};
		my $op = $w->{op};
		my $el = $now - $op->{t0};
		if (!$op->{mem} && $el >= 2)
		{
			$op->{mem} = { pid => $w->{pid}, w => wid($w), label => $op->{label}, first_off => log_size() };
			eval { obs()->query("SELECT pg_log_backend_memory_contexts($w->{pid})") };
		}
		elsif ($op->{mem} && !$op->{mem}{last_off} && $el >= 10)
		{
			$op->{mem}{last_off} = log_size();
			eval { obs()->query("SELECT pg_log_backend_memory_contexts($w->{pid})") };
			push @mem, $op->{mem};
		}
	}
}
sub log_size { return -s $node->logfile // 0; }

sub read_mem_log
{
	open my $fh, '<', $node->logfile or return;
	seek($fh, $log_off, 0);
	while (my $line = <$fh>)
	{
		last unless $line =~ /\n$/;
		$log_off += length $line;
		push @{ $mem_total{$1} }, [ $log_off, $2 ]
		  if $line =~ /\[(\d+)\] .*Grand total: (\d+) bytes/;
	}
	close $fh;
}

sub mem_judge
{
	read_mem_log();
	my @ratios;
	for my $m (@mem)
	{
		my $t = $mem_total{ $m->{pid} } // [];
		my ($a) = grep { $_->[0] > $m->{first_off} } @$t;
		my ($b) = grep { $_->[0] > $m->{last_off} } @$t;
		next unless $a && $b && $b->[0] != $a->[0];
		my $ratio = $b->[1] / $a->[1];
		push @ratios, $ratio;
		violation('memory', sprintf('%s %s: memory %d -> %d bytes (x%.2f) between 2 s and 10 s of its wait',
				$m->{w}, $m->{label}, $a->[1], $b->[1], $ratio))
		  if $ratio > $MEM_RATIO && $b->[1] - $a->[1] > 1024 * 1024;
	}
	return @ratios;
}

# --- crash ------------------------------------------------------------------------------------------------
my $crash_off = 0;
sub crash_check
{
	open my $fh, '<', $node->logfile or return;
	seek($fh, $crash_off, 0);
	while (my $line = <$fh>)
	{
		last unless $line =~ /\n$/;
		$crash_off += length $line;
		if ($line =~ /of the ended session with PID (\d+)/)
		{
			# the worker gave back what a session held because it took
			# the session for ended: is that session one of ours, alive?
			my $pid = $1;
			my ($w) = grep { $_->{s} && $_->{pid} == $pid && $_->{state} !~ /^(term|down)$/ } @W;
			if ($w)
			{
				chomp $line;
				my @o = @{ $PID_OPS{$pid} // [] };
				violation('live-session', wid($w) . " is alive (state $w->{state}) but the worker said: $line; "
					  . 'the session ran ' . scalar(@o) . ' operation(s): ' . join(', ', @o[ ($#o > 4 ? $#o - 4 : 0) .. $#o ]));
			}
		}
		if ($line =~ /terminated by signal|TRAP:|PANIC:/)
		{
			chomp $line;
			my $ctx = '';
			if ($line =~ /server process \(PID (\d+)\)/ && $PID_OPS{$1})
			{
				my @o = @{ $PID_OPS{$1} };
				$ctx = '; the session ran ' . scalar(@o) . ' operation(s): ' . join(', ', @o[ ($#o > 4 ? $#o - 4 : 0) .. $#o ]);
			}
			my $next = <$fh>;
			if (defined $next && $next =~ /\n$/)
			{
				$crash_off += length $next;
				$ctx .= "; $1" if $next =~ /DETAIL:\s+(.*)$/;
			}
			violation('crash', $line . $ctx);
			$quiet_since = time() + 10;    # everything restarts: no wake-up judged meanwhile
		}
	}
	close $fh;
}

# --- the loop --------------------------------------------------------------------------------------------
my $END_AT = $T0 + $MINUTES * 60;
my $next_report = $T0 + 30;
my $next_crash = 0;
note("running until " . POSIX::strftime('%H:%M:%S', localtime($END_AT)));
while (time() < $END_AT)
{
	for my $w (@W)
	{
		eval { step_worker($w, 0); 1 } or do { my $e = $@; chomp $e; note("worker $w->{i}: $e (session reopened)"); reconnect($w); };
	}
	step_java($_, 0) for @J;
	fault_step(0);
	lull_step();
	sample_wakeups();
	$sched->two_holders(0);
	mem_step();
	if (time() >= $next_crash) { crash_check(); $next_crash = time() + 1; }
	if (time() >= $next_report)
	{
		$next_report = time() + 30;
		my $n = 0;
		$n += $ops{$_} for grep { !/:/ } keys %ops;
		note("$n operations, faults " . join(' ', map { "$_=$faults{$_}" } sort keys %faults)
			  . ", violations " . scalar(@viol));
	}
	sleep(0.005);
}

# --- the end: stop faults, end every hold, wait for everything to go ---------------------------------------
note('ending: faults off, every hold ended, every session closed');
fault_step(1);
cont_all();
# SQL workers: leave the critical section, cancel a wait, close the
# session (the server releases what it held); Redisson clients give back
# what they hold (a client that vanishes keeps RSemaphore permits for good)
for my $w (@W)
{
	exit_hold($w->{op}{hold}, wid($w)) if $w->{op} && $w->{op}{hold};
	eval { obs()->query("SELECT pg_cancel_backend($w->{pid})") } if $w->{state} eq 'acq' && $w->{s};
	my $s = delete $w->{s};
	$s->close if $s;
	$w->{state} = 'down';
}
for (1 .. 500)
{
	my $busy = 0;
	for my $j (@J) { next if $j->{state} eq 'idle'; $busy++; step_java($j, 1); }
	last unless $busy;
	sleep(0.02);
}
for my $j (@J)
{
	violation('hang', jid($j) . " could not give back its $j->{op}{kind} hold at the end") if $j->{state} ne 'idle';
}
$_->{c} && $_->{c}->conn->close for @J;

RedisLockTest::wait_until(60, 'no client backend left but the observer', sub {
	obs()->query("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()") == 0;
}) or violation('leftover', 'client backends still there 60 s after every session was closed');

# After a crash-restart the dead sessions' records are documented to go
# only lazily: semaphore owner records and expiring permits when they have
# expired and a redislock script next touches the pool, fair queue entries
# when they have timed out and the next fair attempt runs.  So after a
# crash (and only then) the pools are read and a fair attempt is made,
# once those have had time to expire; without a crash nothing touches
# Redis before the check, and anything left is left by redislock.
if ($viol_n{crash})
{
	note('a crash happened: waiting one lease, then touching the pools and the fair queue');
	sleep($WATCHDOG_S + 1);
	eval {
		obs()->query("SELECT redis_permit_available('$PMT'), redis_semaphore_available('$SEM')");
		my $t = RedisLockTest::Session->new($node);
		$t->query("SELECT redis_lock_acquire('$FAIR', '1 s', NULL, true) AND redis_lock_release('$FAIR')");
		$t->close;
	};
}
my $allowed = join('|', map { quotemeta } $SEM, $PMT, $LATCH, SoakSchedules::persistent_keys());
$allowed = qr/^(redisson_lock_token:\{.*\}|$allowed)$/;
my @left;
my $clean = RedisLockTest::wait_until(60, 'redis_locks empty and no lock-shaped key in Redis', sub {
	my $rows = obs()->query('SELECT count(*) FROM redis_locks');
	my $keys = lcmd('KEYS', '*');
	@left = grep { !/$allowed/ } @$keys;
	return $rows == 0 && !@left;
});
if (!$clean)
{
	my @rows = eval { obs()->rows('SELECT pid, name, kind, state FROM redis_locks') };
	violation('leftover', 'redis_locks: ' . join('; ', map { join(' ', map { $_ // '' } @$_) } @rows)) if @rows;
	violation('leftover', 'Redis keys left: ' . join(', ', map { my $t = eval { lcmd('TYPE', $_) } // '?'; "$_ ($t)" } @left[0 .. ($#left > 30 ? 30 : $#left)]))
	  if @left;
}
# pool sizes are what they were (a read also gives back expired permits:
# after the check above)
my $sem_av = eval { obs()->query("SELECT redis_semaphore_available('$SEM')") } // '?';
my $pmt_av = eval { obs()->query("SELECT redis_permit_available('$PMT')") } // '?';
violation('leftover', "semaphore $SEM has $sem_av permits available at the end, not $PERMITS") if $sem_av ne $PERMITS;
violation('leftover', "expiring-permit pool $PMT has $pmt_av available at the end, not $PERMITS") if $pmt_av ne $PERMITS;

my @ratios = mem_judge();
crash_check();
my $stats = eval { RedisLockTest::lock_stats(obs()) } // {};

# --- summary --------------------------------------------------------------------------------------------------
my $elapsed = time() - $T0;
say "\n=== soak summary (seed $SEED, " . sprintf('%.1f', $elapsed / 60) . " min)\n";
my $total = 0;
$total += $ops{$_} for grep { !/:/ } keys %ops;
say "operations started: $total\n";
for my $k (sort grep { !/:/ } keys %ops)
{
	my @ends = map { my ($how) = /^\Q$k\E:(.*)$/; "$how=$ops{$_}" } sort grep { /^\Q$k\E:/ } keys %ops;
	say sprintf("  %-20s %6d   %s\n", $k, $ops{$k}, join(' ', @ends));
}
say "lulls: $lulls of ${LULL_S} s\n";
say "faults injected: " . (join(' ', map { "$_=$faults{$_}" } sort keys %faults) || 'none') . "\n";
say "errors by SQLSTATE: " . (join(' ', map { "$_=$errs{$_}" } sort keys %errs) || 'none') . "\n";
say sprintf("waiter memory: %d long waits sampled, end/start ratio max %.3f\n", scalar(@ratios),
  (sort { $b <=> $a } @ratios, 0)[0]);
say "redis_lock_stats: " . join(' ', map { "$_=" . ($stats->{$_} // '') } sort keys %$stats) . "\n";
say sprintf("lost wake-up check: %d waiter samples with the resource free and the listener up, longest %.2f s (bound %d s)\n",
	$cover{samples} // 0, $cover{max} // 0, $WAKE_BOUND_S);
say "schedule rounds: " . (join(' ', map { "$_=$sched_n{$_}" } sort keys %sched_n) || 'none') . "\n";
say "critical sections entered: " . join(' ', map { "$_=$sections{$_}" } sort keys %sections) . "\n";
say "violations: " . scalar(@viol) . (%viol_n ? ' (' . join(' ', map { "$_=$viol_n{$_}" } sort keys %viol_n) . ')' : '') . "\n";
my $shown = 0;
for my $v (@viol)
{
	last if ++$shown > 60;
	say "  $v->[0] [$v->[1]] $v->[2]\n";
}
say "  ... and " . (@viol - 60) . " more\n" if @viol > 60;
say "soak-driver: " . scalar(@viol) . " violations\n";
$node->stop('fast') if @viol == 0;
exit(@viol ? 1 : 0);
