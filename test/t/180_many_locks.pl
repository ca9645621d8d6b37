# 180_many_locks.pl — 1,000 watchdog locks held at once by 4 sessions (250
# each, 3 s lease) for more than two renewal rounds: at every poll every key
# exists, is held by its session and has 0 < PTTL <= 3 s; renewals grow by
# >= 4,000; nothing is lost.  Then two sessions release theirs with
# redis_lock_release_all() and two simply disconnect (their exit release
# handles 250 locks each); nothing is left.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;
use Time::HiRes qw(sleep);

my $T = 120;
$RedisLockTest::WAIT = $T;
my $NSESS = 4;
my $PER   = 250;


my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('many', $redis, 'redislock.watchdog_timeout' => '3s');
my $obs   = RedisLockTest::observer($node);
my $rc    = FakeRedisson::Conn->new(port => $redis->port, timeout => 60);

# One round trip checks every key: held by its owner, 0 < PTTL <= lease.
# Returns the number of bad keys and the first few of them.
my $CHECK = <<'LUA';
local bad, first = 0, {}
for i, k in ipairs(KEYS) do
  local p = redis.call('pttl', k)
  if redis.call('hexists', k, ARGV[i]) ~= 1 or p <= 0 or p > tonumber(ARGV[#KEYS + 1]) then
    bad = bad + 1
    if #first < 5 then first[#first + 1] = k .. ' pttl=' .. p end
  end
end
return {bad, first}
LUA

my (@sess, @keys, @owners);
for my $n (1 .. $NSESS)
{
	my $s = RedisLockTest::Session->new($node);
	push @sess, $s;
	my $id = $s->query('SELECT redis_lock_owner_id()');
	for my $i (1 .. $PER) { push @keys, "many:$n:$i"; push @owners, $id; }
}
sub check_all
{
	my $r = $rc->cmd('EVAL', $CHECK, scalar(@keys), @keys, @owners, 3000);
	return ($r->[0], $r->[1]);
}

my $s0 = lock_stats($obs);
# half the sessions through generate_series, half through a DO loop
for my $n (1 .. $NSESS)
{
	my $s = $sess[ $n - 1 ];
	if ($n % 2)
	{
		is($s->query("SELECT count(*) FILTER (WHERE redis_lock_acquire('many:$n:' || i)) "
				. "FROM generate_series(1, $PER) i"), $PER, "session $n: $PER locks (generate_series)");
	}
	else
	{
		my (undef, $err) = $s->try("DO \$\$ BEGIN FOR i IN 1..$PER LOOP "
			  . "IF NOT redis_lock_acquire('many:$n:' || i) THEN RAISE 'not acquired %', i; END IF; "
			  . "END LOOP; END \$\$");
		ok(!defined $err, "session $n: $PER locks (DO loop)") or diag($err);
	}
}
is($obs->query('SELECT count(*) FROM redis_locks'), $NSESS * $PER, '1000 rows in redis_locks');
is($obs->query("SELECT count(*) FROM redis_locks WHERE renewal = 'watchdog' AND state = 'held' AND lease = '3 s'"),
	$NSESS * $PER, 'all watchdog, held, 3 s lease');
is(lock_stats($obs)->{acquires} - $s0->{acquires}, $NSESS * $PER, 'acquires +1000');
my ($bad, $first) = check_all();
is($bad, 0, 'all 1000 keys held in Redis right after acquisition') or diag(explain $first);

# Hold them for four renewal rounds (>= three renewal periods = one full
# 3 s lease, so every key has outlived its first lease), checking every key
# at each poll.
my $r0 = lock_stats($obs)->{renewals};
my ($polls, $worst, @badness) = (0, 0);
my $done = RedisLockTest::wait_until($T, 'renewals +4000 (four rounds of 1000)', sub {
	my ($b, $f) = check_all();
	$polls++;
	if ($b) { $worst = $b if $b > $worst; push @badness, @$f if @badness < 10; }
	sleep(0.2);
	return lock_stats($obs)->{renewals} >= $r0 + 4 * $NSESS * $PER;
});
ok($done, 'renewals grew by >= 4000 while held');
is($worst, 0, "no key lapsed, changed owner or exceeded its lease at any of $polls polls")
  or diag(explain \@badness);
($bad, $first) = check_all();
is($bad, 0, 'all 1000 keys exist with 0 < PTTL <= 3 s at the end') or diag(explain $first);
my $s1 = lock_stats($obs);
ok($s1->{renewals} - $r0 >= 1000, 'renewals grew by >= 1000 (' . ($s1->{renewals} - $r0) . ')');
is($s1->{lost_locks}, $s0->{lost_locks}, 'nothing lost');
is($s1->{renewal_failures}, $s0->{renewal_failures}, 'no renewal failures');
is($obs->query("SELECT count(*) FROM redis_locks WHERE state <> 'held'"), 0, 'all still held in redis_locks');

# Release: two sessions explicitly, two by disconnecting.
is($sess[0]->query('SELECT redis_lock_release_all()'), $PER, "session 1 releases all $PER");
is($sess[1]->query('SELECT redis_lock_release_all()'), $PER, "session 2 releases all $PER");
my $w0 = lock_stats($obs)->{worker_released};
$sess[2]->close;
ok($sess[3]->terminate(60), 'session 4 terminated');
until_ok('every key gone from Redis', sub {
	my $n = 0;
	$n += $rc->cmd('EXISTS', $_) for @keys[ 0 .. $#keys ];
	$n == 0;
});
until_ok('redis_locks empty', sub { $obs->query('SELECT count(*) FROM redis_locks') == 0 });
is(lock_stats($obs)->{worker_released}, $w0, 'the ending sessions released their own locks (worker released none)');
is(scalar(grep { !/^redisson_lock_token:/ } @{ $rc->cmd('KEYS', '*') }), 0, 'nothing but fencing counters in Redis');
$_->close for @sess[ 0, 1 ];

no_crash_ok($node, 'many locks');
done_testing();
