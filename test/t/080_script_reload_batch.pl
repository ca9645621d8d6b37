# Pipelines whose every call meets NOSCRIPT (Redis forgot the scripts) are
# reloaded and repeated as a whole: release_all of many locks, the worker's
# renewal batch, and a commit-time release of many transaction locks.
use strict;
use warnings;
use Test::More;
use RedisLockTest;

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('reload', $redis, 'redislock.watchdog_timeout' => '1s');
my $s = RedisLockTest::Session->new($node);

# release_all: 60 release calls in one pipeline, all NOSCRIPT
is($s->query("SELECT count(*) FROM generate_series(1, 60) g "
        . "WHERE redis_lock_acquire('batch:' || g, '0', '10 min')"), 60, '60 locks taken');
$redis->cli('SCRIPT', 'FLUSH');
is($s->query('SELECT redis_lock_release_all()'), 60, 'release_all after SCRIPT FLUSH releases all 60');
is(scalar(() = $redis->cli('KEYS', 'batch:*')), 0, 'no lock key left in Redis');

# transaction locks released at COMMIT in one pipeline
$s->query('BEGIN');
$s->query("SELECT count(*) FROM generate_series(1, 40) g WHERE redis_xact_lock_acquire('xbatch:' || g)");
$redis->cli('SCRIPT', 'FLUSH');
$s->query('COMMIT');
is(scalar(() = $redis->cli('KEYS', 'xbatch:*')), 0, 'COMMIT after SCRIPT FLUSH released all 40');

# the worker's renewal batch: 50 watchdog locks, scripts flushed under it
is($s->query("SELECT count(*) FROM generate_series(1, 50) g WHERE redis_lock_acquire('wbatch:' || g)"),
    50, '50 watchdog locks taken');
my $renewals0 = $s->query('SELECT renewals FROM redis_lock_stats');
$redis->cli('SCRIPT', 'FLUSH');
ok(RedisLockTest::wait_until(30, 'two renewal batches after the flush', sub {
    $s->query('SELECT renewals FROM redis_lock_stats') >= $renewals0 + 100 }),
    'the worker keeps renewing after SCRIPT FLUSH');
is($s->query("SELECT count(*) FROM redis_locks WHERE name LIKE 'wbatch:%' AND state = 'held'"),
    50, 'all 50 still held');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'redislock watchdog'"),
    1, 'the worker is still running');
unlike(slurp($node->logfile), qr/terminated by signal/, 'no process crashed');


done_testing();
