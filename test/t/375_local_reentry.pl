# 375_local_reentry.pl — a session-scope, watchdog-mode re-entry of an
# exclusive lock the session holds is counted in the session without a round
# trip (no script runs in Redis), and so is a release that leaves at least as
# many holds as Redis counts; the last release goes to Redis and frees the
# lock. Redis never counts more holds than the session has. A fixed lease,
# transaction scope and a lock marked lost go to Redis as before; the lost
# lock is taken afresh. Session end frees a lock with local re-entries.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('reentry', $redis);
my $obs   = RedisLockTest::observer($node);
my $rc    = FakeRedisson::Conn->new(port => $redis->port);

# A MONITOR connection sees every command; the acquisitions and releases
# of a name are the EVALSHAs of acquire.lua and release.lua on it (the
# worker's renewals run renew.lua and are left out).
use Digest::SHA qw(sha1_hex);
my %sha = map { $_ => sha1_hex(slurp("$FindBin::RealBin/../../lua/$_.lua")) } qw(acquire release);
my $mon = FakeRedisson::Conn->new(port => $redis->port);
die 'MONITOR' unless $mon->cmd('MONITOR') eq 'OK';
my $mark_seq = 0;

# acquisitions and releases of name that reached Redis since the last call
sub round_trips
{
	my ($name) = @_;
	my $mark = 'mark-' . ++$mark_seq;
	my $n = 0;
	$rc->cmd('ECHO', $mark);
	while (defined(my $e = $mon->next_event(60)))
	{
		next if ref $e;
		last if $e =~ /"echo" "\Q$mark\E"/i;
		$n++ if $e =~ /"evalsha" "($sha{acquire}|$sha{release})" "\d+" "\Q$name\E"/i;
	}
	return $n;
}

sub holds_shown
{
	my ($name) = @_;
	return $obs->query("SELECT coalesce(sum(hold_count), 0) FROM redis_locks WHERE name = '$name'");
}

my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $id = $a->query('SELECT redis_lock_owner_id()');
sub redis_count { $rc->cmd('HGET', $_[0], $id) // 0 }

# --- 1. re-entries and releases in between stay in the session ----------------------------
# the scripts are loaded once first: a NOSCRIPT try would show as one more
is($a->query("SELECT redis_lock_acquire('lr:warm')::text || redis_lock_release('lr:warm')::text"),
	'truetrue', 'warm-up pair');
round_trips('lr:a');
is($a->query("SELECT redis_lock_acquire('lr:a')"), 't', 'A takes lr:a (watchdog)');
is(redis_count('lr:a'), 1, 'Redis counts 1');
my $re0 = lock_stats($obs)->{reentries};
is(round_trips('lr:a'), 1, 'the first acquisition reached Redis (one EVALSHA seen)');
is($a->query("SELECT redis_lock_acquire('lr:a', '0')::text || redis_lock_acquire('lr:a')::text"),
	'truetrue', 'A re-enters twice');
is(round_trips('lr:a'), 0, '... and nothing reached Redis');
is(holds_shown('lr:a'), 3, 'redis_locks shows 3 holds');
is(redis_count('lr:a'), 1, 'Redis still counts 1 (never more than the session has)');
is(lock_stats($obs)->{reentries}, $re0 + 2, 'redis_lock_stats counts the 2 re-entries');
is($b->query("SELECT redis_lock_acquire('lr:a', '0')"), 'f', 'B cannot take it');
round_trips('lr:a');
is($a->query("SELECT redis_lock_release('lr:a')::text || redis_lock_release('lr:a')::text"),
	'truetrue', 'A releases twice');
is(round_trips('lr:a'), 0, '... and nothing reached Redis');
is(holds_shown('lr:a'), 1, 'redis_locks shows 1 hold');
is($b->query("SELECT redis_lock_acquire('lr:a', '0')"), 'f', 'B still cannot take it');
round_trips('lr:a');
is($a->query("SELECT redis_lock_release('lr:a')"), 't', 'the last release');
is(round_trips('lr:a'), 1, '... goes to Redis');
is($rc->cmd('EXISTS', 'lr:a'), 0, '... and frees the lock');
is($b->query("SELECT redis_lock_acquire('lr:a', '0')"), 't', 'B takes it now');
is($b->query("SELECT redis_lock_release('lr:a')"), 't', 'B releases it');

# --- 2. what goes to Redis as before --------------------------------------------------------
is($a->query("SELECT redis_lock_acquire('lr:f', '0', '10 min')"), 't', 'A takes lr:f with a fixed lease');
is($a->query("SELECT redis_lock_acquire('lr:f', '0', '10 min')"), 't', '... and re-enters with a fixed lease');
is(redis_count('lr:f'), 2, 'a fixed-lease re-entry goes to Redis (count 2; it sets the lease again)');
is($a->query("SELECT redis_lock_release('lr:f')"), 't', 'a release');
is(redis_count('lr:f'), 1, '... of a fixed-lease hold goes to Redis (count 1)');
is($a->query("SELECT redis_lock_release('lr:f')"), 't', 'the last release frees it');

is($a->query("SELECT redis_lock_acquire('lr:x')"), 't', 'A takes lr:x (watchdog, session scope)');
$a->query('BEGIN');
is($a->query("SELECT redis_xact_lock_acquire('lr:x')"), 't', 'a transaction-scope re-entry');
is(redis_count('lr:x'), 2, '... goes to Redis (count 2)');
is($a->query("SELECT redis_lock_release('lr:x')"), 't', 'releasing the session hold');
is(redis_count('lr:x'), 1, '... goes to Redis too: Redis would otherwise count more than the 1 hold left');
$a->query('COMMIT');
is($rc->cmd('EXISTS', 'lr:x'), 0, 'COMMIT gives the last hold back');

# --- 3. a lock marked lost: the re-entry goes to Redis and takes it afresh -------------------
{
	my $l = RedisLockTest::Session->new($node);
	my $lid = $l->query('SELECT redis_lock_owner_id()');
	$l->query("SET redislock.watchdog_timeout = '1s'");
	is($l->query("SELECT redis_lock_acquire('lr:l')"), 't', 'L takes lr:l (1 s watchdog lease)');
	is($rc->cmd('DEL', 'lr:l'), 1, 'DEL lr:l behind its back');
	until_ok("the worker marks it lost", sub {
		$obs->query("SELECT state FROM redis_locks WHERE name = 'lr:l'") eq 'lost';
	});
	$l->notices;
	is($l->query("SELECT redis_lock_acquire('lr:l', '0')"), 't', 'L re-enters');
	like(join("\n", $l->notices), qr/had been lost and was acquired again/,
		'... which went to Redis and took it afresh (WARNING)');
	is($rc->cmd('HGET', 'lr:l', $lid), 2, 'Redis counts both holds again');
	is($l->query("SELECT redis_lock_release('lr:l')::text || redis_lock_release('lr:l')::text"),
		'truetrue', 'two releases');
	is($rc->cmd('EXISTS', 'lr:l'), 0, '... free it');
	$l->close;
}

# --- 4. session end frees a lock with local re-entries --------------------------------------
{
	my $e = RedisLockTest::Session->new($node);
	is($e->query("SELECT redis_lock_acquire('lr:e')::text || redis_lock_acquire('lr:e')::text "
			. "|| redis_lock_acquire('lr:e')::text"), 'truetruetrue', 'E takes lr:e and re-enters twice');
	ok($e->terminate, 'E is terminated');
	until_ok('lr:e is free', sub { $rc->cmd('EXISTS', 'lr:e') == 0 });
	is($b->query("SELECT redis_lock_acquire('lr:e', '0')::text || redis_lock_release('lr:e')::text"),
		'truetrue', 'B takes and releases it');
}

no_crash_ok($node, 'reentry');
done_testing();
