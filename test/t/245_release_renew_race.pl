# 245_release_renew_race.pl — a lock the session releases is not reported
# lost by a renewal that crosses the release.
#
# The worker and the sessions reach Redis through a proxy
# (test/lib/DelayProxy.pm) that holds back one connection at a time (pin).
# The worker's renewal of A's lock is held back; A's release runs in Redis
# but its reply is held back; then the renewal runs (it finds no hold) and
# is answered while A still waits for the reply to its release. (Sessions
# use the server's redislock.url: a lease-less lock is refused in a session
# with settings of its own, which the worker would not renew.) The lock was released, not lost: no WARNING
# "was lost", lost_locks unchanged, redis_locks never shows it lost, and
# the release says true. (Found by the fault suite: 020 with AOF reported a
# lock lost that a loader released while the watchdog reconnected after the
# restart.)
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use DelayProxy;
use Test::More;

my $redis = RedisLockTest::Redis->new;
my $wp = DelayProxy->spawn(0, $redis->port);
my $node = RedisLockTest::node('release_renew_race', undef,
	'redislock.url' => 'redis://127.0.0.1:' . $wp->port($redis->port),
	# renewed every 10 s; the worker gives up a round trip once the lease
	# runs out (LAPSE_SLACK_MS, worker.c), so it outlives the test's steps
	'redislock.watchdog_timeout' => '30s',
	'redislock.command_timeout' => '30s');
my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $obs = RedisLockTest::Session->new($node);
my $owner_a = $a->query('SELECT redis_lock_owner_id()');

# Redis runs the release script at once only if it has it cached: a first
# EVALSHA would get NOSCRIPT (held back too) and run only after the stall.
is($a->query("SELECT redis_lock_acquire('rr:warm') AND redis_lock_release('rr:warm')"), 't',
	'A has taken and released a lock (the release script is in Redis)');
is($a->query("SELECT redis_lock_acquire('rr:a')"), 't', 'A holds rr:a (watchdog, 30 s lease)');
is($redis->cli('HEXISTS', 'rr:a', $owner_a), 1, '... in Redis');
my $ra = $obs->query("SELECT renewed_at FROM redis_locks WHERE name = 'rr:a'");
until_ok('the worker has renewed rr:a once (it is connected)', sub {
	$obs->query("SELECT renewed_at FROM redis_locks WHERE name = 'rr:a'") ne $ra }, 60);
my $lost0 = lock_stats($obs)->{lost_locks};

$wp->cmd('stall up');
ok($wp->wait_held('up', 1, 60), "the worker's renewal of rr:a is held back");
$wp->cmd('pin up');    # only the worker's
$wp->cmd('stall down');
$a->start("SELECT redis_lock_release('rr:a')");
until_ok('A\'s release has run in Redis (its reply is held back)', sub {
	$redis->cli('HEXISTS', 'rr:a', $owner_a) == 0 }, 30);
$wp->cmd('pin down');    # only A's
note('rr:a pttl after the release: ' . $redis->cli('PTTL', 'rr:a'));
$wp->cmd('go up');

# The worker handles one round trip at a time: once it has renewed a lock
# taken after this point, it has handled the reply to the renewal of rr:a.
is($b->query("SELECT redis_lock_acquire('rr:b')"), 't', 'B takes rr:b (watchdog)');
my $r0 = $obs->query("SELECT renewed_at FROM redis_locks WHERE name = 'rr:b'");
until_ok('the worker has renewed rr:b since, so it has seen the renewal of rr:a answered', sub {
	$obs->query("SELECT renewed_at FROM redis_locks WHERE name = 'rr:b'") ne $r0 }, 60);

isnt($obs->query("SELECT state FROM redis_locks WHERE name = 'rr:a'") // 'gone', 'lost',
	'redis_locks does not show rr:a lost while its release is answered');
is(lock_stats($obs)->{lost_locks}, $lost0, 'lost_locks unchanged');
unlike(slurp($node->logfile), qr/Redis lock "rr:a" held by the session with PID \d+ was lost/,
	'no "was lost" WARNING for rr:a');

$wp->cmd('go all');
my ($v, $err) = $a->finish(30);
is($v, 't', 'A\'s release says true') or diag($err);
is($obs->query("SELECT count(*) FROM redis_locks WHERE name = 'rr:a'"), 0, 'rr:a is gone from redis_locks');
is($b->query("SELECT redis_lock_release('rr:b')"), 't', 'B releases rr:b');
$_->close for $a, $b, $obs;
no_crash_ok($node, 'release/renewal race');

done_testing();
