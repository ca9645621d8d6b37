# Self-test of test/lib/RedisLockTest.pm: needs redis-server and PostgreSQL,
# but not the redislock extension (no preload, no CREATE EXTENSION), so the
# harness can be checked before / independently of the C code.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time);
use RedisLockTest;

# --- Redis ---------------------------------------------------------------
my $r = RedisLockTest::Redis->new(appendonly => 1);
like($r->port, qr/^\d+$/, 'redis has a port');
is($r->url, 'redis://127.0.0.1:' . $r->port, 'url');
is($r->cli('PING'), 'PONG', 'PING answers');
is($r->cli('SET', 'harness:k', 'v1'), 'OK', 'SET');
my @lines = $r->cli('HSET', 'harness:h', 'a', '1', 'b', '2');
$r->cli('HSET', 'harness:h', 'c', '3');
my @hg = $r->cli('HGETALL', 'harness:h');
is(scalar(@hg), 6, 'list context gives one element per line');

my $old_pid = $r->pid;
$r->restart;
isnt($r->pid, $old_pid, 'restart gives a new process');
is($r->cli('PING'), 'PONG', 'PING after restart');
is($r->cli('GET', 'harness:k'), 'v1', 'AOF kept data over restart');

$r->cli('SET', 'harness:k2', 'v2');
$r->kill9;
ok(!$r->ping, 'no PING after kill9');
isnt($r->last_cli_status, 0, 'redis-cli fails while redis is down');
$r->start;
is($r->cli('GET', 'harness:k2'), 'v2', 'appendfsync always kept data over kill9');

my $rp = RedisLockTest::Redis->new(requirepass => 'pw', extra => ['maxmemory 10mb']);
is($rp->cli('PING'), 'PONG', 'cli authenticates with requirepass');
is($rp->cli('CONFIG', 'GET', 'maxmemory'), "maxmemory\n10485760", 'extra config applied');
my $free = RedisLockTest::free_port();
ok($free >= 61000 && $free < 65000 && $free != $r->port && $free != $rp->port, 'free_port');

# --- PostgreSQL node (without the extension) -------------------------------
my $node = RedisLockTest::node('harness', $r,
	preload          => 0,
	create_extension => 0,
	'harness.note' => 'x y\'z');
my $conf = PostgreSQL::Test::Utils::slurp_file($node->data_dir . '/postgresql.conf');
like($conf, qr/^redislock\.url = 'redis:\/\/127\.0\.0\.1:\d+'$/m, 'url in postgresql.conf');
unlike($conf, qr/^shared_preload_libraries = 'redislock'/m, 'preload => 0 honoured');
is($node->safe_psql('postgres', 'SHOW harness.note'), "x y'z", 'extra conf quoted');

my $s1 = RedisLockTest::Session->new($node);
my $s2 = RedisLockTest::Session->new($node);
like($s1->pid, qr/^\d+$/, 'session pid');
isnt($s1->pid, $s2->pid, 'two backends');
is($s1->query('SELECT 40 + 2'), 42, 'query returns first column');
is($s1->query('SELECT true'), 't', 'booleans as t/f');
is($s1->query('SELECT NULL'), undef, 'NULL is undef');
is($s1->query('SET work_mem = 1000; SELECT 7'), 7, 'several statements');
my ($v, $err, $state) = $s1->try('SELECT 1/0');
is($v, undef, 'try: no value on error');
like($err, qr/division by zero/, 'try: error text');
is($state, '22012', 'try: sqlstate');
ok(!defined eval { $s1->query('SELECT nope'); 1 }, 'query dies on error');
like($@, qr/nope/, 'query error text');

$s1->query(q{DO $$BEGIN RAISE WARNING 'hello %', 1; END$$});
my @n = $s1->notices;
ok((grep { /hello 1/ } @n), 'warnings collected') or diag explain \@n;

# async: finish
ok($s2->start('SELECT pg_sleep(0.3), 5'), 'start');
ok(!$s2->is_done, 'not done at once');
($v, $err) = $s2->finish(10);
is($err, undef, 'async finished without error');
ok(defined $v, 'async value (first column of pg_sleep is void, shown as empty)');

ok($s2->start('SELECT 1/0'), 'start of a failing query');
($v, $err, $state) = $s2->finish(10);
is($state, '22012', 'async error sqlstate');

# async: a waiting backend seen in pg_stat_activity, then cancelled
ok($s2->start('SELECT pg_sleep(60)'), 'start a long query');
ok(RedisLockTest::wait_until(10, 's2 sleeping', sub {
	($s1->query("SELECT wait_event FROM pg_stat_activity WHERE pid = " . $s2->pid) // '') eq 'PgSleep'
}), 'wait_until sees the sleep');
ok(!RedisLockTest::wait_for_extension_wait($node, $s2->pid, 0.3),
	'wait_for_extension_wait: pg_sleep is not an Extension wait (times out)');
($v, $err) = $s2->finish(0.2);
like($err, qr/^timeout/, 'finish is bounded');
my $t0 = time();
($v, $err, $state) = $s2->cancel(10);
is($state, '57014', 'cancel: query_canceled');
ok(time() - $t0 < 10, 'cancel returned promptly');
is($s2->query('SELECT 3'), 3, 'session usable after cancel');

ok(!RedisLockTest::wait_until(0.2, 'something false (expected timeout)', sub { 0 }),
	'wait_until returns 0 on timeout');

# terminate
my $s3 = RedisLockTest::Session->new($node);
ok($s3->terminate(10), 'terminate ends the backend');
$s3->close;

# close must not wait for a running query, even on a backend that does not
# react at all (SIGSTOPped here).
my $s4 = RedisLockTest::Session->new($node);
$s4->start('SELECT pg_sleep(60)');
my $s4pid = $s4->pid;
kill 'STOP', $s4pid;
$t0 = time();
$s4->close;
my $took = time() - $t0;
kill 'CONT', $s4pid;
ok($took < 5, sprintf('close with a running async query returns at once (%.2fs)', $took));
$s1->query("SELECT pg_terminate_backend($s4pid)");

$s1->close;
$s2->close;
$node->stop;
$rp->stop;
ok(!$rp->pid, 'stopped redis has no pid');
done_testing();
