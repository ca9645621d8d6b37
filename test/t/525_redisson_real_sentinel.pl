# 525_redisson_real_sentinel.pl — the real Redisson client (every version in
# @RealRedisson::VERSIONS) and SQL sessions on one Redis Sentinel setup
# (1 master, 1 replica, 3 sentinels on loopback; both sides find the master
# through the sentinels: redislock.sentinels, Redisson's useSentinelServers):
#   exclusion  SQL holds, Java's tryLock(0) fails; Java holds, SQL's
#              redis_lock_acquire(name, '0') is false;
#   wake       a SQL waiter wakes when a Java holder unlocks and a Java waiter
#              when a SQL holder releases, every hold on a 10-minute lease, so
#              only the unlock message explains a wake within $T.  Redisson
#              may subscribe on the replica (subscriptionMode SLAVE, older
#              versions' default): subscriptions are counted on both servers;
#   failover   once, with the newest version: a SQL session holds a lock on
#              the watchdog (3 s; confirmed by the replica: sync_replicas = 1)
#              while SENTINEL FAILOVER promotes the replica.  Afterwards both
#              sides reach the new master: a fresh SQL hold there makes Java's
#              tryLock(0) fail, and once SQL releases Java gets it there; then
#              the wake check again, on the new master.  The old master
#              takes writes until the sentinels demote it (about 10 s): in
#              that window redislock must already use the new one, as
#              Redisson does (the listener hears +switch-master): a SQL
#              session's open connection does not take a lock there that
#              Java holds on the new one (failover-window), and the watchdog
#              hold survives on the new master (failover-sql-hold).
# One PostgreSQL node; one JVM per version, started and closed in turn.
# Takes about 2 min for the eight versions (126 s on 2 busy cores; a JVM
# start is most of each version's 11 s, the failover about 15 s).
# The drivers are built by test/redisson-java/build.sh (see its README).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;
use Test::More;

my $T    = 60;         # bound for a wake; far below the lease
my $LONG = 600_000;    # 10-minute leases, ms
my $M    = 'm';        # the sentinels' name for the master

my $master  = RedisLockTest::Redis->new;
my $replica = RedisLockTest::Redis->new(extra => [ 'replicaof 127.0.0.1 ' . $master->port ]);
until_ok('the replica is in sync', sub {
	$replica->cli('INFO', 'replication') =~ /master_link_status:up/ });
my @sentinels = map {
	RedisLockTest::Redis->new(sentinel => 1, extra => [
		"sentinel monitor $M 127.0.0.1 " . $master->port . ' 2',
		"sentinel down-after-milliseconds $M 1000",
		"sentinel failover-timeout $M 4000",
		"sentinel parallel-syncs $M 1",
	])
} 1 .. 3;
until_ok('the sentinels see each other and the replica', sub {
	my $m = join ' ', $sentinels[0]->cli('SENTINEL', 'master', $M);
	$m =~ /num-other-sentinels\s+2\b/ && $m =~ /num-slaves\s+1\b/
});

my $list = join ',', map { '127.0.0.1:' . $_->port } @sentinels;
my $urls = join ',', map { 'redis://127.0.0.1:' . $_->port } @sentinels;
my $node = RedisLockTest::node('realsentinel', $master,
	'redislock.sentinels'       => $list,
	'redislock.sentinel_master' => $M,
	'redislock.watchdog_timeout' => '3s',
	'redislock.command_timeout' => '15s');

my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $c = RedisLockTest::Session->new($node);    # sync_replicas = 1 in the failover

# Subscribers of $chan on the master and the replica (whichever is which).
sub subs
{
	my ($chan) = @_;
	my $n = 0;
	$n += ($_->cli('PUBSUB', 'NUMSUB', $chan))[1] // 0 for $master, $replica;
	return $n;
}

my %record;    # version -> check -> pass | FAIL

sub check
{
	my ($j, $name, $body) = @_;
	my $v = $j->version;
	my $ok = subtest("Redisson $v: $name" => sub {
		eval { $body->($j, $v); 1 } or fail("no error: $@");
		# whatever happened, the sessions end idle and hold nothing
		eval {
			for my $s ($a, $b, $c)
			{
				$s->cancel if $s->{sth_async};
				$s->query('SELECT redis_lock_release_all()');
			}
			1;
		} or fail("the SQL sessions are idle again: $@");
	});
	$record{$v}{$name} = $ok ? 'pass' : 'FAIL';
	return $ok;
}

sub exclusion_check
{
	my ($j, $v) = @_;
	my $name = "realst:$v:excl";
	my $l = sql_literal($name);
	is($a->query("SELECT redis_lock_acquire($l, '0', '10 min')"), 't', 'SQL holds');
	is($j->run('t', 'tryLock', 'plain', $name, 0, $LONG), 'false', "Java's tryLock(0) fails while SQL holds");
	is($a->query("SELECT redis_lock_release($l)"), 't', 'SQL releases');
	is($j->run('t', 'tryLock', 'plain', $name, 0, $LONG), 'true', 'Java holds');
	is($master->cli('HGET', $name, $j->owner('t')), '1', 'the hash on the master holds the Java owner');
	is($b->query("SELECT redis_lock_acquire($l, '0')"), 'f', "SQL's acquire with wait 0 is false while Java holds");
	is($j->run('t', 'unlock', 'plain', $name), 'null', 'Java unlocks');
	is($master->cli('EXISTS', $name), '0', 'lock gone');
}

sub wake_check
{
	my ($j, $v) = @_;
	my $name = "realst:$v:wake";
	my $l = sql_literal($name);
	my $chan = FakeRedisson::channel($name);

	# Java holds, SQL waits, Java unlocks
	is($j->run('h', 'lock', 'plain', $name, $LONG), 'null', 'Java holds (10 min lease)');
	$a->start("SELECT redis_lock_acquire($l, NULL, '10 min')");
	waits_ok($a, 'SQL waiter');
	until_ok("SQL waiter subscribed to $chan", sub { subs($chan) >= 1 });
	ok(!$a->is_done, 'SQL waiter still waits while Java holds');
	is($j->run('h', 'unlock', 'plain', $name), 'null', 'Java unlocks');
	my ($val, $err) = $a->finish($T);
	is($val, 't', "SQL waiter woken within $T s by the Java unlock") or diag($err);
	$a->cancel if $a->{sth_async};
	$a->query("SELECT redis_lock_release($l)");

	# SQL holds, Java waits, SQL releases
	is($a->query("SELECT redis_lock_acquire($l, '0', '10 min')"), 't', 'SQL holds (10 min lease)');
	until_ok("nobody subscribed to $chan yet", sub { subs($chan) == 0 });
	$j->start('w', 'w', 'lock', 'plain', $name, $LONG);
	until_ok("Java waiter subscribed to $chan", sub { subs($chan) >= 1 });
	is($j->poll('w'), undef, 'Java waiter still waits');
	is($a->query("SELECT redis_lock_release($l)"), 't', 'SQL releases');
	my ($st, $r) = $j->result('w', $T);
	is($st, 'ok', "Java waiter woken within $T s by the SQL release") or diag($r // 'no result');
	is($master->cli('HGET', $name, $j->owner('w')), '1', 'the hash holds the Java waiter');
	is($j->run('w', 'unlock', 'plain', $name), 'null', 'Java unlocks');
}

# SENTINEL FAILOVER while a SQL session holds a lock on the watchdog (3 s),
# confirmed by the replica; then both sides find the new master and exclude
# each other there.  Swaps $master and $replica.
sub failover_check
{
	my ($j, $v) = @_;
	my ($sqlheld, $after) = map { "realst:$v:failover:$_" } qw(sql after);
	my ($sl, $al) = map { sql_literal($_) } $sqlheld, $after;
	my $owner = $a->query('SELECT redis_lock_owner_id()');
	$a->query('SET redislock.sync_replicas = 1');
	is($a->query("SELECT redis_lock_acquire($sl)"), 't', 'SQL holds (watchdog), confirmed by the replica');
	$a->query('RESET redislock.sync_replicas');
	is($replica->cli('HEXISTS', $sqlheld, $owner), '1', 'the replica has the SQL hold');
	is($j->run('t', 'tryLock', 'plain', $sqlheld, 0, $LONG), 'false', "before: Java's tryLock(0) fails on the SQL hold");
	# C's connection to the old master is open before the failover.
	$c->query('SET redislock.sync_replicas = 1');
	is($c->query("SELECT redis_lock_acquire($al, '0', '10 min')") . $c->query("SELECT redis_lock_release($al)"),
		'tt', 'C (sync_replicas = 1) takes and gives back a lock');

	is(scalar $sentinels[0]->cli('SENTINEL', 'FAILOVER', $M), 'OK', 'SENTINEL FAILOVER');
	until_ok('the sentinels name the replica as master', sub {
		(($sentinels[$_]->cli('SENTINEL', 'get-master-addr-by-name', $M))[1] // '') eq $replica->port
		  or return 0 for 0 .. $#sentinels;
		1;
	});
	# The old master takes writes until the sentinels turn it into a
	# replica, some seconds later.  In that window a SQL session's open
	# connection must go to the new master, as Redisson does: the
	# listener's +switch-master makes it reconnect.
	my ($old, $new) = ($master, $replica);
	my ($probe, $window, $synced) = map { "realst:$v:failover:$_" } qw(probe window synced);
	until_ok('Java writes to the new master', sub {
		my ($r) = $j->try_run('t', 'tryLock', 'plain', $probe, 0, $LONG);
		return 0 unless ($r // '') eq 'true';
		my $there = $new->cli('EXISTS', $probe) eq '1';
		$j->try_run('t', 'unlock', 'plain', $probe);
		return $there;
	}, $T);
	my $sqlw = $b->query('SELECT redis_lock_acquire(' . sql_literal($window) . ", '0', '10 min')");
	my ($javaw, $jerr) = $j->try_run('t', 'tryLock', 'plain', $window, 0, $LONG);
	$javaw //= "error: $jerr";
	# With sync_replicas = 1 (docs/deployment.md) the old master, which has
	# no replica now, cannot confirm: the call waits, and ends refused or
	# with an error, never holding what Java holds.
	is($j->run('t', 'tryLock', 'plain', $synced, 0, $LONG), 'true', "Java holds $synced on the new master");
	$c->start('SELECT redis_lock_acquire(' . sql_literal($synced) . ", '0', '10 min')");
	my $undemoted = $old->cli('INFO', 'replication') =~ /role:master/;
	SKIP:
	{
		skip('the old master was demoted before both sides had asked', 1) unless $undemoted;
		my $ok = ok(!($sqlw eq 't' && $javaw eq 'true'),
			"before the old master is demoted, not both sides get $window (SQL: $sqlw, Java: $javaw)");
		$record{$v}{'failover-window'} = $ok ? 'pass' : 'FAIL';
	}
	$j->try_run('t', 'unlock', 'plain', $window) if $javaw eq 'true';
	until_ok('the old master is a replica now', sub {
		$master->cli('INFO', 'replication') =~ /role:slave/ });
	($master, $replica) = ($replica, $master);
	my ($cv, $cerr, $cstate) = $c->finish($T);
	ok(defined $cv ? $cv ne 't' : $cstate ne 'TIMEOUT',
		"with sync_replicas = 1, SQL does not get $synced while Java holds it, within $T s ("
		  . ($cv // "error $cstate: $cerr") . ')');
	is($j->run('t', 'unlock', 'plain', $synced), 'null', "Java unlocks $synced");

	# The SQL hold: the watchdog renewed it on the new master.
	my $r0 = lock_stats($a)->{renewals};
	until_ok('the SQL watchdog has renewed twice or found its hold lost', sub {
		lock_stats($a)->{renewals} >= $r0 + 2
		  || $a->query("SELECT state FROM redis_locks WHERE name = $sl") ne 'held'
	});
	{
		my $ok = is($a->query("SELECT state FROM redis_locks WHERE name = $sl"), 'held', 'the SQL hold survives the failover');
		$ok &= is($master->cli('HEXISTS', $sqlheld, $owner), '1', '... it is on the new master');
		$ok &= is($b->query("SELECT redis_lock_acquire($sl, '0')"), 'f', '... and another SQL session is refused');
		$record{$v}{'failover-sql-hold'} = $ok ? 'pass' : 'FAIL';
	}

	# Exclusion on the new master, both ways.  Java may need a few tries
	# (its own retries end in an error) if it has not followed the switch
	# yet; the first answer it gives must be false.
	is($a->query("SELECT redis_lock_acquire($al, '0', '10 min')"), 't', 'SQL holds a fresh lock');
	is($master->cli('HEXISTS', $after, $owner), '1', '... on the new master');
	my $got;
	until_ok('Java answers tryLock(0) after the failover', sub {
		my ($r, $e) = $j->try_run('t', 'tryLock', 'plain', $after, 0, $LONG);
		note("tryLock: $e") if defined $e;
		$got = $r;
		defined $r;
	}, $T);
	is($got, 'false', "Java's tryLock(0) fails while SQL holds");
	is($a->query("SELECT redis_lock_release($al)"), 't', 'SQL releases');
	is($master->cli('EXISTS', $after), '0', '... gone from the new master');
	is($j->run('t', 'tryLock', 'plain', $after, 0, $LONG), 'true', 'Java gets it');
	is($master->cli('HGET', $after, $j->owner('t')), '1', '... on the new master');
	is($b->query("SELECT redis_lock_acquire($al, '0')"), 'f', 'SQL is refused while Java holds');
	is($j->run('t', 'unlock', 'plain', $after), 'null', 'Java unlocks');
}

my $newest;
for my $v (RealRedisson::versions())
{
	$newest = $v if !defined $newest || RealRedisson::version_cmp($v, $newest) > 0;
}
for my $v (RealRedisson::usable_versions(sub { $record{$_[0]}{driver} = 'FAIL' }))
{
	my $j = eval { RealRedisson->new(version => $v, mode => [ 'sentinel', $M, $urls ], ) };
	if (!$j)
	{
		fail("Redisson $v: the client starts and connects through the sentinels");
		diag($@);
		$record{$v}{driver} = 'FAIL';
		next;
	}
	note("Redisson $v: client id " . $j->id . ", log " . $j->logfile);
	check($j, 'exclusion', \&exclusion_check);
	check($j, 'wake', \&wake_check);
	if ($v eq $newest)
	{
		check($j, 'failover', \&failover_check);
		# wake-ups both ways on the new topology (resubscribed)
		check($j, 'wake-after-failover', \&wake_check);
	}
	$j->quit;
}

my @cols = qw(exclusion wake failover failover-window failover-sql-hold wake-after-failover);
my $table = join("\t", 'version', @cols) . "\n";
for my $v (RealRedisson::versions())
{
	$table .= join("\t", $v, map { $record{$v}{$_} // ($record{$v}{driver} ? 'FAIL' : '-') }
		@cols) . "\n";
}
diag("real Redisson through Redis Sentinel, per version:\n$table");
if (open my $fh, '>', "$PostgreSQL::Test::Utils::log_path/525_redisson_real_sentinel.tsv")
{
	print $fh $table;
	close $fh;
}

$a->close;
$b->close;
$c->close;
no_crash_ok($node, 'real Redisson through Redis Sentinel');
done_testing();
