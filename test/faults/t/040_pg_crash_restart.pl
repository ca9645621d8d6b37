# 040_pg_crash_restart.pl — kill -9 of a PostgreSQL backend (crash-restart of
# the whole server: no session runs its exit cleanup, the watchdog dies too).
#
# Node "crash" holds locks (session lock in watchdog mode, a transaction lock
# in an open transaction, a fair lock); node "peer", on the same Redis, waits
# for them (and a Redisson client finds cr:a busy).  One backend of "crash"
# is killed with SIGKILL.
#
# Proves: nothing renews the dead sessions' locks, so they expire within one
# lease (redislock.watchdog_timeout = 3 s) and the waiters on the other node
# then acquire (bounded: lease + slack); the crashed server comes back with a
# new owner uuid, an empty redis_locks and working locks; no stuck fair
# queue; the Redisson client then gets and releases cr:a.
#
# The Redisson client is the real one (RealRedisson: test/redisson-java's
# driver, the newest version in @RealRedisson::VERSIONS, as in test/t/405);
# a missing driver fails the test.
# Takes about 10 s (two nodes, one Redis, one JVM: 2 s of them its start).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../../lib", "$FindBin::RealBin/../../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;    # only its Redis connection (and fair_queue_len's key name)
use FaultLib qw(until_ok no_crash_ok stats);
use Test::More;
use Time::HiRes qw(time sleep);

my $LEASE = 3;      # seconds, watchdog_timeout
my $SLACK = 3;

my $redis = RedisLockTest::Redis->new;
my %conf = ('redislock.watchdog_timeout' => "${LEASE}s", 'redislock.fair_wait_timeout' => '3s',
	'restart_after_crash' => 'on');
my $crash = RedisLockTest::node('crash', $redis, %conf);
my $peer  = RedisLockTest::node('peer', $redis, %conf);
my $rc = FakeRedisson::Conn->new(port => $redis->port);
my ($JAVA_VERSION) = reverse RealRedisson::versions();
my $java = RealRedisson->new(version => $JAVA_VERSION, port => $redis->port);

my $a = RedisLockTest::Session->new($crash);
my $b = RedisLockTest::Session->new($crash);
my $f = RedisLockTest::Session->new($crash);
my $victim = RedisLockTest::Session->new($crash);
my $old_owner = $a->query('SELECT redis_lock_owner_id()');
is($a->query("SELECT redis_lock_acquire('cr:a')"), 't', 'A holds cr:a (watchdog)');
is($b->query("BEGIN; SELECT redis_xact_lock_acquire('cr:b')"), 't', 'B holds cr:b (xact, open transaction)');
is($f->query("SELECT redis_lock_acquire('cr:f', NULL, NULL, true)"), 't', 'F holds cr:f (fair)');

my @w = map { RedisLockTest::Session->new($peer) } 1 .. 3;
$w[0]->start("SELECT redis_lock_acquire('cr:a', '60 s')");
$w[1]->start("SELECT redis_xact_lock_acquire('cr:b', '60 s')");
$w[2]->start("SELECT redis_lock_acquire('cr:f', '60 s', NULL, true)");
ok(RedisLockTest::wait_for_extension_wait($peer, $_->pid, 30), 'peer waiter ' . $_->pid . ' waits') for @w;
is($java->run('j', 'tryLock', 'plain', 'cr:a', 0, 30000), 'false', 'Redisson client finds cr:a busy');

# let the watchdog renew at least once so the lease is fresh at the crash
my $r0 = RedisLockTest::observer($crash)->query("SELECT renewed_at FROM redis_locks WHERE name = 'cr:a'");
until_ok(10, 'cr:a renewed by the watchdog', sub {
	(RedisLockTest::observer($crash)->query("SELECT renewed_at FROM redis_locks WHERE name = 'cr:a'") // '') ne ($r0 // '') });

my $t_kill = time();
kill 'KILL', $victim->pid;
my %pttl = map { $_ => $rc->cmd('PTTL', $_) } qw(cr:a cr:b cr:f);
diag("pttl right after the kill: " . join(', ', map { "$_=$pttl{$_}" } sort keys %pttl));
for (sort keys %pttl)
{
	cmp_ok($pttl{$_}, '<=', $LEASE * 1000, "$_ expires within one lease (pttl $pttl{$_} ms)");
}

my @got;
for my $i (0 .. 2)
{
	my ($v, $err) = $w[$i]->finish($LEASE + $SLACK + 30);
	push @got, time() - $t_kill;
	is($v, 't', "peer waiter $i acquired after the crash") or diag($err);
	cmp_ok($got[-1], '<=', $LEASE + $SLACK, sprintf("... within lease + slack (%.1fs)", $got[-1]));
}
$w[1]->query('COMMIT');
$w[0]->query("SELECT redis_lock_release('cr:a')");
$w[2]->query("SELECT redis_lock_release('cr:f')");
is(fair_queue_len($rc, 'cr:f'), 0, 'fair queue empty');

# the crashed server comes back by itself
until_ok(60, 'crashed node accepts connections again', sub {
	my $s = eval { RedisLockTest::Session->new($crash) }; $s && $s->query('SELECT 1') == 1 });
like(slurp_log($crash), qr/terminated by signal 9: Killed/, 'the server did crash-restart (SIGKILL logged)');
my $n = RedisLockTest::Session->new($crash);
isnt($n->query('SELECT redis_lock_owner_id()') =~ s/:.*//r, $old_owner =~ s/:.*//r, 'new owner uuid after crash-restart');
is($n->query('SELECT count(*) FROM redis_locks'), 0, 'redis_locks empty after crash-restart');
until_ok(30, 'watchdog running again', sub {
	$n->query("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'redislock watchdog'") == 1 });
is($n->query("SELECT redis_lock_acquire('cr:a', '10 s')"), 't', 'locks work again on the crashed node');
is($n->query("SELECT redis_lock_release('cr:a')"), 't', '... and release');
is($java->run('j', 'tryLock', 'plain', 'cr:a', 0, 30000), 'true', 'Redisson client gets cr:a');
is($java->run('j', 'unlock', 'plain', 'cr:a'), 'null', 'Redisson client releases cr:a');
ok(!$rc->cmd('EXISTS', 'cr:a'), '... and Redis no longer has it');
$_->close for @w, $n;
no_crash_ok($peer, 'peer');
$crash->stop('immediate');
$peer->stop;
done_testing();

sub slurp_log { FaultLib::slurp($_[0]->logfile) }
