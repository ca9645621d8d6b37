# 050_redisson_compat.pl — SQL sessions and a Redisson client exclude each
# other and wake each other on the same lock: plain and fair locks, fencing
# tokens, Redisson's forceUnlock, and lock names of every kind (braces,
# spaces, quotes, newlines, UTF-8, 512 bytes).
#
# The Redisson client is the real one (RealRedisson: test/redisson-java's
# driver, the newest version in @RealRedisson::VERSIONS, as in 405; a missing
# driver fails the test).  The transcribed client, test/redisson/FakeRedisson.pm
# (Redisson's own Lua scripts run one EVAL per call, see its README), plays
# Redisson only where the Java API cannot show what is checked: a script's
# return code (section 1) and a moment between two of the client's own steps
# (section 2, the fair waiter that was woken but has not retried yet).
# Holders use 10-minute leases so that only a publish can explain a prompt
# wake-up.  Takes about 10 s (2 of them the JVM's start).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;
use Test::More;

my $T    = 60;
my $LONG = 600_000;    # 10 min lease for the Java client, in ms

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('compat', $redis,
	'redislock.fair_wait_timeout' => '120s');
my $rc   = FakeRedisson::Conn->new(port => $redis->port);
my ($JAVA_VERSION) = reverse RealRedisson::versions();
my $java = RealRedisson->new(version => $JAVA_VERSION, port => $redis->port);
my $fake = FakeRedisson->new(port => $redis->port);
note("Redisson $JAVA_VERSION: client id " . $java->id . ', log ' . $java->logfile);

sub numsub { $rc->cmd('PUBSUB', 'NUMSUB', $_[0])->[1] }
sub printable { my $s = shift; $s = substr($s, 0, 40) . '...' if length $s > 40; $s =~ s/\n/\\n/g; $s }

# Starts a real Java waiter ($tag: $thread runs @op) and waits until it has
# subscribed to $chan: first until nobody listens there (a SQL waiter's
# subscription may still be going away), then until someone does.
sub java_waiter
{
	my ($what, $chan, $tag, $thread, @op) = @_;
	until_ok("$what: nobody subscribed to its channel yet", sub { numsub($chan) == 0 });
	$java->start($tag, $thread, @op);
	until_ok("$what: subscribed", sub { numsub($chan) >= 1 });
	is($java->poll($tag), undef, "$what: still waits");
}

my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $a_id = $a->query('SELECT redis_lock_owner_id()');
my $b_id = $b->query('SELECT redis_lock_owner_id()');
# bytes, like the names: a character string would upgrade a UTF-8 name it
# is joined with (a fair channel) and send it encoded twice
utf8::encode($_) for $a_id, $b_id;

# --- 1. Redisson's script results while SQL holds or waits (FakeRedisson) -----------
# The Java API hides these: unlock is void (a partial reentrant unlock's 0
# and the nil for a lock not held are not returned), and its watchdog cannot
# be aimed at a lock it does not hold to see the renewal script's 0.
{
	my $name = 'order:42';
	is($fake->try_lock($name, 1, $LONG), undef, 'Java tryLock: acquired (nil)');
	is($a->query("SELECT redis_lock_acquire('$name', '0')"), 'f',
		"SQL acquire wait '0' is f while Java holds");
	is($a->query("SELECT locked FROM redis_lock_status('$name')"), 't', 'status: locked');
	is($a->query("SELECT holders[1] FROM redis_lock_status('$name')"), $fake->owner(1),
		'status: holder is the Java owner id');
	is($a->query("SELECT held_by_me FROM redis_lock_status('$name')"), 'f', 'status: not mine');
	is_deeply($fake->renew($LONG, [ $name, 1 ]), [1], 'Java watchdog renewal still works');

	$a->start("SELECT redis_lock_acquire('$name', NULL, '10 min')");
	waits_ok($a, 'SQL waiter');
	until_ok('SQL waiter subscribed to the Redisson channel',
		sub { numsub('redisson_lock__channel:{order:42}') >= 1 });
	# reentrant Java hold: the first unlock must not let SQL in
	is($fake->try_lock($name, 1, $LONG), undef, 'Java re-enters');
	is($rc->cmd('HGET', $name, $fake->owner(1)), '2', 'Java count 2');
	is($fake->unlock($name, 1), 0, 'Java unlock 1 of 2: still held (0)');
	waits_ok($a, 'SQL waiter still');
	ok(!$a->is_done, 'SQL waiter not done after a partial Java unlock');
	is($fake->unlock($name, 1), 1, 'Java unlock: released (1, publishes 0)');
	my ($v, $err) = $a->finish($T);
	is($v, 't', 'SQL waiter woken by the Java unlock publish') or diag($err);
	is($rc->cmd('HGET', $name, $a_id), '1', 'SQL session now holds it');

	# --- SQL holds: Java sees it taken
	my $ttl = $fake->try_lock($name, 2, $LONG);
	ok(defined $ttl && $ttl > 0, 'Java tryLock returns a ttl (not nil) while SQL holds')
	  or diag('ttl=' . ($ttl // 'nil'));
	is($fake->unlock($name, 2), undef, 'Java unlock of a lock it does not hold: nil');
	is_deeply($fake->renew($LONG, [ $name, 2 ]), [0], 'Java renewal: not its lock (0)');
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't', 'SQL re-enters');
	is_deeply($rc->cmd('HGETALL', $name), [ $a_id, '2' ], 'HGETALL: {<sql owner id>: 2}');

	# Java waits the Redisson way: subscribe, try, wait for the message, retry
	my $sub = $fake->new_conn;
	$sub->subscribe(FakeRedisson::channel($name));
	ok(defined $fake->try_lock($name, 2, $LONG), 'Java waiter: busy');
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'SQL releases one hold');
	is($sub->next_message(0.5), undef, 'no unlock message while a hold remains');
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'SQL releases the last hold');
	my $m = $sub->next_message($T);
	is_deeply($m, [ 'redisson_lock__channel:{order:42}', '0' ],
		'Java subscriber gets "0" on redisson_lock__channel:{order:42}');
	is($fake->try_lock($name, 2, $LONG), undef, 'Java retry after the message: acquired');
	is($fake->unlock($name, 2), 1, 'Java unlocks');
	$sub->close;
}

# --- 2. fair: Java waiter queued behind SQL, and SQL waiter behind Java -----------
{
	my $name = 'fair:j';
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min', true)"), 't',
		'SQL holds the fair lock');
	my $jo = $java->owner('f7');
	$java->start('f7', 'f7', 'lock', 'fair', $name, $LONG);
	until_ok('Java fair waiter queued in redisson_lock_queue:{fair:j}',
		sub { fair_queue_len($rc, $name) == 1 });
	is_deeply(fair_queue($rc, $name), [$jo], '... as its owner id');
	is(fair_timeout_count($rc, $name), 1, 'and in the timeout set');
	until_ok('Java fair waiter subscribed to its own channel',
		sub { numsub(FakeRedisson::fair_channel($name, $jo)) >= 1 });
	is($java->poll('f7'), undef, 'Java fair waiter still waits');
	is($a->query("SELECT queue_length FROM redis_lock_status('$name')"), 1,
		'redis_lock_status sees the Java waiter');

	# a SQL newcomer may not jump ahead of the queued Java waiter
	is($b->query("SELECT redis_lock_acquire('$name', '0', '10 min', true)"), 'f',
		'SQL fair newcomer (wait 0) does not jump the Java waiter');

	is($a->query("SELECT redis_lock_release('$name')"), 't', 'SQL releases');
	my ($st, $r) = $java->result('f7', $T);
	is($st, 'ok', "Java fair waiter woken within $T s by the SQL release") or diag($r // 'no result');
	is($rc->cmd('HGET', $name, $jo), '1', 'Java holds it');
	is(fair_queue_len($rc, $name), 0, 'queue empty');

	# SQL fair waiter behind the Java holder; Java's fair unlock wakes it
	$b->start("SELECT redis_lock_acquire('$name', NULL, '10 min', true)");
	until_ok('SQL fair waiter queued', sub { fair_queue_len($rc, $name) == 1 });
	is_deeply(fair_queue($rc, $name), [$b_id],
		'queue holds the SQL owner id');
	until_ok('SQL fair waiter subscribed to its own channel',
		sub { numsub(FakeRedisson::fair_channel($name, $b_id)) >= 1 });
	waits_ok($b, 'SQL fair waiter');
	is($java->run('f7', 'unlock', 'fair', $name), 'null',
		'Java fair unlock (publishes to the SQL owner channel)');
	my ($v, $err) = $b->finish($T);
	is($v, 't', 'SQL fair waiter woken by the Java fair unlock') or diag($err);
	is($rc->cmd('HGET', $name, $b_id), '1', 'SQL holds it');

	# Java fair waiter gives up (its tryLock wait runs out: acquireFailed
	# takes it out of the queue): SQL then gets in with wait 0, where a
	# queue entry left behind would keep it out for minutes
	is($java->run('f8', 'tryLock', 'fair', $name, 2000, $LONG), 'false',
		'Java fair tryLock with a 2 s wait gives up while SQL holds');
	is(fair_queue_len($rc, $name), 0, 'Java acquireFailed left the queue');
	is($b->query("SELECT redis_lock_release('$name')"), 't', 'SQL releases');
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min', true)"), 't',
		'free lock, empty queue: SQL fair wait 0 gets it');

	# The lock is free and the Java waiter at the head has not retried yet:
	# SQL still may not take it.  A real waiter retries the moment the
	# message arrives, so only the transcribed client (one script per call)
	# can stop between its two steps and hold this moment open.
	my $fo = $fake->owner(7);
	my $sub = $fake->new_conn;
	$sub->subscribe(FakeRedisson::fair_channel($name, $fo));
	ok(defined $fake->fair_try_lock($name, 7, $LONG), 'FakeRedisson fair tryLock: busy, queued');
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'SQL releases');
	is_deeply($sub->next_message($T), [ FakeRedisson::fair_channel($name, $fo), '0' ],
		"release publishes on redisson_lock__channel:{fair:j}:<its owner>");
	is($b->query("SELECT redis_lock_acquire('$name', '0', '10 min', true)"), 'f',
		'SQL fair acquire on a free lock with a Java queue head: f');
	is($fake->fair_try_lock($name, 7, $LONG), undef, 'its retry succeeds');
	is($fake->fair_unlock($name, 7), 1, 'it unlocks');
	$sub->close;

	# SQL force release wakes the Java fair waiter at the head
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min', true)"), 't', 'SQL holds it again');
	my $jo9 = $java->owner('f9');
	$java->start('f9', 'f9', 'lock', 'fair', $name, $LONG);
	until_ok('Java thread f9 queued', sub { fair_queue_len($rc, $name) == 1 });
	until_ok('... and subscribed', sub { numsub(FakeRedisson::fair_channel($name, $jo9)) >= 1 });
	is($java->poll('f9'), undef, '... and waits');
	is($b->query("SELECT redis_lock_force_release('$name')"), 't', 'SQL force release');
	($st, $r) = $java->result('f9', $T);
	is($st, 'ok', "force release woke the Java fair head within $T s") or diag($r // 'no result');
	is($rc->cmd('HGET', $name, $jo9), '1', 'Java thread f9 holds it');
	is($java->run('f9', 'unlock', 'fair', $name), 'null', 'Java unlocks');
	$a->notices;
	$a->query("SELECT redis_lock_release_all()");
}

# --- 3. fencing tokens share Redisson's counter ----------------------------------------
{
	my $name = 'fence';
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't', 'SQL takes fence');
	my $t1 = $a->query("SELECT redis_lock_fencing_token('$name')");
	is($t1, $rc->cmd('GET', FakeRedisson::token_key($name)),
		'fencing token = redisson_lock_token:{fence}');
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't', 'SQL re-enters');
	is($a->query("SELECT redis_lock_fencing_token('$name')"), $t1, 'reentry keeps the token');
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'release 1');
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'release 2');
	is($java->run('f3', 'lockAndGetToken', $name, $LONG), $t1 + 1,
		'Java RFencedLock acquires; its token follows the SQL one');
	is($rc->cmd('HGET', $name, $java->owner('f3')), '1', 'Java holds fence');
	is($b->query("SELECT redis_lock_acquire('$name', '0')"), 'f', 'busy for SQL');
	is($java->run('f3', 'unlock', 'fenced', $name), 'null', 'Java unlocks');
	is($b->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't', 'SQL takes it again');
	is($b->query("SELECT redis_lock_fencing_token('$name')"), $t1 + 2, 'token grows again');
	is($a->query("SELECT redis_lock_fencing_token('$name')"), undef, 'NULL for a non-holder');
	is($b->query("SELECT redis_lock_release('$name')"), 't', 'release');
}

# --- 4. Java forceUnlock of a SQL-held lock wakes SQL waiters -----------------------
{
	my $name = 'forced';
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't', 'SQL A holds');
	$b->start("SELECT redis_lock_acquire('$name', NULL, '10 min')");
	waits_ok($b, 'SQL B');
	until_ok('SQL B subscribed', sub { numsub(FakeRedisson::channel($name)) >= 1 });
	is($java->run('admin', 'forceUnlock', 'plain', $name), 'true', 'Java forceUnlock: true');
	my ($v, $err) = $b->finish($T);
	is($v, 't', 'SQL waiter woken by forceUnlock') or diag($err);
	is($a->query("SELECT held_by_me FROM redis_lock_status('$name')"), 'f',
		'A no longer holds it according to Redis');
	$a->notices;
	my ($rv) = $a->try("SELECT redis_lock_release('$name')");
	is($rv, 'f', 'A release after being force-unlocked: f');
	is($rc->cmd('HGET', $name, $b_id), '1', "A's release left B's hold alone");
	is($b->query("SELECT redis_lock_release('$name')"), 't', 'B releases');
}

# --- 5. names: braces (no {} wrapping), spaces, quotes, newlines, UTF-8, 512 bytes ---
# (the driver %-escapes every word, so any name reaches Redisson as it is)
for my $name ('inv{42}', 'a b c', "it's \"q\"", "line1\nline2",
	"\xe5\x9c\xa8\xe5\xba\x93\xe5\xad\x98 \xc3\xa9t\xc3\xa9", '{tag}:x', 'N' x 512,
	("\xc3\xa9" x 256))
{
	my $p = printable($name);
	my $l = sql_literal($name);
	my $chan = FakeRedisson::channel($name);
	if (index($name, '{') >= 0)
	{
		is($chan, "redisson_lock__channel:$name", "[$p] channel not wrapped in {}");
	}

	# SQL holds, Java waits, SQL releases; then Java holds, SQL waits, Java
	# unlocks (in this order: a SQL waiter's subscription outlives its wait
	# by seconds, Redisson drops its own as soon as it has the lock)
	is($a->query("SELECT redis_lock_acquire($l, '0', '10 min')"), 't', "[$p] SQL holds");
	is($rc->cmd('HGET', $name, $a_id), '1', "[$p] the hash at the exact key holds the SQL owner");
	java_waiter("[$p] Java waiter", $chan, 'w', 'w', 'lock', 'plain', $name, $LONG);
	is($a->query("SELECT redis_lock_release($l)"), 't', "[$p] SQL releases");
	my ($st, $r) = $java->result('w', $T);
	is($st, 'ok', "[$p] Java waiter woken by the SQL release") or diag($r // 'no result');
	is($rc->cmd('HGET', $name, $java->owner('w')), '1', "[$p] Java holds it, at the exact key");
	is($a->query("SELECT redis_lock_acquire($l, '0')"), 'f', "[$p] SQL busy");
	until_ok("[$p] the Java waiter's subscription is gone", sub { numsub($chan) == 0 });
	$a->start("SELECT redis_lock_acquire($l, NULL, '10 min')");
	waits_ok($a, "[$p] SQL waiter");
	until_ok("[$p] SQL waiter subscribed to $p channel", sub { numsub($chan) >= 1 });
	is($java->run('w', 'unlock', 'plain', $name), 'null', "[$p] Java unlocks");
	my ($v, $err) = $a->finish($T);
	is($v, 't', "[$p] SQL waiter woken") or diag($err);
	is($a->query("SELECT redis_lock_release($l)"), 't', "[$p] SQL releases");

	# fair: SQL holds, Java waits at Redisson's keys for the name, SQL releases
	is($a->query("SELECT redis_lock_acquire($l, '0', '10 min', true)"), 't', "[$p] SQL fair");
	my $fo = $java->owner('fw');
	$java->start('fw', 'fw', 'lock', 'fair', $name, $LONG);
	until_ok("[$p] Java fair waiter queued at Redisson's key", sub { fair_queue_len($rc, $name) == 1 });
	until_ok("[$p] ... subscribed to its own channel",
		sub { numsub(FakeRedisson::fair_channel($name, $fo)) >= 1 });
	is($java->poll('fw'), undef, "[$p] ... and waits");
	is($a->query("SELECT redis_lock_release($l)"), 't', "[$p] SQL releases fair");
	($st, $r) = $java->result('fw', $T);
	is($st, 'ok', "[$p] Java fair waiter woken by the SQL release") or diag($r // 'no result');

	# fair: Java holds, SQL waits in the queue, Java unlocks
	$a->start("SELECT redis_lock_acquire($l, NULL, '10 min', true)");
	until_ok("[$p] SQL fair waiter queued", sub { fair_queue_len($rc, $name) == 1 });
	until_ok("[$p] ... subscribed to its own channel",
		sub { numsub(FakeRedisson::fair_channel($name, $a_id)) >= 1 });
	is($java->run('fw', 'unlock', 'fair', $name), 'null', "[$p] Java fair unlocks");
	($v, $err) = $a->finish($T);
	is($v, 't', "[$p] SQL fair waiter woken") or diag($err);
	is($a->query("SELECT redis_lock_release($l)"), 't', "[$p] SQL releases");
	is($rc->cmd('EXISTS', $name), 0, "[$p] lock gone");
}

$a->close;
$b->close;
done_testing();
