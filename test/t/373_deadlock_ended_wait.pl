# 373_deadlock_ended_wait.pl — a wait-for edge left behind by a wait that
# has ended makes no deadlock (issue 21, defect 4). A wait that ends while
# the command connection is unhealthy (here: cancelled during a deadlock
# check that Redis holds back with CLIENT PAUSE) cannot delete its edge,
# which then lived for its TTL; confirmation only checked that the edge's
# `started` and the holders were unchanged, so a session waiting for what
# the idle session holds got 40P01 although the idle session waits for
# nothing. Now confirmation proves that every member still waits: a session
# of this server by the registry, another server's by an edge refreshed
# within its check interval; and the edge left behind is deleted at the
# session's next call that reaches Redis.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('ended_wait', $redis);
my $rc    = FakeRedisson::Conn->new(port => $redis->port);
my $obs   = RedisLockTest::observer($node);

sub edge_of { return "redislock_waits:{$_[0]}" }
sub checks  { return $obs->query('SELECT deadlock_checks FROM redis_lock_stats') }

sub session
{
	my $s = RedisLockTest::Session->new($node);
	$s->query("SET redislock.deadlock_timeout = '100ms'");
	$s->{id} = $s->query('SELECT redis_lock_owner_id()');
	return $s;
}

# --- 1. a session of this server whose wait ended without deleting its edge --
{
	# owner ids in this order: C, the largest, is the one that walks the cycle
	my $a = session();
	my $b = session();
	my $c = session();
	# A's deadlock check must still be blocked when the cancel comes
	$a->query("SET redislock.command_timeout = '60s'");
	is($a->query("SELECT redis_lock_acquire('ew:x')"), 't', 'A holds ew:x');
	is($b->query("SELECT redis_lock_acquire('ew:y')"), 't', 'B holds ew:y');
	is($c->query("SELECT redis_lock_acquire('ew:z')"), 't', 'C holds ew:z');

	$a->start("SELECT redis_lock_acquire('ew:y', '60 s')");
	RedisLockTest::until_ok('A publishes its wait-for edge', sub { $rc->cmd('EXISTS', edge_of($a->{id})) == 1 });
	$rc->cmd('CLIENT', 'PAUSE', 60000, 'WRITE');
	my $c0 = checks();
	RedisLockTest::until_ok('A begins a deadlock check while Redis holds writes back', sub { checks() > $c0 });
	my (undef, $err, $state) = $a->cancel;
	is($state, '57014', 'A\'s wait is cancelled during the check') or diag($err);
	$rc->cmd('CLIENT', 'UNPAUSE');
	is($rc->cmd('EXISTS', edge_of($a->{id})), 1, 'A\'s edge is left behind (its connection was not in sync)');

	$b->start("SELECT redis_lock_acquire('ew:z', '60 s')");
	RedisLockTest::until_ok('B waits for C and publishes its edge', sub { $rc->cmd('EXISTS', edge_of($b->{id})) == 1 });
	my ($v, $cerr, $cstate) = $c->try("SELECT redis_lock_acquire('ew:x', '2 s')");
	is($cstate, undef, 'C waiting for what idle A holds gets no 40P01 from A\'s old edge') or diag("[$cstate] $cerr");
	is($v, 'f', '... and times out, as A releases nothing');

	$a->query("SELECT redis_lock_status('ew:other')");
	is($rc->cmd('EXISTS', edge_of($a->{id})), 0, 'A\'s next call that reaches Redis deletes the edge left behind');

	(undef, $err, $state) = $b->cancel;
	is($state, '57014', 'B\'s wait is cancelled');
	$_->query('SELECT redis_lock_release_all()') for $a, $b, $c;
	is($rc->cmd('EXISTS', edge_of($b->{id})), 0, 'B\'s edge is gone with its wait');
	$_->close for $a, $b, $c;
}

# --- 2. another server's session: its edge must be refreshed ---------------
# F is written here as another server's session would be: it holds ew:f and
# its edge says it waits for ew:g, which the session holds. F's owner id is
# below every real one, so the session's walk follows it.
{
	my $f = '00000000-0000-4000-8000-000000000000:1';
	my $s = session();
	is($s->query("SELECT redis_lock_acquire('ew:g')"), 't', 'the session holds ew:g');
	$rc->cmd('HSET', 'ew:f', $f, 1);
	$rc->cmd('PEXPIRE', 'ew:f', 120000);

	for my $case ([ 'an edge not refreshed for 5 s (check interval 100 ms)', 100, 60000, 55000, 0 ],
		[ 'an edge refreshed just now', 600000, 1200000, 1200000, 1 ])
	{
		my ($what, $every, $ttl, $left, $deadlock) = @$case;
		$rc->cmd('DEL', edge_of($f));
		$rc->cmd('HSET', edge_of($f), 'server', 'elsewhere', 'pid', 4242,
			'started', int(time * 1000) - 10000, 'kind', 'lock', 'fair', 0, 'n', 1, 'name1', 'ew:g',
			'every', $every, 'ttl', $ttl);
		$rc->cmd('PEXPIRE', edge_of($f), $left);
		my ($v, $err, $state) = $s->try("SELECT redis_lock_acquire('ew:f', '2 s')");
		if ($deadlock)
		{
			is($state, '40P01', "$what: the cycle through it is a deadlock") or diag($err);
			like($err // '', qr/waits for Redis lock "ew:f" held by session 4242 on server "elsewhere", which waits for Redis lock "ew:g"/,
				"$what: the detail names the other server's session");
		}
		else
		{
			is($state, undef, "$what: no 40P01 through a wait that has ended") or diag("[$state] $err");
			is($v, 'f', "$what: ... the wait times out");
		}
	}
	$rc->cmd('DEL', edge_of($f), 'ew:f');
	$s->query('SELECT redis_lock_release_all()');
	$s->close;
}

RedisLockTest::no_crash_ok($node, 'stale wait-for edges');
done_testing();
