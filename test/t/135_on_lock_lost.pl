# 135_on_lock_lost.pl — redislock.on_lock_lost: what happens to a session
# the moment the watchdog finds one of its holds gone.  Every mode (warn,
# cancel, terminate) against every way to lose a lock (its lease running out
# under a paused watchdog, a force-unlock by a Redisson client, a Redis
# restart without persistence), while the holder runs a long statement that
# is none of redislock's code:
#   warn       the statement runs on; the lock shows 'lost'; COMMIT of its
#              writing transaction is refused (55P03), as before;
#   cancel     the statement ends at once with 57014 and a message naming
#              the lock; the session goes on; a later cancel by the user is
#              reported as the user's;
#   terminate  the session ends at once with 57P01 naming the lock.
# Every kind of hold the watchdog renews (lock, read and write lock,
# semaphore, expiring permit) is named in the cancel.  An idle session in
# cancel mode is not disturbed (its COMMIT is refused); one in terminate
# mode is ended.  Also: a session in cancel mode next to the one that lost
# its lock is left alone; the setting applies when changed after the lock
# was taken; a bad value is refused; an ordinary role may set it; the commit
# guard, finding the loss itself, ends a session in terminate mode.
#
# The Redisson client that force-unlocks is the real one (RealRedisson:
# test/redisson-java's driver, the newest version in @RealRedisson::VERSIONS,
# as in 405); a missing driver fails the test.  Its connections survive the
# Redis restarts: Redisson reconnects by itself.
# Takes about 15 s (PostgreSQL 15, one node, one Redis, one JVM: 2 s of them
# its start).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;    # only its Redis connection, which redis_cmd uses
use Test::More;

my $redis = RedisLockTest::Redis->new;
my ($JAVA_VERSION) = reverse RealRedisson::versions();
my $java  = RealRedisson->new(version => $JAVA_VERSION, port => $redis->port);
# verbose: the server log shows each error's SQLSTATE, which a client loses
# with a FATAL (DBD::Pg then reports the lost connection, 08000)
my $node  = RedisLockTest::node('onlost', $redis, log_error_verbosity => 'verbose');
my $obs   = RedisLockTest::observer($node);
my $gate  = RedisLockTest::Session->new($node);    # holds advisory lock 42
$obs->query('CREATE TABLE t (v int)');
$obs->query('CREATE ROLE plain LOGIN');
$obs->query('GRANT ALL ON t TO plain');

sub key_exists { redis_cmd($redis, 'EXISTS', $_[0]) }
sub state_of
{
	my ($name) = @_;
	return $obs->query("SELECT string_agg(state, ',') FROM redis_locks WHERE name = '$name'");
}
sub rows_with { $obs->query("SELECT count(*) FROM t WHERE v = $_[0]") }

# The holder runs its long statement: pg_stat_activity shows it waiting there.
sub running_ok
{
	my ($s, $event, $what) = @_;
	until_ok("$what: the statement runs (wait_event $event)", sub {
		($obs->query('SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $s->pid) // '') eq $event });
}

# The three ways to lose a lock; each returns once Redis no longer has it.
my %lose = (
	expiry => sub {
		my ($name) = @_;
		my @pids = split /,/, RedisLockTest::watchdog_pids($obs);
		kill 'STOP', @pids;
		# Only Redis is looked at while the worker is stopped: it might be
		# stopped holding the registry's lock, which the views take.
		my $gone = RedisLockTest::wait_until($RedisLockTest::WAIT, "$name expired",
			sub { !key_exists($name) });
		kill 'CONT', @pids;
		return $gone;
	},
	force => sub {
		my ($name) = @_;
		return $java->run('admin', 'forceUnlock', 'plain', $name) eq 'true';
	},
	restart => sub {
		my ($name) = @_;
		$redis->restart_empty;
		return !key_exists($name);
	},
);

my $n = 0;
for my $way (qw(expiry force restart))
{
	for my $mode (qw(warn cancel terminate))
	{
		my $what = "$mode/$way";
		my $name = "oll:$mode:$way";
		my $v    = ++$n;
		my $a    = RedisLockTest::Session->new($node);
		my $pid  = $a->pid;
		$a->query("SET redislock.watchdog_timeout = '1s'");
		# cancel is set after the lock was taken: the new value applies to it
		$a->query("SET redislock.on_lock_lost = $mode") unless $mode eq 'cancel';
		is($a->query("SELECT redis_lock_acquire('$name')"), 't', "$what: A holds $name");
		$a->query('SET redislock.on_lock_lost = cancel') if $mode eq 'cancel';
		$a->query("BEGIN; INSERT INTO t VALUES ($v)");

		# a bystander in cancel mode, holding another lock, runs a long statement too
		my $b = RedisLockTest::Session->new($node);
		$b->query("SET redislock.watchdog_timeout = '1s'; SET redislock.on_lock_lost = cancel");
		is($b->query("SELECT redis_lock_acquire('$name:other', '0', '10 min')"), 't',
			"$what: B holds $name:other (fixed lease: survives the restart)");
		$b->start('SELECT pg_sleep(600)');
		running_ok($b, 'PgSleep', "$what: B");

		if ($mode eq 'warn')
		{
			$gate->query('SELECT pg_advisory_lock(42)');
			$a->start('SELECT pg_advisory_xact_lock(42)');
			running_ok($a, 'advisory', $what);
		}
		else
		{
			$a->start('SELECT pg_sleep(600)');
			running_ok($a, 'PgSleep', $what);
		}
		ok($lose{$way}->($name), "$what: Redis no longer has $name");

		if ($mode eq 'warn')
		{
			until_ok("$what: $name shows 'lost'", sub { (state_of($name) // '') eq 'lost' });
			ok(!$a->is_done, "$what: A's statement runs on");
			$gate->query('SELECT pg_advisory_unlock(42)');
			my (undef, $err) = $a->finish($RedisLockTest::WAIT);
			is($err, undef, "$what: it ends normally once the test lets it");
			(undef, $err, my $st) = $a->try('COMMIT');
			is($st, '55P03', "$what: COMMIT is refused (55P03)") or diag($err);
			like($err // '', qr/"\Q$name\E" was lost before COMMIT/, "$what: ... naming the lock");
		}
		elsif ($mode eq 'cancel')
		{
			my (undef, $err, $st) = $a->finish($RedisLockTest::WAIT);
			is($st, '57014', "$what: A's statement is cancelled (57014)") or diag($err);
			told_like($node, $err, $pid, qr/canceling statement because Redis lock "\Q$name\E" was lost/,
				"$what: ... with a message naming the lock");
			told_like($node, $err, $pid, qr/redislock\.on_lock_lost is "cancel"/, "$what: ... and the setting");
			note("what the client sees: $err");
			$a->try('ROLLBACK');
			is($a->query('SELECT 1'), 1, "$what: A goes on");
			is(state_of($name), 'lost', "$what: $name shows 'lost'");
			$a->start('SELECT pg_sleep(600)');
			running_ok($a, 'PgSleep', "$what: A again");
			(undef, $err) = $a->cancel($RedisLockTest::WAIT);
			told_like($node, $err, $pid, qr/canceling statement due to user request/,
				"$what: a later cancel by the user is reported as the user's");
		}
		else
		{
			my (undef, $err) = $a->finish($RedisLockTest::WAIT);
			like($err // '', qr/FATAL:  terminating connection because Redis lock "\Q$name\E" was lost/,
				"$what: A is terminated, with a message naming the lock");
			note("what the client sees: $err");
			until_ok("$what: ... SQLSTATE 57P01 (server log)", sub {
				slurp($node->logfile) =~ /\[$pid\] .*FATAL:  57P01: terminating connection because Redis lock "\Q$name\E" was lost/ });
			until_ok("$what: A's backend is gone", sub {
				!defined $obs->query("SELECT 1 FROM pg_stat_activity WHERE pid = $pid") });
			until_ok("$what: ... and so are its rows in redis_locks", sub {
				$obs->query("SELECT count(*) FROM redis_locks WHERE pid = $pid") == 0 });
		}
		is(rows_with($v), 0, "$what: A's write was not committed");
		until_ok("$what: server log names the lock and PID", sub {
			slurp($node->logfile) =~ /Redis lock "\Q$name\E" held by the session with PID $pid was lost/ });

		ok(!$b->is_done, "$what: B, in cancel mode but holding another lock, runs on");
		my (undef, $berr) = $b->cancel($RedisLockTest::WAIT);
		told_like($node, $berr, $b->pid, qr/canceling statement due to user request/, "$what: ... until the user cancels it");
		$b->try("SELECT redis_lock_release('$name:other')");
		$b->close;
		$a->close;
	}
}

# --- every kind of hold the watchdog renews: cancel names what was lost ----------------
for my $kind (
	[ 'Redis lock',             'k:lock',  "SELECT redis_lock_acquire('k:lock')",
		sub { redis_cmd($redis, 'DEL', 'k:lock') } ],
	[ 'Redis read lock',        'k:read',  "SELECT redis_read_lock_acquire('k:read')",
		sub { redis_cmd($redis, 'DEL', 'k:read') } ],
	[ 'Redis write lock',       'k:write', "SELECT redis_write_lock_acquire('k:write')",
		sub { redis_cmd($redis, 'DEL', 'k:write') } ],
	[ 'Redis semaphore',        'k:sem',
		"SELECT redis_semaphore_try_set_permits('k:sem', 3) AND redis_semaphore_acquire('k:sem')",
		sub { redis_cmd($redis, 'HDEL', 'redislock_semaphore_holders:{k:sem}', $_[0]{owner}) } ],
	[ 'Redis semaphore permit', 'k:pes',
		"SELECT redis_permit_try_set_permits('k:pes', 3) AND redis_permit_acquire('k:pes') IS NOT NULL",
		sub { redis_cmd($redis, 'DEL', '{k:pes}:timeout') } ])
{
	my ($noun, $name, $take, $lose) = @$kind;
	my $what = "cancel/$noun";
	my $s = RedisLockTest::Session->new($node);
	$s->query("SET redislock.watchdog_timeout = '1s'; SET redislock.on_lock_lost = cancel");
	my $owner = $s->query('SELECT redis_lock_owner_id()');
	is($s->query($take), 't', "$what: holds $name");
	$s->start('SELECT pg_sleep(600)');
	running_ok($s, 'PgSleep', $what);
	is($lose->({ owner => $owner }), 1, "$what: its hold removed from Redis");
	my (undef, $err, $st) = $s->finish($RedisLockTest::WAIT);
	is($st, '57014', "$what: the statement is cancelled (57014)") or diag($err);
	told_like($node, $err, $s->pid, qr/canceling statement because \Q$noun\E "\Q$name\E" was lost/,
		"$what: ... naming it");
	$s->close;
}

# --- idle sessions: cancel has nothing to cancel, terminate ends the session -------------
{
	my $c = RedisLockTest::Session->new($node);    # cancel, idle in a transaction
	my $k = RedisLockTest::Session->new($node);    # terminate, idle
	my ($cpid, $kpid) = ($c->pid, $k->pid);
	my $v = ++$n;
	for ([ $c, 'cancel' ], [ $k, 'terminate' ])
	{
		my ($s, $mode) = @$_;
		$s->query("SET redislock.watchdog_timeout = '1s'; SET redislock.on_lock_lost = $mode");
		is($s->query("SELECT redis_lock_acquire('oll:idle:$mode')"), 't', "idle/$mode: holds oll:idle:$mode");
	}
	$c->query("BEGIN; INSERT INTO t VALUES ($v)");
	is($java->run('admin', 'forceUnlock', 'plain', "oll:idle:$_"), 'true', "idle/$_: force-unlocked by Redisson")
	  for qw(cancel terminate);

	until_ok('idle/terminate: the idle session is ended', sub {
		!defined $obs->query("SELECT 1 FROM pg_stat_activity WHERE pid = $kpid") });
	until_ok('idle/terminate: ... 57P01 naming the lock (server log)', sub {
		slurp($node->logfile) =~ /\[$kpid\] .*FATAL:  57P01: terminating connection because Redis lock "oll:idle:terminate" was lost/ });
	my (undef, $err) = $k->try('SELECT 1');
	ok(defined $err, 'idle/terminate: its client finds the connection gone');

	until_ok("idle/cancel: oll:idle:cancel shows 'lost'", sub { (state_of('oll:idle:cancel') // '') eq 'lost' });
	until_ok('idle/cancel: the watchdog says it canceled (nothing ran)', sub {
		slurp($node->logfile) =~ /canceled the running statement, if any, of the session with PID $cpid,/ });
	is($c->query('SELECT 1'), 1, 'idle/cancel: the session, idle in its transaction, is not disturbed');
	(undef, $err, my $st) = $c->try('COMMIT');
	is($st, '55P03', 'idle/cancel: its COMMIT is refused (55P03)') or diag($err);
	is(rows_with($v), 0, 'idle/cancel: not committed');
	$c->start('SELECT pg_sleep(600)');
	running_ok($c, 'PgSleep', 'idle/cancel');
	(undef, $err) = $c->cancel($RedisLockTest::WAIT);
	told_like($node, $err, $cpid, qr/canceling statement due to user request/,
		"idle/cancel: a later statement's cancel is the user's");
	$c->try("SELECT redis_lock_release('oll:idle:cancel')");
	$c->close;
	$k->close;
}

# --- the setting itself -----------------------------------------------------------------
{
	my $s = RedisLockTest::Session->new($node);
	my (undef, $err, $st) = $s->try("SET redislock.on_lock_lost = 'abort'");
	is($st, '22023', 'a bad value is refused (22023)');
	like($err // '', qr/invalid value for parameter "redislock.on_lock_lost": "abort"/, '... naming it');
	like($err // '', qr/Available values: warn, cancel, terminate/, '... with the values allowed');
	is($s->query('SHOW redislock.on_lock_lost'), 'warn', 'warn by default, unchanged');
	$s->close;

	my $p = RedisLockTest::Session->new($node, user => 'plain');
	(undef, $err) = $p->try('SET redislock.on_lock_lost = terminate');
	is($err, undef, 'an ordinary role may choose for its own session');
	$p->close;
}

# --- the session finds the loss itself: the commit guard --------------------------------
for my $mode (qw(cancel terminate))
{
	my $name = "oll:guard:$mode";
	my $v    = ++$n;
	my $a    = RedisLockTest::Session->new($node);
	$a->query("SET redislock.on_lock_lost = $mode");
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't',
		"guard/$mode: A holds $name (fixed lease: no renewal finds the loss)");
	is(redis_cmd($redis, 'DEL', $name), 1, "guard/$mode: deleted behind its back");
	my $pid = $a->pid;
	my (undef, $err, $st) = $a->try("INSERT INTO t VALUES ($v)");
	like($err // '', qr/"\Q$name\E" was lost before COMMIT/, "guard/$mode: the COMMIT is refused, naming the lock");
	is(rows_with($v), 0, "guard/$mode: not committed");
	if ($mode eq 'terminate')
	{
		like($err // '', qr/FATAL:  Redis lock/, 'guard/terminate: as a FATAL error');
		ok(slurp($node->logfile) =~ /\[$pid\] .*FATAL:  55P03: Redis lock "\Q$name\E" was lost before COMMIT/,
			'guard/terminate: ... 55P03 (server log)');
		ok(!$a->dbh->ping, 'guard/terminate: the session has ended');
	}
	else
	{
		is($st, '55P03', 'guard/cancel: 55P03, as with warn');
		is($a->query('SELECT 1'), 1, 'guard/cancel: the session goes on');
		$a->try("SELECT redis_lock_release('$name')");
	}
	$a->close;
}

no_crash_ok($node, 'on_lock_lost');
done_testing();
