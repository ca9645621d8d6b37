# 390_listener.pl — one listener per PostgreSQL server subscribes for all
# its waiting sessions: 64 sessions waiting on one name, or on 8 names, show
# as one subscriber connection in Redis CLIENT LIST (not 64); every session
# gets the lock in turn and a non-atomic counter bumped under it is exact.
# When the listener's connection is killed (CLIENT KILL) or the listener
# itself is terminated while 32 sessions wait, none is stranded: all of
# them get the lock in turn. The lease is set far beyond the bound of each
# wait here, so a waiter that missed its wake-up and fell back to the
# lease's end would fail the bound.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $BOUND = 120;    # seconds for a whole concurrent run; the lease is 600 s

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('listener', $redis,
	'max_connections'            => '120',
	'redislock.watchdog_timeout' => '600s');
my $rc  = FakeRedisson::Conn->new(port => $redis->port);
my $obs = RedisLockTest::observer($node);

$obs->query(<<'SQL');
CREATE TABLE counter(name text PRIMARY KEY, v int NOT NULL);
CREATE PROCEDURE bump(lock_name text, rounds int)
LANGUAGE plpgsql AS $$
DECLARE
    cur int;
BEGIN
    FOR i IN 1 .. rounds LOOP
        IF NOT redis_lock_acquire(lock_name) THEN
            RAISE EXCEPTION 'lock % not acquired', lock_name;
        END IF;
        SELECT v INTO cur FROM counter WHERE name = lock_name;
        PERFORM pg_sleep(0.001);
        UPDATE counter SET v = cur + 1 WHERE name = lock_name;
        COMMIT;
        IF NOT redis_lock_release(lock_name) THEN
            RAISE EXCEPTION 'lock % not held at release', lock_name;
        END IF;
    END LOOP;
END $$;
SQL

# Redis connections in pub/sub mode, as CLIENT LIST shows them (flag P)
sub subscribers
{
	my $list = $rc->cmd('CLIENT', 'LIST');
	return scalar grep { /\bflags=\S*P/ } split /\n/, $list;
}

sub waiting
{
	return $obs->query("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND backend_type = 'client backend'");
}

sub listener_pid
{
	return $obs->query("SELECT pid FROM pg_stat_activity WHERE backend_type = 'redislock listener'");
}

my $holder = RedisLockTest::Session->new($node);
my @pool   = map { RedisLockTest::Session->new($node) } 1 .. 64;

# n sessions of the pool run bump() on names->[i % names] for rounds each,
# while the holder keeps every name until after($n) has run; then it
# releases and every session must finish within the bound.
sub contend
{
	my (%o) = @_;
	my @names = @{ $o{names} };
	my $n = $o{sessions};
	$obs->query("DELETE FROM counter");
	for my $name (@names)
	{
		$obs->query("INSERT INTO counter VALUES ('$name', 0)");
		is($holder->query("SELECT redis_lock_acquire('$name')"), 't', "holder takes $name");
	}
	$pool[$_]->start("CALL bump('$names[$_ % @names]', $o{rounds})") for 0 .. $n - 1;
	until_ok("$n sessions wait (wait_event_type Extension)", sub { waiting() == $n });
	$o{after}->() if $o{after};
	is($holder->query("SELECT redis_lock_release('$_')"), 't', "holder releases $_") for @names;
	my @errors;
	for my $i (0 .. $n - 1)
	{
		my ($v, $err) = $pool[$i]->finish($BOUND);
		push @errors, "session $i: $err" if defined $err;
	}
	is_deeply(\@errors, [], "$o{what}: all $n sessions got the lock $o{rounds} times within ${BOUND}s")
	  or diag(join("\n", @errors[0 .. ($#errors > 4 ? 4 : $#errors)]));
	for my $name (@names)
	{
		my $per = grep { $names[$_ % @names] eq $name } 0 .. $n - 1;
		is($obs->query("SELECT v FROM counter WHERE name = '$name'"), $per * $o{rounds},
			"$o{what}: counter of $name exact (no two holders at once)");
	}
}

# --- 1. 64 sessions on 8 names, then on one name: one subscriber -------------------------
# (a session waits, wait_event Extension, from before the listener's SUBSCRIBE
# lands: the count is waited for, and 64 subscribers would never make it 1)
until_ok('the listener runs', sub { defined listener_pid() });
contend(what => '64 waiters on 8 names', names => [ map { "l390:eight:$_" } 0 .. 7 ],
	sessions => 64, rounds => 3,
	after => sub { until_ok('64 sessions waiting on 8 names: one subscriber connection in CLIENT LIST', sub { subscribers() == 1 }) });
contend(what => '64 waiters on one name', names => ['l390:one'], sessions => 64, rounds => 5,
	after => sub { until_ok('64 sessions waiting on one name: one subscriber connection in CLIENT LIST', sub { subscribers() == 1 }) });

# --- 2. the listener's connection is killed while 32 sessions wait ----------------------
contend(what => 'CLIENT KILL of the listener', names => ['l390:kill'], sessions => 32, rounds => 3,
	after => sub {
		until_ok('one subscriber before the kill', sub { subscribers() == 1 });
		ok($rc->cmd('CLIENT', 'KILL', 'TYPE', 'pubsub') >= 1, 'CLIENT KILL TYPE pubsub');
		until_ok('the listener subscribes again', sub { subscribers() == 1 });
	});

# --- 3. the listener is terminated while 32 sessions wait -------------------------------
contend(what => 'listener terminated', names => ['l390:term'], sessions => 32, rounds => 3,
	after => sub {
		my $old = listener_pid();
		is($obs->query("SELECT pg_terminate_backend($old)"), 't', 'terminate the listener');
		until_ok('a new listener runs', sub { my $p = listener_pid(); defined $p && $p != $old });
	});

is($rc->cmd('EXISTS', 'l390:one', 'l390:kill', 'l390:term'), 0, 'no lock left in Redis');
until_ok('back to one subscriber', sub { subscribers() == 1 });
RedisLockTest::no_crash_ok($node, 'listener');

$_->close for $holder, @pool;
$node->stop;
done_testing();
