# 170_sync_replicas_and_limits.pl — redislock.sync_replicas (WAIT N after an
# acquisition: confirmed with the one replica there is, refused with 55000
# and given back when asking for more replicas than exist or when the
# replica is down) and redislock.max_locks (a full shared table refuses a new
# lock with 53400 before touching Redis; reentry needs no new entry; no entry
# leaks).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $T = 60;

sub info_field
{
	my ($r, $section, $field) = @_;
	my $info = redis_cmd($r, 'INFO', $section);
	return $info =~ /^\Q$field\E:(\S+)/m ? $1 : undef;
}

# --- A. sync_replicas --------------------------------------------------------------------
my $master  = RedisLockTest::Redis->new;
my $replica = RedisLockTest::Redis->new(extra => [ 'replicaof 127.0.0.1 ' . $master->port ]);
until_ok('master sees connected_slaves:1', sub {
	(info_field($master, 'replication', 'connected_slaves') // '') eq '1';
});
until_ok('replica link up', sub {
	(info_field($replica, 'replication', 'master_link_status') // '') eq 'up';
});

my $node = RedisLockTest::node('syncrep', $master);
my $obs  = RedisLockTest::observer($node);
{
	my $s = RedisLockTest::Session->new($node);
	my $id = $s->query('SELECT redis_lock_owner_id()');
	$s->query("SET redislock.command_timeout = '1s'");

	$s->query('SET redislock.sync_replicas = 1');
	my ($v, $err, $st) = $s->try("SELECT redis_lock_acquire('sr:1', '0', '10 min')");
	is($v, 't', 'sync_replicas = 1 with one replica: acquired') or diag($err);
	# WAIT 1 returned, so the replica has it already: no waiting here.
	is(redis_cmd($replica, 'HGET', 'sr:1', $id), '1', 'the replica has the hold when the call returns');
	($v, $err) = $s->try("SELECT redis_lock_acquire('sr:1', '0', '10 min')");
	is($v, 't', 'reentry with sync_replicas = 1') or diag($err);
	is(redis_cmd($replica, 'HGET', 'sr:1', $id), '2', 'the replica has count 2');
	($v, $err) = $s->try("SELECT redis_lock_acquire('sr:wd')");
	is($v, 't', 'watchdog-mode lock with sync_replicas = 1') or diag($err);
	is(redis_cmd($replica, 'HEXISTS', 'sr:wd', $id), 1, 'on the replica too');

	# more replicas than exist
	$s->query('SET redislock.sync_replicas = 2');
	$s->query("SET redislock.command_timeout = '500ms'");
	($v, $err, $st) = $s->try("SELECT redis_lock_acquire('sr:2', '0', '10 min')");
	is($st, '55000', 'sync_replicas = 2 with one replica: 55000') or diag($err);
	like($err // '', qr/Redis lock "sr:2" was not confirmed by 2 replicas/, 'message names lock and count');
	is(redis_cmd($master, 'EXISTS', 'sr:2'), 0, 'sr:2 is NOT left held in Redis');
	is($obs->query("SELECT count(*) FROM redis_locks WHERE name = 'sr:2'"), 0, 'nor in redis_locks');
	ok(!defined $s->query("SELECT redis_lock_fencing_token('sr:2')"), 'no fencing token');
	($v, $err, $st) = $s->try("SELECT redis_lock_acquire('sr:2w')");
	is($st, '55000', 'same for a watchdog-mode lock') or diag($err);
	is(redis_cmd($master, 'EXISTS', 'sr:2w'), 0, 'sr:2w not left held');
	($v, $err, $st) = $s->try("BEGIN; SELECT redis_xact_lock_acquire('sr:2x', '0', '10 min'); COMMIT");
	$s->dbh->do('ROLLBACK');
	is($st, '55000', 'same for a transaction lock') or diag($err);
	is(redis_cmd($master, 'EXISTS', 'sr:2x'), 0, 'sr:2x not left held');

	# a failed reentry gives back only the new hold
	($v, $err, $st) = $s->try("SELECT redis_lock_acquire('sr:1', '0', '10 min')");
	is($st, '55000', 'reentry on sr:1 with sync_replicas = 2 fails') or diag($err);
	is(redis_cmd($master, 'HGET', 'sr:1', $id), '2', 'sr:1 keeps its 2 holds in Redis');
	is($obs->query("SELECT hold_count FROM redis_locks WHERE name = 'sr:1'"), 2, 'and in redis_locks');

	# the replica goes away: sync_replicas = 1 fails, comes back: works
	$s->query('SET redislock.sync_replicas = 1');
	$replica->stop;
	until_ok('master sees connected_slaves:0', sub {
		(info_field($master, 'replication', 'connected_slaves') // '') eq '0';
	});
	($v, $err, $st) = $s->try("SELECT redis_lock_acquire('sr:down', '0', '10 min')");
	is($st, '55000', 'replica down: sync_replicas = 1 fails with 55000') or diag($err);
	is(redis_cmd($master, 'EXISTS', 'sr:down'), 0, 'sr:down not left held');
	$replica->start;
	until_ok('replica back (connected_slaves:1)', sub {
		(info_field($master, 'replication', 'connected_slaves') // '') eq '1'
		  && (info_field($replica, 'replication', 'master_link_status') // '') eq 'up';
	});
	($v, $err) = $s->try("SELECT redis_lock_acquire('sr:down', '0', '10 min')");
	is($v, 't', 'replica back: acquired') or diag($err);
	is(redis_cmd($replica, 'HEXISTS', 'sr:down', $id), 1, 'on the replica');

	$s->query('RESET redislock.sync_replicas');
	is($s->query('SELECT redis_lock_release_all()'), 3, 'release all (sr:1, sr:wd, sr:down)');
	is(redis_cmd($master, 'EXISTS', 'sr:1'), 0, 'sr:1 fully released (both holds)');
	my @left = grep { !/^redisson_lock_token:/ } @{ redis_cmd($master, 'KEYS', '*') };
	is_deeply(\@left, [], 'nothing but fencing counters left on the master');
	$s->close;
}
no_crash_ok($node, 'sync_replicas');
$node->stop('fast');

# --- B. max_locks ------------------------------------------------------------------------
my $redis = RedisLockTest::Redis->new;
my $mnode = RedisLockTest::node('maxlocks', $redis, 'redislock.max_locks' => '16');
my $mobs  = RedisLockTest::observer($mnode);
{
	my $s = RedisLockTest::Session->new($mnode);
	my $o = RedisLockTest::Session->new($mnode);
	is($s->query('SHOW redislock.max_locks'), '16', 'max_locks = 16');
	my $got = 0;
	for my $i (1 .. 16)
	{
		$got++ if ($s->try("SELECT redis_lock_acquire('ml:$i', '0', '10 min')") // '') eq 't';
	}
	is($got, 16, '16 distinct locks taken');
	is($mobs->query('SELECT count(*) FROM redis_locks'), 16, '16 rows in redis_locks');

	for my $try (1 .. 3)
	{
		my ($v, $err, $st) = $s->try("SELECT redis_lock_acquire('ml:17', '0', '10 min')");
		is($st, '53400', "17th lock fails with 53400 (try $try)") or diag($err);
		like($err // '', qr/too many Redis locks|max_locks/, 'message/hint about the table') if $try == 1;
	}
	is(redis_cmd($redis, 'EXISTS', 'ml:17'), 0, 'the 17th is not taken in Redis');
	my ($v, $err, $st) = $s->try("SELECT redis_lock_acquire('ml:17w')");
	is($st, '53400', 'a watchdog-mode 17th fails too') or diag($err);
	is(redis_cmd($redis, 'EXISTS', 'ml:17w'), 0, 'not taken in Redis');
	($v, $err, $st) = $o->try("SELECT redis_lock_acquire('ml:other', '0', '10 min')");
	is($st, '53400', 'another session is refused as well (table shared)') or diag($err);
	is(redis_cmd($redis, 'EXISTS', 'ml:other'), 0, 'not taken in Redis');
	($v, $err) = $s->try("SELECT redis_lock_acquire('ml:1', '0', '10 min')");
	is($v, 't', 'reentry on a held lock still works with a full table') or diag($err);
	is($mobs->query("SELECT hold_count FROM redis_locks WHERE name = 'ml:1'"), 2, 'ml:1 count 2');
	is($s->query("SELECT redis_lock_release('ml:1')"), 't', 'ml:1 back to one hold');

	is($s->query("SELECT redis_lock_release('ml:16')"), 't', 'release ml:16');
	($v, $err) = $o->try("SELECT redis_lock_acquire('ml:other', '0', '10 min')");
	is($v, 't', 'now the other session gets one') or diag($err);
	($v, $err, $st) = $s->try("SELECT redis_lock_acquire('ml:17', '0', '10 min')");
	is($st, '53400', 'and the table is full again (failed attempts leaked no entry)') or diag($err);
	is($o->query("SELECT redis_lock_release('ml:other')"), 't', 'other releases');
	($v, $err) = $s->try("SELECT redis_lock_acquire('ml:17', '0', '10 min')");
	is($v, 't', 'ml:17 now works') or diag($err);
	is(redis_cmd($redis, 'EXISTS', 'ml:17'), 1, 'ml:17 in Redis');

	is($s->query('SELECT redis_lock_release_all()'), 16, 'release all 16');
	is($mobs->query('SELECT count(*) FROM redis_locks'), 0, 'table empty');
	$got = 0;
	for my $i (1 .. 16)
	{
		$got++ if ($o->try("SELECT redis_lock_acquire('mo:$i', '0', '10 min')") // '') eq 't';
	}
	is($got, 16, 'another session can take all 16 entries again');
	is($o->query('SELECT redis_lock_release_all()'), 16, 'and release them');
	$s->close;
	$o->close;
}
no_crash_ok($mnode, 'max_locks');
$mnode->stop('fast');

done_testing();
