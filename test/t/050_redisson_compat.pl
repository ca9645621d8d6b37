# 050_redisson_compat.pl — SQL sessions and a Redisson client exclude each
# other and wake each other on the same lock.
#
# The "Java client" is test/redisson/FakeRedisson.pm: Redisson's own Lua
# scripts (transcribed in test/redisson/*.lua, see its README) run with the
# keys and arguments Redisson computes, over its own Redis connection, owner
# ids "<uuid>:<thread id>".  Holders use long leases so that only a publish
# can explain a prompt wake-up.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use IPC::Run ();
use Test::More;

my $T    = 60;
my $LONG = 600_000;    # 10 min lease for the Java client, in ms

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('compat', $redis,
	'redislock.fair_wait_timeout' => '120s');
my $rc   = FakeRedisson::Conn->new(port => $redis->port);
my $java = FakeRedisson->new(port => $redis->port);

sub numsub { $rc->cmd('PUBSUB', 'NUMSUB', $_[0])->[1] }
sub printable { my $s = shift; $s = substr($s, 0, 40) . '...' if length $s > 40; $s =~ s/\n/\\n/g; $s }

my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $a_id = $a->query('SELECT redis_lock_owner_id()');
my $b_id = $b->query('SELECT redis_lock_owner_id()');

# --- 1. Java holds order:42 ---------------------------------------------------------
{
	my $name = 'order:42';
	is($java->try_lock($name, 1, $LONG), undef, 'Java tryLock: acquired (nil)');
	is($a->query("SELECT redis_lock_acquire('$name', '0')"), 'f',
		"SQL acquire wait '0' is f while Java holds");
	is($a->query("SELECT locked FROM redis_lock_status('$name')"), 't', 'status: locked');
	is($a->query("SELECT holders[1] FROM redis_lock_status('$name')"), $java->owner(1),
		'status: holder is the Java owner id');
	is($a->query("SELECT held_by_me FROM redis_lock_status('$name')"), 'f', 'status: not mine');
	is_deeply($java->renew($LONG, [ $name, 1 ]), [1], 'Java watchdog renewal still works');

	$a->start("SELECT redis_lock_acquire('$name', NULL, '10 min')");
	waits_ok($a, 'SQL waiter');
	until_ok('SQL waiter subscribed to the Redisson channel',
		sub { numsub('redisson_lock__channel:{order:42}') >= 1 });
	# reentrant Java hold: the first unlock must not let SQL in
	is($java->try_lock($name, 1, $LONG), undef, 'Java re-enters');
	is($rc->cmd('HGET', $name, $java->owner(1)), '2', 'Java count 2');
	is($java->unlock($name, 1), 0, 'Java unlock 1 of 2: still held (0)');
	waits_ok($a, 'SQL waiter still');
	ok(!$a->is_done, 'SQL waiter not done after a partial Java unlock');
	is($java->unlock($name, 1), 1, 'Java unlock: released (1, publishes 0)');
	my ($v, $err) = $a->finish($T);
	is($v, 't', 'SQL waiter woken by the Java unlock publish') or diag($err);
	is($rc->cmd('HGET', $name, $a_id), '1', 'SQL session now holds it');

	# --- SQL holds: Java sees it taken
	my $ttl = $java->try_lock($name, 2, $LONG);
	ok(defined $ttl && $ttl > 0, 'Java tryLock returns a ttl (not nil) while SQL holds')
	  or diag('ttl=' . ($ttl // 'nil'));
	is($java->unlock($name, 2), undef, 'Java unlock of a lock it does not hold: nil');
	is_deeply($java->renew($LONG, [ $name, 2 ]), [0], 'Java renewal: not its lock (0)');
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't', 'SQL re-enters');
	is_deeply($rc->cmd('HGETALL', $name), [ $a_id, '2' ], 'HGETALL: {<sql owner id>: 2}');

	# Java waits the Redisson way: subscribe, try, wait for the message, retry
	my $sub = $java->new_conn;
	$sub->subscribe(FakeRedisson::channel($name));
	ok(defined $java->try_lock($name, 2, $LONG), 'Java waiter: busy');
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'SQL releases one hold');
	is($sub->next_message(0.5), undef, 'no unlock message while a hold remains');
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'SQL releases the last hold');
	my $m = $sub->next_message($T);
	is_deeply($m, [ 'redisson_lock__channel:{order:42}', '0' ],
		'Java subscriber gets "0" on redisson_lock__channel:{order:42}');
	is($java->try_lock($name, 2, $LONG), undef, 'Java retry after the message: acquired');
	is($java->unlock($name, 2), 1, 'Java unlocks');
	$sub->close;
}

# --- 2. redis-cli as the Java client, and a redis-cli SUBSCRIBE --------------------
{
	my $name = 'cli:lock';
	my $owner = $java->uuid . ':99';
	my $out = $redis->cli('--eval', FakeRedisson::script_path('lock_try'),
		$name, ',', $LONG, $owner);
	is($out, '', 'redis-cli --eval lock_try.lua: nil (acquired)');
	is($a->query("SELECT redis_lock_acquire('$name', '0')"), 'f', 'SQL: busy');
	$out = $redis->cli('--eval', FakeRedisson::script_path('lock_unlock'),
		$name, FakeRedisson::channel($name), FakeRedisson::latch_key($name, 'cli1'), ',',
		0, $LONG, $owner, 'publish', 10000);
	is($out, '1', 'redis-cli --eval lock_unlock.lua: 1');
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't', 'SQL: free now');

	my $file = "$PostgreSQL::Test::Utils::tmp_check/050_subscribe.out";
	unlink $file;
	my $h = IPC::Run::start(
		[ $RedisLockTest::Redis::CLI, '-h', '127.0.0.1', '-p', $redis->port, '--csv',
		  'SUBSCRIBE', FakeRedisson::channel($name) ],
		'<', \undef, '>', $file, '2>&1',
		IPC::Run::timeout(3 * $T));
	until_ok('redis-cli SUBSCRIBE is listening',
		sub { numsub(FakeRedisson::channel($name)) >= 1 });
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'SQL releases');
	until_ok('redis-cli SUBSCRIBE saw "0"', sub {
		open my $fh, '<', $file or return 0;
		local $/;
		my $t = <$fh>;
		return $t =~ /"message","redisson_lock__channel:\{cli:lock\}","0"/;
	});
	$h->kill_kill;
}

# --- 3. fair: Java waiter queued behind SQL, and SQL waiter behind Java -----------
{
	my $name = 'fair:j';
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min', true)"), 't',
		'SQL holds the fair lock');
	my $jo = $java->owner(7);
	my $sub = $java->new_conn;
	$sub->subscribe(FakeRedisson::fair_channel($name, $jo));
	my $ttl = $java->fair_try_lock($name, 7, $LONG);
	ok(defined $ttl, 'Java fair tryLock: busy, returns ttl') or diag('nil');
	is_deeply(fair_queue($rc, $name), [$jo],
		'Java owner queued in redisson_lock_queue:{fair:j}');
	is(fair_timeout_count($rc, $name), 1, 'and in the timeout set');
	is($a->query("SELECT queue_length FROM redis_lock_status('$name')"), 1,
		'redis_lock_status sees the Java waiter');

	# a SQL newcomer may not jump ahead of the queued Java waiter
	is($b->query("SELECT redis_lock_acquire('$name', '0', '10 min', true)"), 'f',
		'SQL fair newcomer (wait 0) does not jump the Java waiter');

	is($a->query("SELECT redis_lock_release('$name')"), 't', 'SQL releases');
	is_deeply($sub->next_message($T), [ FakeRedisson::fair_channel($name, $jo), '0' ],
		"release publishes on redisson_lock__channel:{fair:j}:<java owner>");
	# lock is free but the Java waiter is the head: SQL still may not take it
	is($b->query("SELECT redis_lock_acquire('$name', '0', '10 min', true)"), 'f',
		'SQL fair acquire on a free lock with a Java queue head: f');
	is($java->fair_try_lock($name, 7, $LONG), undef, 'Java fair tryLock now succeeds');
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
	is($java->fair_unlock($name, 7), 1, 'Java fair unlock (publishes to the SQL owner channel)');
	my ($v, $err) = $b->finish($T);
	is($v, 't', 'SQL fair waiter woken by the Java fair unlock') or diag($err);
	is($rc->cmd('HGET', $name, $b_id), '1', 'SQL holds it');

	# Java fair waiter gives up (acquireFailed): SQL then gets in with wait 0
	ok(defined $java->fair_try_lock($name, 8, $LONG), 'Java thread 8 queued');
	is(fair_queue_len($rc, $name), 1, 'one waiter');
	$java->fair_acquire_failed($name, 8);
	is(fair_queue_len($rc, $name), 0, 'Java acquireFailed left the queue');
	is($b->query("SELECT redis_lock_release('$name')"), 't', 'SQL releases');
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min', true)"), 't',
		'free lock, empty queue: SQL fair wait 0 gets it');

	# SQL force release wakes the Java fair waiter at the head
	my $jo9 = $java->owner(9);
	my $sub9 = $java->new_conn;
	$sub9->subscribe(FakeRedisson::fair_channel($name, $jo9));
	ok(defined $java->fair_try_lock($name, 9, $LONG), 'Java thread 9 queued');
	is($b->query("SELECT redis_lock_force_release('$name')"), 't', 'SQL force release');
	is_deeply($sub9->next_message($T), [ FakeRedisson::fair_channel($name, $jo9), '0' ],
		'force release woke the Java fair head');
	is($java->fair_try_lock($name, 9, $LONG), undef, 'Java thread 9 acquires');
	is($java->fair_unlock($name, 9), 1, 'Java unlocks');
	$a->query("SELECT redis_lock_release_all()");
	$sub->close;
	$sub9->close;
}

# --- 4. fencing tokens share Redisson's counter ----------------------------------------
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
	my ($ttl, $tok) = $java->fenced_try_lock($name, 3, $LONG);
	is($ttl, -1, 'Java RFencedLock acquires');
	is($tok, $t1 + 1, 'Java token follows the SQL one');
	is($b->query("SELECT redis_lock_acquire('$name', '0')"), 'f', 'busy for SQL');
	is($java->unlock($name, 3), 1, 'Java unlocks');
	is($b->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't', 'SQL takes it again');
	is($b->query("SELECT redis_lock_fencing_token('$name')"), $t1 + 2, 'token grows again');
	is($a->query("SELECT redis_lock_fencing_token('$name')"), undef, 'NULL for a non-holder');
	is($b->query("SELECT redis_lock_release('$name')"), 't', 'release');
}

# --- 5. Java forceUnlock of a SQL-held lock wakes SQL waiters -----------------------
{
	my $name = 'forced';
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't', 'SQL A holds');
	$b->start("SELECT redis_lock_acquire('$name', NULL, '10 min')");
	waits_ok($b, 'SQL B');
	is($java->force_unlock($name), 1, 'Java forceUnlock: 1');
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

# --- 6. names: braces (no {} wrapping), spaces, quotes, newlines, UTF-8, 512 bytes ---
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
	is($java->try_lock($name, 5, $LONG), undef, "[$p] Java acquires");
	is($a->query("SELECT redis_lock_acquire($l, '0')"), 'f', "[$p] SQL busy");
	$a->start("SELECT redis_lock_acquire($l, NULL, '10 min')");
	waits_ok($a, "[$p] SQL waiter");
	until_ok("[$p] SQL waiter subscribed to $p channel", sub { numsub($chan) >= 1 });
	is($java->unlock($name, 5), 1, "[$p] Java unlocks");
	my ($v, $err) = $a->finish($T);
	is($v, 't', "[$p] SQL waiter woken") or diag($err);
	is($rc->cmd('HGET', $name, $a_id), '1', "[$p] the hash at the exact key holds the SQL owner");

	my $sub = $java->new_conn;
	$sub->subscribe($chan);
	ok(defined $java->try_lock($name, 5, $LONG), "[$p] Java busy");
	is($a->query("SELECT redis_lock_release($l)"), 't', "[$p] SQL releases");
	is_deeply($sub->next_message($T), [ $chan, '0' ], "[$p] unlock published on $p channel");
	is($java->try_lock($name, 5, $LONG), undef, "[$p] Java acquires after the message");
	is($java->unlock($name, 5), 1, "[$p] Java unlocks");
	$sub->close;

	# fair keys for the name
	is($a->query("SELECT redis_lock_acquire($l, '0', '10 min', true)"), 't', "[$p] SQL fair");
	ok(defined $java->fair_try_lock($name, 6, $LONG), "[$p] Java fair waiter queued");
	is(fair_queue_len($rc, $name), 1, "[$p] queue at Redisson's key");
	my $fsub = $java->new_conn;
	$fsub->subscribe(FakeRedisson::fair_channel($name, $java->owner(6)));
	is($a->query("SELECT redis_lock_release($l)"), 't', "[$p] SQL releases fair");
	my $fm = $fsub->next_message($T);
	is($fm && $fm->[1], '0', "[$p] Java fair waiter notified on its own channel");
	is($java->fair_try_lock($name, 6, $LONG), undef, "[$p] Java fair acquires");
	is($java->fair_unlock($name, 6), 1, "[$p] Java fair unlocks");
	$fsub->close;
}

$a->close;
$b->close;
done_testing();
