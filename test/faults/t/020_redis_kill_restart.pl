# 020_redis_kill_restart.pl — redis-server killed (-9) and restarted while
# sessions hold, wait for and take locks; once without persistence and once
# with AOF (appendfsync always).
#
# Proves, for both modes:
#   - every call made while Redis dies, is down and comes back either
#     succeeds or fails with a clear ERROR (SQLSTATE 08001/08006, message
#     naming the server), and none takes longer than
#     connect_timeout + command_timeout + slack (a hang bound, not a
#     performance threshold: the sum is what a call may legitimately use);
#   - a waiter blocked on a held lock when Redis dies ends (error or lock)
#     within the bound / after the restart, it is not pinned;
#   - after the restart everything works again, without reconnect by hand;
#   - without AOF the held locks are gone with the data and are reported:
#     the watchdog lock shows state 'lost' in redis_locks and lost_locks
#     grows; the commit guard refuses a writing COMMIT in the session whose
#     fixed-lease lock vanished (55P03); release says false;
#   - with AOF the locks survive the kill: still 'held', renewed, released OK;
#   - nothing leaks: at the end no lock key is left in Redis, redis_locks is
#     empty, no backend crashed.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../../lib", "$FindBin::RealBin/../../redisson";
use RedisLockTest;
use FakeRedisson;
use FaultLib qw(until_ok no_crash_ok stats);
use Test::More;
use Time::HiRes qw(time sleep);

# REDISLOCK_FAULT_TLS=1 (run.sh's second run): every Redis speaks only TLS.
my $tls = $ENV{REDISLOCK_FAULT_TLS} ? RedisLockTest::TLS->new : undef;
my @tls_conf = $tls ? ('redislock.tls_ca_file' => $tls->ca_file) : ();

my $CONNECT_T = 1.0;    # redislock.connect_timeout
my $COMMAND_T = 1.0;    # redislock.command_timeout
my $SLACK     = 2.5;    # scheduling on a loaded 2-core machine
my $BOUND     = $CONNECT_T + $COMMAND_T + $SLACK;
my $LOADERS   = 4;

sub keys_like
{
	my ($redis, $pat) = @_;
	my $c = FakeRedisson::Conn->new(port => $redis->port, $redis->tls_opts);
	my $r = $c->cmd('KEYS', $pat);
	$c->close;
	return @$r;
}

sub phase
{
	my ($aof) = @_;
	my $tag = $aof ? 'aof' : 'mem';
	my $redis = RedisLockTest::Redis->new(appendonly => $aof, ($tls ? (tls => $tls) : ()));
	my $node = RedisLockTest::node("kill_$tag", $redis, @tls_conf,
		'redislock.connect_timeout' => "${CONNECT_T}s",
		'redislock.command_timeout' => "${COMMAND_T}s",
		# longer than the outage, so that with AOF the lease outlives it
		'redislock.watchdog_timeout' => '10s');
	my $obs = RedisLockTest::observer($node);
	$obs->query('CREATE TABLE t (v int)');
	my $server = '127.0.0.1:' . $redis->port;

	my $h1 = RedisLockTest::Session->new($node);    # watchdog-mode lock
	my $h2 = RedisLockTest::Session->new($node);    # fixed lease
	my $wt = RedisLockTest::Session->new($node);    # waiter
	is($h1->query("SELECT redis_lock_acquire('rk:held')"), 't', "$tag: h1 holds rk:held (watchdog)");
	is($h2->query("SELECT redis_lock_acquire('rk:fixed', '0', '10 min')"), 't', "$tag: h2 holds rk:fixed (fixed lease)");
	$wt->start("SELECT redis_lock_acquire('rk:held', '40 s')");
	ok(RedisLockTest::wait_for_extension_wait($node, $wt->pid, 30), "$tag: waiter blocks on rk:held");
	my $wt_t0 = time();

	my @ld = map { { i => $_, s => RedisLockTest::Session->new($node), held => 0 } } 1 .. $LOADERS;
	my (@slow, @bad, %codes, $ok_calls, $err_calls);
	my $phase_name = 'before';
	my %per_phase;
	my $pump = sub {
		for my $l (@ld)
		{
			my $s = $l->{s};
			if ($l->{busy})
			{
				next unless $s->is_done;
				my ($v, $err, $code) = $s->finish(1);
				my $dt = time() - $l->{t0};
				push @slow, sprintf("%.2fs (bound %.1fs) [%s] %s", $dt, $BOUND, $code // 'ok', $l->{sql})
				  if $dt > $BOUND;
				if (defined $err)
				{
					$err_calls++;
					$per_phase{ $l->{phase} }{err}++;
					$s->try('ROLLBACK') if $l->{sql} =~ /^BEGIN/;
					$codes{$code}++;
					push @bad, "[$code] $err ($l->{sql})"
					  unless $code =~ /^(08001|08006)$/ && $err =~ /\Q$server\E/;
				}
				else
				{
					$ok_calls++;
					$per_phase{ $l->{phase} }{ok}++;
					$l->{held} = 1 if $l->{sql} =~ /_acquire/ && ($v // '') eq 't';
					$l->{held} = 0 if $l->{sql} =~ /release/;
				}
				$l->{busy} = 0;
			}
			my $r = rand();
			my $sql =
			    $l->{held} ? (rand() < 0.5 ? "SELECT redis_lock_release('rk:l$l->{i}')" : 'SELECT redis_lock_release_all()')
			  : $r < 0.6  ? "SELECT redis_lock_acquire('rk:l$l->{i}', '0', " . ($r < 0.3 ? "'20 s'" : 'NULL') . ')'
			  : $r < 0.8  ? "SELECT (redis_lock_status('rk:held')).locked"
			  :             "BEGIN; SELECT redis_xact_lock_acquire('rk:x$l->{i}', '0'); INSERT INTO t VALUES (1); COMMIT";
			$s->start($sql);
			@$l{qw(busy t0 sql phase)} = (1, time(), $sql, $phase_name);
		}
	};
	my $run_for = sub {
		my ($secs, $until) = @_;
		my $end = time() + $secs;
		while (time() < $end)
		{
			$pump->();
			last if $until && $until->();
			sleep(0.003);
		}
	};

	$run_for->(1.5);
	$phase_name = 'down';
	$redis->kill9;
	my $t_kill = time();
	my $wt_end;
	$run_for->(3, sub { $wt_end //= time() if $wt->is_done; 0 });
	$phase_name = 'back';
	$redis->start;
	my $t_up = time();
	# load keeps running until calls succeed again (bounded)
	my $before = $per_phase{back}{ok} // 0;
	$run_for->(30, sub { $wt_end //= time() if $wt->is_done; ($per_phase{back}{ok} // 0) >= $before + 20 });
	cmp_ok($per_phase{back}{ok} // 0, '>=', 20, sprintf("$tag: calls succeed again after restart (%.1fs)", time() - $t_up));
	$run_for->(1);
	# drain
	for my $l (@ld) { my ($v, $e, $c) = $l->{s}->finish(30) if $l->{busy}; $l->{busy} = 0; }

	diag("$tag: calls ok=" . ($ok_calls // 0) . " err=" . ($err_calls // 0)
		  . " codes: " . join(', ', map { "$_=$codes{$_}" } sort keys %codes)
		  . " per phase: " . join(', ', map { "$_ ok=" . ($per_phase{$_}{ok} // 0) . " err=" . ($per_phase{$_}{err} // 0) } sort keys %per_phase));
	cmp_ok($per_phase{down}{err} // 0, '>', 0, "$tag: calls failed while Redis was down");
	is($per_phase{down}{ok} // 0, 0, "$tag: no call started while Redis was down succeeded");
	ok(!@slow, "$tag: no call took longer than ${BOUND}s") or diag(join("\n", @slow));
	ok(!@bad, "$tag: every error is 08001/08006 naming $server") or diag(join("\n", @bad[0 .. ($#bad > 15 ? 15 : $#bad)]));

	# the waiter
	my ($wv, $werr, $wcode) = $wt->finish(45);
	$wt_end //= time();
	isnt($wcode // '', 'TIMEOUT', "$tag: waiter ended");
	diag(sprintf("$tag: waiter ended %.1fs after the kill: %s", $wt_end - $t_kill, $werr // "returned $wv"));
	if (defined $werr)
	{
		like($wcode, qr/^0800[16]$/, "$tag: waiter failed clearly ($wcode)");
		cmp_ok($wt_end - $t_kill, '<=', $BOUND + 3 + 1, "$tag: waiter was not pinned by the dead Redis");
	}
	elsif ($aof)
	{
		# still waiting for h1's lock, which survived: wait ran out ('f')
		is($wv, 'f', "$tag: waiter kept waiting for the surviving lock (wait ran out)");
	}
	else
	{
		is($wv, 't', "$tag: waiter got rk:held after the restart (the data was lost)");
		cmp_ok($wt_end, '<=', $t_up + $BOUND + 3, "$tag: ... promptly after the restart");
		$wt->query('SELECT redis_lock_release_all()');
	}

	if (!$aof)
	{
		until_ok(15, "$tag: h1's watchdog lock is reported lost", sub {
			($obs->query("SELECT state FROM redis_locks WHERE name = 'rk:held' AND pid = " . $h1->pid) // '') eq 'lost' });
		cmp_ok(stats($obs)->{lost_locks}, '>=', 1, "$tag: lost_locks counted");
		my ($v, $err, $code) = $h2->try('BEGIN; INSERT INTO t VALUES (2); COMMIT');
		is($code, '55P03', "$tag: commit guard refuses a write after rk:fixed vanished")
		  or diag("got: " . ($err // 'success'));
		$h2->try('ROLLBACK');
		($v, $err) = $h1->try("SELECT redis_lock_release('rk:held')");
		is($v, 'f', "$tag: release of the lost lock says false");
	}
	else
	{
		my $r0 = $obs->query("SELECT renewed_at FROM redis_locks WHERE name = 'rk:held' AND pid = " . $h1->pid);
		until_ok(15, "$tag: h1's lock survived the kill and is renewed again", sub {
			my $r = $obs->query("SELECT state || ' ' || renewed_at FROM redis_locks WHERE name = 'rk:held' AND pid = " . $h1->pid);
			defined $r && $r =~ /^held / && $r ne "held $r0" });
		is(stats($obs)->{lost_locks}, 0, "$tag: nothing reported lost");
		is($h2->try('BEGIN; INSERT INTO t VALUES (2); COMMIT'), undef, "$tag: commit guard lets the write through");
		is($h1->query("SELECT redis_lock_release('rk:held')"), 't', "$tag: h1 releases normally");
		is($h2->query("SELECT redis_lock_release('rk:fixed')"), 't', "$tag: h2 releases normally");
	}
	is($h1->query("SELECT redis_lock_acquire('rk:held', '0')"), 't', "$tag: the lock can be taken again");
	$h1->query('SELECT redis_lock_release_all()');

	$_->{s}->query('SELECT redis_lock_release_all()') for @ld;
	$_->{s}->close for @ld;
	$_->close for $h1, $h2, $wt;
	until_ok(30, "$tag: redis_locks empty", sub { $obs->query('SELECT count(*) FROM redis_locks') == 0 });
	until_ok(30, "$tag: no lock key left in Redis", sub {
		my @k = grep { !/^redisson_lock_token/ } keys_like($redis, 'rk:*');
		diag("left: @k") if @k && 0;
		!@k });
	no_crash_ok($node, $tag);
	$obs->close;
	$node->stop;
	$redis->stop;
}

phase(0);
phase(1);
done_testing();
