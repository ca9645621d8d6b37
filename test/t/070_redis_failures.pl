# 070_redis_failures.pl — Redis down, restarted, script cache flushed, wrong
# password, wrong key type, paused: every call ends with a clear ERROR within
# its bounds, the next call after recovery works, and no lock is left held in
# Redis that SQL reported as not taken.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $T = 60;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('failures', $redis,
	'redislock.connect_timeout' => '1s',
	'redislock.command_timeout' => '500ms',
	'redislock.fair_wait_timeout' => '120s');
my $port = $redis->port;
my $rc;
sub rc { $rc //= FakeRedisson::Conn->new(port => $port); $rc }
sub reset_rc { $rc->close if $rc; undef $rc; }


# Runs $sql in $s asynchronously and returns (value, err, state), failing the
# test (instead of hanging) when it does not end within $T seconds.
sub bounded
{
	my ($s, $sql, $desc) = @_;
	$s->start($sql);
	my ($v, $err, $st) = $s->finish($T);
	if (defined $st && $st eq 'TIMEOUT')
	{
		fail("$desc: still running after ${T}s (hang)");
		$s->cancel($T);
	}
	return ($v, $err, $st);
}

my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $a_id = $a->query('SELECT redis_lock_owner_id()');

is($a->query("SELECT redis_lock_acquire('f:warm', '0', '10 min')"), 't', 'warm-up acquire');
is($a->query("SELECT redis_lock_release('f:warm')"), 't', 'warm-up release');

# --- 1. Redis stopped: clear error, bounded -------------------------------------------
$redis->stop;
reset_rc();
for my $sql ("SELECT redis_lock_acquire('f:down', '0', '10 min')",
	"SELECT redis_lock_acquire('f:down')",
	"SELECT redis_lock_acquire('f:down', '5 min', '10 min', true)",
	"SELECT redis_lock_status('f:down')",
	"SELECT redis_lock_force_release('f:down')")
{
	my ($v, $err, $st) = bounded($a, $sql, 'redis down');
	isnt($st, 'TIMEOUT', "redis down: [$sql] returns");
	ok(defined $st && $st ne '00000', "redis down: [$sql] is an ERROR (SQLSTATE "
		  . ($st // 'none') . ')');
	like($err // '', qr/127\.0\.0\.1:$port|localhost:$port/,
		"redis down: [$sql] error names the server") or diag($err);
}
is($a->query('SELECT 1'), 1, 'session still usable after the errors');
my ($fresh_v, $fresh_err, $fresh_st) =
  bounded(RedisLockTest::Session->new($node), "SELECT redis_lock_acquire('f:down', '0')",
	'fresh session, redis down');
like($fresh_err // '', qr/$port/, 'a fresh session gets the same clear error') or diag($fresh_err);

# --- 2. Redis back: next call works (reconnect) -----------------------------------------
$redis->start;
is($a->query("SELECT redis_lock_acquire('f:down', '0', '10 min')"), 't',
	'after restart the next acquire works');
is(rc()->cmd('HGET', 'f:down', $a_id), '1', 'and is in Redis');
is($a->query("SELECT redis_lock_release('f:down')"), 't', 'release works');

# --- 3. Redis restarted between two calls: the next call works -------------------
# Both connections of a session (commands, and the subscriber a wait opens)
# were open before the restart and are dead after it; the first call after
# the restart must reconnect rather than fail on the stale connection.
{
	my $h = RedisLockTest::Session->new($node);
	my $s = RedisLockTest::Session->new($node);
	is($h->query("SELECT redis_lock_acquire('f:sub', '0', '10 min')"), 't', 'H holds f:sub');
	is($s->query("SELECT redis_lock_acquire('f:sub', '100ms')"), 'f',
		'S waited once (its subscriber connection is open)');
	is($h->query("SELECT redis_lock_release('f:sub')"), 't', 'H releases');
	$redis->restart;
	reset_rc();
	my ($v, $err, $st) = $s->try("SELECT redis_lock_acquire('f:r3', '0', '10 min')");
	is($v, 't', 'first call after a restart between calls works (command connection)')
	  or diag("err=" . ($err // '') . " state=" . ($st // ''));
	($v, $err, $st) = $h->try("SELECT redis_lock_acquire('f:r4', '0', '10 min')");
	is($v, 't', 'same for a second session') or diag("err=" . ($err // '') . " state=" . ($st // ''));
	# S's command connection is fresh now; its subscriber connection is not
	$h->try("SELECT redis_lock_acquire('f:r3b', '0', '10 min')");
	($v, $err, $st) = $s->try("SELECT redis_lock_acquire('f:r3b', '200ms')");
	is($v, 'f', 'first wait after the restart works (subscriber connection)')
	  or diag("err=" . ($err // '') . " state=" . ($st // ''));
	$_->try('SELECT redis_lock_release_all()') for $h, $s;
	$h->close;
	$s->close;
}

# --- 3b. Redis restarted under a waiter: the waiter does not hang ----------------
{
	my $a3 = RedisLockTest::Session->new($node);
	my $b3 = RedisLockTest::Session->new($node);
	is($a3->query("SELECT redis_lock_acquire('f:rw', '0', '10 min')"), 't', 'A holds f:rw');
	$b3->start("SELECT redis_lock_acquire('f:rw', NULL, '10 min')");
	waits_ok($b3, 'B');
	$redis->restart;    # no persistence: the lock is gone with the restart
	reset_rc();
	my ($v, $err, $st) = $b3->finish($T);
	ok(($v // '') eq 't' || (defined $st && $st ne 'TIMEOUT'),
		'waiter returns after a Redis restart (lock or error), does not hang')
	  or diag("v=" . ($v // 'undef') . " err=" . ($err // '') . " st=" . ($st // ''));
	if (defined $st && $st ne 'TIMEOUT')
	{
		like($err, qr/$port/, 'waiter error names the server') or diag($err);
	}
	elsif (($v // '') eq 't')
	{
		is(rc()->cmd('HGET', 'f:rw', $b3->query('SELECT redis_lock_owner_id()')), '1',
			'waiter holds f:rw in the new Redis');
	}
	$b3->cancel($T) if defined $st && $st eq 'TIMEOUT';
	$b3->try('SELECT redis_lock_release_all()');
	$a3->try('SELECT redis_lock_release_all()');
	# the waiter can wait again right away
	is($a3->query("SELECT redis_lock_acquire('f:rw2', '0', '10 min')"), 't',
		'A works after the restart');
	($v, $err, $st) = $b3->try("SELECT redis_lock_acquire('f:rw2', '200ms')");
	is($v, 'f', 'the former waiter can wait again after the restart')
	  or diag("err=" . ($err // '') . " state=" . ($st // ''));
	is($a3->query("SELECT redis_lock_release('f:rw2')"), 't', 'A releases');
	$a3->close;
	$b3->close;
}

# --- 4. SCRIPT FLUSH between calls: NOSCRIPT is reloaded invisibly -------------------
# (fresh sessions from here on: A and B had connections open across the restarts)
$_->close for $a, $b;
$a = RedisLockTest::Session->new($node);
$b = RedisLockTest::Session->new($node);
$a_id = $a->query('SELECT redis_lock_owner_id()');
{
	my @calls = (
		[ "SELECT redis_lock_acquire('f:flush', '0', '10 min')", 't' ],
		[ "SELECT redis_lock_acquire('f:flush', '0', '10 min')", 't' ],
		[ "SELECT hold_count FROM redis_lock_status('f:flush')", '2' ],
		[ "SELECT redis_lock_release('f:flush')", 't' ],
		[ "SELECT redis_lock_release('f:flush')", 't' ],
		[ "SELECT redis_lock_acquire('f:flushq', '0', '10 min', true)", 't' ],
		[ "SELECT redis_lock_force_release('f:flushq')", 't' ],
	);
	for my $c (@calls)
	{
		is(rc()->cmd('SCRIPT', 'FLUSH'), 'OK', 'SCRIPT FLUSH');
		my ($v, $err, $st) = $a->try($c->[0]);
		is($v, $c->[1], "after SCRIPT FLUSH: $c->[0]") or diag("err=$err st=$st");
	}
	is(rc()->cmd('EXISTS', 'f:flush'), 0, 'f:flush released');

	# a waiter whose retry meets an empty script cache (fresh sessions: no
	# connection left over from the restarts above)
	my $a4 = RedisLockTest::Session->new($node);
	my $b4 = RedisLockTest::Session->new($node);
	is($a4->query("SELECT redis_lock_acquire('f:flushw', '0', '10 min')"), 't', 'A holds f:flushw');
	$b4->start("SELECT redis_lock_acquire('f:flushw', NULL, '10 min')");
	waits_ok($b4, 'B');
	rc()->cmd('SCRIPT', 'FLUSH');
	is($a4->query("SELECT redis_lock_release('f:flushw')"), 't', 'A releases after a flush');
	my ($v, $err) = $b4->finish($T);
	is($v, 't', 'the waiter retries through NOSCRIPT and gets the lock') or diag($err);
	is($b4->query("SELECT redis_lock_release('f:flushw')"), 't', 'B releases');
	$a4->close;
	$b4->close;
}

# --- 5. wrong type at the key ---------------------------------------------------------
{
	rc()->cmd('SET', 'f:str', 'not a lock');
	my ($v, $err, $st) = $a->try("SELECT redis_lock_acquire('f:str', '0', '10 min')");
	ok(defined $st, 'acquire on a string key is an ERROR');
	like($err // '', qr/WRONGTYPE|wrong.*type/i, 'error says wrong type') or diag($err);
	is(rc()->cmd('GET', 'f:str'), 'not a lock', 'the string key is untouched');
	($v, $err, $st) = $a->try("SELECT redis_lock_force_release('f:str')");
	ok(defined $st, 'force release of a non-lock key is an ERROR');
	is(rc()->cmd('GET', 'f:str'), 'not a lock', '... and does not delete it');
}

# --- 6. Redis paused (SIGSTOP): command_timeout bounds the call --------------------
{
	my $name = 'f:paused';
	$redis->pause;
	my ($v, $err, $st) = bounded($a, "SELECT redis_lock_acquire('$name', '0', '10 min')",
		'redis paused');
	isnt($st, 'TIMEOUT', 'acquire against a paused Redis returns');
	ok(defined $st && $st ne '00000', 'it is an ERROR (SQLSTATE ' . ($st // 'none') . ')')
	  or diag("v=" . ($v // 'undef'));
	like($err // '', qr/$port/, 'error names the server') or diag($err);
	($v, $err, $st) = bounded($b, "SELECT redis_lock_acquire('$name')", 'redis paused, NULL wait');
	ok(defined $st && $st ne 'TIMEOUT', 'a NULL-wait acquire against a paused Redis errors too')
	  or diag("v=" . ($v // 'undef') . " st=" . ($st // ''));
	$redis->resume;
	reset_rc();

	# the commands may still have reached Redis and run after the resume; the
	# extension must not leave those holds behind.  Let the sessions talk to
	# Redis again, then another session must be able to take the lock (10 min
	# lease: only a cleanup by the extension explains it being free).
	is($a->query("SELECT redis_lock_acquire('f:other', '0', '10 min')"), 't',
		'A works after the resume');
	is($a->query("SELECT redis_lock_release('f:other')"), 't', 'A releases f:other');
	is($b->query("SELECT redis_lock_acquire('f:other', '0', '10 min')"), 't',
		'B works after the resume');
	is($b->query("SELECT redis_lock_release('f:other')"), 't', 'B releases f:other');
	is($a->query("SELECT held_by_me FROM redis_lock_status('$name')"), 'f',
		'A does not hold the lock it was told it did not get');
	until_ok("no stale hold on $name left in Redis",
		sub { rc()->cmd('EXISTS', $name) == 0 });
	my $c = RedisLockTest::Session->new($node);
	is($c->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't',
		'a third session can take the lock');
	is($c->query("SELECT redis_lock_release('$name')"), 't', 'and release it');
	$c->close;
}

# --- 7. Redis paused with CLIENT PAUSE (socket alive, commands queued) -------------
{
	my $name = 'f:cpause';
	my $ctl = FakeRedisson::Conn->new(port => $port);
	$ctl->cmd('CLIENT', 'PAUSE', 3000, 'ALL');
	my ($v, $err, $st) = bounded($a,
		"SELECT redis_lock_acquire('$name', '0', '10 min', true)", 'client pause');
	ok(defined $st && $st ne 'TIMEOUT', 'fair acquire during CLIENT PAUSE errors')
	  or diag("v=" . ($v // 'undef'));
	like($err // '', qr/$port/, 'error names the server') or diag($err);
	until_ok('Redis answers again after the pause', sub {
		my $c = FakeRedisson::Conn->new(port => $port, timeout => 1);
		my $r = eval { $c->cmd('PING') };
		$c->close;
		return ($r // '') eq 'PONG';
	});
	$ctl->close;
	reset_rc();
	is($a->query("SELECT redis_lock_acquire('f:other2', '0', '10 min')"), 't', 'A works');
	is($a->query("SELECT redis_lock_release('f:other2')"), 't', 'A releases');
	until_ok("no stale hold or queue entry on $name",
		sub {
			rc()->cmd('EXISTS', $name) == 0
			  && fair_queue_len(rc(), $name) == 0
		});
}

# --- 8. wrong password ---------------------------------------------------------------
{
	my $rp = RedisLockTest::Redis->new(requirepass => 's3cret');
	my $url = $rp->url;
	my $s = RedisLockTest::Session->new($node);
	$s->query("SET redislock.url = '$url'");
	$s->query("SET redislock.password = 'pw-Xq7-not-it'");
	my ($v, $err, $st) = bounded($s, "SELECT redis_lock_acquire('f:pw', '0', '10 min')", 'wrong pw');
	ok(defined $st && $st ne 'TIMEOUT', 'wrong password: ERROR') or diag("v=" . ($v // 'undef'));
	like($err // '', qr/WRONGPASS|invalid.*password|auth/i, 'error says authentication failed')
	  or diag($err);
	like($err // '', qr/${\ $rp->port}/, 'error names the server') or diag($err);
	unlike($err // '', qr/pw-Xq7-not-it/, 'error does not echo the password');
	$s->close;

	my $s2 = RedisLockTest::Session->new($node);
	$s2->query("SET redislock.url = '$url'");
	($v, $err, $st) = bounded($s2, "SELECT redis_lock_acquire('f:pw', '0', '10 min')", 'no pw');
	ok(defined $st && $st ne 'TIMEOUT', 'no password against requirepass: ERROR');
	like($err // '', qr/NOAUTH|auth/i, 'error says authentication is required') or diag($err);
	$s2->close;

	my $s3 = RedisLockTest::Session->new($node);
	$s3->query("SET redislock.url = '$url'");
	$s3->query("SET redislock.password = 's3cret'");
	is($s3->query("SELECT redis_lock_acquire('f:pw', '0', '10 min')"), 't',
		'right password works');
	is($rp->cli('EXISTS', 'f:pw'), '1', 'lock is in the password-protected Redis');
	is($s3->query("SELECT redis_lock_release('f:pw')"), 't', 'release');
	$s3->close;
}

$a->close;
$b->close;
done_testing();
