# 217_cluster_long_migration.pl — a Redis Cluster slot held MIGRATING for
# longer than redislock.command_timeout (1 s here).  One key of the lock's
# slot (its fencing counter) is moved ahead to the importing master and the
# lock's hash is left on the source, so every script about the lock gets
# TRYAGAIN for as long as the migration lasts:
#
#  * a waiter (wait => '60 s') that starts during the migration keeps
#    waiting: TRYAGAIN while a wait is pending is not an ERROR.  Proof that it
#    outlived command_timeout is the order of events, not the clock: the
#    holder's release, which itself meets TRYAGAIN until command_timeout,
#    has returned while the waiter still waits;
#  * that release returns true as on a settled cluster: the worker completes
#    it once the slot settles, and the lock is never logged as lost;
#  * redis_lock_status still reports the lock (its holders, from the hash)
#    and names the migrating slot;
#  * once the migration is finished, the waiter gets the lock.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $cl = RedisLockTest::Cluster->new(masters => 3);
my $node = RedisLockTest::node('longmig', undef,
	'redislock.cluster_nodes' => $cl->seeds,
	'redislock.command_timeout' => '1s');

my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $c = RedisLockTest::Session->new($node);
my $owner_a = $a->query('SELECT redis_lock_owner_id()');

my $name  = 'mig:a';
my $slot  = $cl->slot_of($name);
my $from  = $cl->owner_of_slot($slot);
my ($to)  = grep { $_->port != $from->port } $cl->masters;
my $token = FakeRedisson::token_key($name);
is($cl->slot_of($token), $slot, 'the fencing counter shares the slot of the lock');

is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't', 'A holds the lock (10 min lease)');
is($from->cli('EXISTS', $token), 1, 'its fencing counter exists on the source');

$cl->begin_migration($slot, $to);
is($from->cli('MIGRATE', '127.0.0.1', $to->port, $token, 0, 5000), 'OK',
	'the fencing counter is moved ahead; the hash stays on the source');
like(scalar $from->cli('EVAL', q{return redis.call('exists', KEYS[1]) + redis.call('exists', KEYS[2])},
		2, $name, $token), qr/^TRYAGAIN/, 'a script on both keys now gets TRYAGAIN');

# --- a wait meets TRYAGAIN past command_timeout ----------------------------------
$b->start("SELECT redis_lock_acquire('$name', '60 s', '10 min')");
waits_ok($b, 'B waits for the lock during the migration');

# --- a release meets it too ---------------------------------------------------------
my ($v, $err, $st) = $a->try("SELECT redis_lock_release('$name')");
is($st, undef, 'A\'s release during the migration is no ERROR') or diag($err);
is($v, 't', '... and returns true');
ok(!$b->is_done, 'B still waits after A\'s release met TRYAGAIN until command_timeout');
is($from->cli('HEXISTS', $name, $owner_a), 1,
	'the hold is still in Redis: the release waits for the slot to settle');
is($a->query("SELECT count(*) FROM redis_locks WHERE name = '$name' AND state = 'held'"), 0,
	'redis_locks no longer shows A holding it');
is($a->query("SELECT redis_lock_fencing_token('$name') IS NULL"), 't', 'A has no fencing token for it');
my $k = 0;
$k++ while $cl->slot_of("mig:o$k") == $slot;
my $other = "mig:o$k";
($v, $err, $st) = $a->try("SELECT redis_lock_acquire('$other', '0') AND redis_lock_release('$other')");
is($st, undef, 'A\'s next call (another lock) during the migration is no ERROR') or diag($err);
is($v, 't', '... and takes and releases that lock');

# --- status reports what it can --------------------------------------------------
($v, $err, $st) = $c->try("SELECT locked::int || ',' || held_by_me::int FROM redis_lock_status('$name')");
is($st, undef, 'status during the migration is no ERROR') or diag($err);
is($v, '1,0', 'status: locked, not by the asking session');
my @notices = $c->notices;
like(join("\n", @notices), qr/hash slot $slot /i, 'status names the migrating slot')
  or diag(explain(\@notices));
ok(!$b->is_done, 'B still waits');

# --- the migration ends ----------------------------------------------------------
$cl->finish_migration($slot, $to);
($v, $err, $st) = $b->finish(60);
is($st, undef, 'B\'s wait ends without an ERROR') or diag($err);
is($v, 't', 'B gets the lock once the slot settles and A\'s release is completed');
is($to->cli('HEXISTS', $name, $owner_a), 0, 'nothing of A is left in the lock');
is($b->query("SELECT redis_lock_release('$name')"), 't', 'B releases');
is($a->query("SELECT redis_lock_acquire('$name', '0')"), 't', 'A can take the lock again');
is($a->query("SELECT redis_lock_release('$name')"), 't', 'and release it');

my $log = slurp($node->logfile);
unlike($log, qr/\Q$name\E.{0,40}was lost|was lost.{0,80}\Q$name\E/, 'the lock released during the migration is never logged as lost');
$_->close for ($a, $b, $c);
no_crash_ok($node, 'long migration');
done_testing();
