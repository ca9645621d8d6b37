# 435_acl.pl — the smallest Redis ACL redislock needs, tested.
#
# The table below is the ACL of docs (least privilege) for a single server:
# commands, key patterns and channel patterns for lock names under a prefix
# ("job:" here). The commands the Lua scripts run are read from lua/*.lua, so
# a new command in a script is a new row. A Redis user with exactly these
# permissions and nothing more runs the core subset: every primitive
# (acquire, release, wait, reentry, fair, force-release, semaphore, permit,
# latch, read-write lock, multi-lock), wake-ups through the listener, renewal
# by the watchdog and the release of a terminated session's locks. Then each
# permission is taken away in turn and the core subset must fail with an
# ERROR that names what to grant (the command, or the key or channel
# patterns). The same on a cluster (one node serving every slot, sharded
# pub/sub) with what a cluster adds, the same cluster with classic pub/sub,
# and a master found through a sentinel with what Sentinel adds (+role).
# Takes about 60 s.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use Test::More;

my $T = 60;
my $P = 'job:';

# --- the ACL table -----------------------------------------------------------------
# [permission, what needs it, 'quiet' when taking it away breaks nothing]
my @acl = (
	[ '+evalsha',      'every operation: the scripts run with EVALSHA' ],
	[ '+script|load',  'loading the scripts when a connection opens and after NOSCRIPT' ],
	[ '+eval',         'a script Redis has forgotten, sent with its body (deadlock detection; on a cluster and with sync_replicas always)' ],
	[ '+subscribe',    'waiting: the listener and a waiting session subscribe to unlock channels' ],
	# Not noticed by the core subset: without it, channels stay subscribed
	# until the connection closes.
	[ '+unsubscribe',  'ending a wait (recommended; see above)', 'quiet' ],
	[ '+publish',      'unlock messages (scripts) and count-down latch announcements' ],
	[ '+pttl',         'deadlock detection: how long a wait edge lives' ],
	[ '+hgetall',      'deadlock detection: reading wait edges' ],
	[ '+del',          'deadlock detection: removing a wait edge; scripts' ],
	[ "~$P*",                      'the lock names themselves' ],
	[ "~{$P*",                     'keys derived from a name: {name}:... (permit timeouts, read-write lock timeouts, call records)' ],
	[ "~redisson_*{$P*",           "Redisson's companion keys (redisson_lock_queue:{name}, redisson_lock_timeout:{name}, redisson_lock_token:{name}) and channels passed as keys" ],
	[ "~redislock_*{$P*",          "redislock's companion keys (redislock_rwlock_writer:{name}, redislock_semaphore_holders:{name}, redislock_released:{name}:...)" ],
	[ '~redislock_waits:*',        'deadlock detection: wait-for edges of this server\'s sessions' ],
	[ "&redisson_*{$P*",           'unlock channels: redisson_lock__channel:{name}[:owner], redisson_rwlock:{name}, redisson_sc:{name}, redisson_countdownlatch__channel__{name}' ],
);
my %in_table = map { $_->[0] => 1 } @acl;
my %script_cmds;
for my $f (glob("$FindBin::RealBin/../../lua/*.lua"))
{
	open my $fh, '<', $f or die "$f: $!";
	local $/;
	my $body = <$fh>;
	$script_cmds{$1}++ while $body =~ /redis\.p?call\('([a-z]+)'/g;
}
ok(scalar(keys %script_cmds) > 10, 'the commands of the scripts are read from lua/');
# Every command the scripts run is on a path the core subset takes.
push @acl, map { [ "+$_", 'run inside the scripts' ] }
  grep { !$in_table{"+$_"} } sort keys %script_cmds;
my @cmd_perms = grep { /^\+/ } map { $_->[0] } @acl;

my $redis = RedisLockTest::Redis->new;

sub set_acl
{
	my (@perms) = @_;
	$redis->cli('ACL', 'SETUSER', 'rl', 'reset', 'on', '>pw', @perms);
}
set_acl(map { $_->[0] } @acl);
diag('ACL: ' . join(' ', $redis->cli('ACL', 'LIST')));

my $node = RedisLockTest::node('acl', undef,
	'redislock.url' => 'redis://rl@127.0.0.1:' . $redis->port,
	'redislock.password' => 'pw',
	'redislock.watchdog_timeout' => '1s',
	'redislock.deadlock_timeout' => '200ms',
	'redislock.command_timeout' => '5s');
my $obs = RedisLockTest::observer($node);
my @cluster_acl;

# --- the core subset -----------------------------------------------------------------
# Each step: [what, code returning an error text or undef]; the session is new.
sub sql_step
{
	my ($what, $sql, $want) = @_;
	return [ $what, sub {
		my ($s) = @_;
		my ($v, $err) = $s->try($sql);
		return $err if defined $err;
		return "$what returned " . ($v // 'NULL') . ", not $want" if ($v // '') ne $want;
		return undef;
	} ];
}

my @core = (
	sql_step('acquire', "SELECT redis_lock_acquire('${P}a', '0', '1 min')", 't'),
	sql_step('reentry', "SELECT redis_lock_acquire('${P}a', '0', '1 min')", 't'),
	sql_step('status', "SELECT hold_count FROM redis_lock_status('${P}a')", '2'),
	sql_step('release', "SELECT redis_lock_release('${P}a') AND redis_lock_release('${P}a')", 't'),
	[ 'fair lock: a waiter that gives up, one woken in turn', sub {
		my ($s) = @_;
		my ($v, $err) = $s->try("SELECT redis_lock_acquire('${P}f', '0', '1 min', true)");
		return $err // "could not take ${P}f" unless ($v // '') eq 't';
		# C waits past deadlock_timeout (publishes its wait-for edge), with B
		# queued behind it, then gives up: its slot comes off B's deadline
		my $c = RedisLockTest::Session->new($node);
		my $b = RedisLockTest::Session->new($node);
		$c->start("SELECT redis_lock_acquire('${P}f', '1500 ms', '1 min', true)");
		eval { RedisLockTest::wait_until($T, 'C queued', sub {
			$c->is_done || $redis->cli('LLEN', "redisson_lock_queue:{${P}f}") == 1 }); };
		$b->start("SELECT redis_lock_acquire('${P}f', '20 s', '1 min', true)");
		eval { RedisLockTest::wait_until($T, 'B queued behind C', sub {
			$b->is_done || $redis->cli('LLEN', "redisson_lock_queue:{${P}f}") == 2 }); };
		my ($cv, $cerr) = eval { $c->finish($T) };
		$cerr //= $@ if $@;
		# leaving the queue is a cleanup step: a refusal there is a WARNING
		my ($warning) = grep { /WARNING:/ } $c->notices;
		$cerr //= $warning;
		$c->close;
		if (defined $cerr && $cerr ne '')
		{
			$b->cancel;
			$b->close;
			return $cerr;
		}
		unless (($cv // '') eq 'f')
		{
			$b->cancel;
			$b->close;
			return "the waiter that gave up got " . ($cv // 'NULL');
		}
		($v, $err) = $s->try("SELECT redis_lock_release('${P}f')");
		my ($got, $berr) = eval { $b->finish($T) };
		$berr //= $@ if $@;
		$b->try('SELECT redis_lock_release_all()');
		$b->close;
		return $err if defined $err;
		return $berr if defined $berr && $berr ne '';
		return "the fair waiter got " . ($got // 'NULL') unless ($got // '') eq 't';
		return undef;
	} ],
	sql_step('xact lock', "SELECT redis_xact_lock_acquire('${P}x', '0', '1 min')", 't'),
	[ 'wait, woken through the listener', sub {
		my ($s) = @_;
		my ($v, $err) = $s->try("SELECT redis_lock_acquire('${P}w', '0', '1 min')");
		return $err // "could not take ${P}w" unless ($v // '') eq 't';
		my $b = RedisLockTest::Session->new($node);
		$b->start("SELECT redis_lock_acquire('${P}w', '20 s', '1 min')");
		my $waiting = eval { RedisLockTest::wait_until($T, 'B waits', sub {
			$b->is_done || $obs->query("SELECT count(*) FROM pg_stat_activity WHERE pid = " . $b->pid
				. " AND wait_event_type = 'Extension'") == 1 }); 1 };
		($v, $err) = $s->try("SELECT redis_lock_release('${P}w')");
		my ($got, $berr) = eval { $b->finish($T) };
		$berr //= $@ if $@;
		$b->try('SELECT redis_lock_release_all()');
		$b->close;
		return $err if defined $err;
		return $berr if defined $berr && $berr ne '';
		return "the waiter got " . ($got // 'NULL') unless ($got // '') eq 't';
		return undef;
	} ],
	sql_step('force-release', "SELECT redis_lock_acquire('${P}g', '0', '1 min') AND redis_lock_force_release('${P}g')", 't'),
	sql_step('semaphore', "SELECT redis_semaphore_try_set_permits('${P}s', 2) IS NOT NULL AND redis_semaphore_acquire('${P}s', 1, '0') AND NOT redis_semaphore_acquire('${P}s', 2, '0') AND redis_semaphore_release('${P}s') AND redis_semaphore_available('${P}s') = 2", 't'),
	sql_step('permit', "SELECT redis_permit_try_set_permits('${P}p', 1) IS NOT NULL AND redis_permit_acquire('${P}p', '0', '1 min') IS NOT NULL AND redis_permit_acquire('${P}p', '0', '1 min') IS NULL AND (SELECT true FROM (SELECT redis_permit_set_permits('${P}p', 2)) x) AND redis_permit_available('${P}p') = 1", 't'),
	sql_step('latch', "SELECT redis_latch_try_set_count('${P}l', 1) IS NOT NULL AND redis_latch_count_down('${P}l') = 0 AND redis_latch_await('${P}l', '1 s')", 't'),
	sql_step('read-write lock', "SELECT redis_read_lock_acquire('${P}rw', '0', '1 min') AND redis_write_lock_acquire('${P}rw', '0', '1 min') AND redis_write_lock_release('${P}rw') AND redis_read_lock_release('${P}rw') AND redis_write_lock_acquire('${P}rw', '0', '1 min') AND redis_write_lock_release('${P}rw')", 't'),
	sql_step('multi-lock', "SELECT redis_lock_acquire_all(ARRAY['${P}m1', '${P}m2'], '0', '1 min') AND redis_lock_release('${P}m1') AND redis_lock_release('${P}m2')", 't'),
	[ 'watchdog renewal', sub {
		my ($s) = @_;
		my ($v, $err) = $s->try("SELECT redis_lock_acquire('${P}wd', '0')");
		return $err // 'could not take it' unless ($v // '') eq 't';
		my $before = $redis->cli('PTTL', "${P}wd");
		# renewed every 1/3 s: after the lease's first second it is still there
		my $ok = eval { RedisLockTest::wait_until($T, 'renewed', sub {
			$obs->query("SELECT count(*) FROM redis_locks WHERE name = '${P}wd' AND renewed_at > acquired_at") == 1 }); 1 };
		my $state = $obs->query("SELECT state FROM redis_locks WHERE name = '${P}wd'") // 'gone';
		($v, $err) = $s->try("SELECT redis_lock_release('${P}wd')");
		return "the watchdog did not renew it (state $state)" unless $ok && $state eq 'held';
		return $err // ($v eq 't' ? undef : 'release said it was not held');
	} ],
	[ 'release of a terminated session', sub {
		my ($s) = @_;
		my $t = RedisLockTest::Session->new($node);
		my ($v, $err) = $t->try("SELECT redis_lock_acquire('${P}t') AND redis_lock_acquire('${P}t2', '0', '10 min')");
		return $err // 'could not take them' unless ($v // '') eq 't';
		$t->terminate;
		my $ok = eval { RedisLockTest::wait_until($T, 'released', sub {
			$redis->cli('EXISTS', "${P}t") + $redis->cli('EXISTS', "${P}t2") == 0 }); 1 };
		return $ok ? undef : 'the locks of the terminated session stay in Redis';
	} ],
);

# Runs the core subset in a new session; returns (what, error) of the first
# step that fails, or () when all work.
sub run_core
{
	my $s = RedisLockTest::Session->new($node);
	for my $step (@core)
	{
		my $err = $step->[1]->($s);
		if (defined $err)
		{
			$s->try('SELECT redis_lock_release_all()');
			$s->close;
			return ($step->[0], $err);
		}
	}
	$s->close;
	return ();
}

my ($step, $err) = run_core();
ok(!defined $step, 'the core subset works as a Redis user with exactly the ACL of the table')
  or diag("$step: $err");

# --- each permission taken away ---------------------------------------------------------
for my $row (@acl)
{
	my $perm = $row->[0];
	set_acl(map { $_->[0] } grep { $_->[0] ne $perm } @acl);
	# every connection of the worker and the listener sees the new ACL, and
	# the scripts must be loaded again
	$redis->cli('CLIENT', 'KILL', 'USER', 'rl');
	$redis->cli('SCRIPT', 'FLUSH');
	$redis->cli('FLUSHALL');
	my ($s2, $e2) = run_core();
	if (($row->[2] // '') eq 'quiet')
	{
		ok(!defined $s2, "without $perm the core subset still works (needed on other paths: $row->[1])") or diag("$s2: $e2");
		next;
	}
	my $name = $perm =~ /^\+(.*)/ ? $1 : undef;
	my $says = $perm =~ /^~/ ? qr/may not access the keys of|ACL SETUSER rl .*\Q$perm\E/
	  : $perm =~ /^&/ ? qr/channel patterns/
	  : qr/(?:"\Q$name\E"|\+\Q$name\E\b|\Q$perm\E)/;
	ok(defined $s2, "without $perm the core subset fails") or next;
	note("without $perm, $s2: $e2");
	like($e2, qr/ERROR:  .*Redis user "rl" may not|refused a command redislock needs|WARNING:  .*HINT:  Grant (?:it|them): ACL SETUSER rl /s,
		"without $perm: $s2 fails saying the Redis user lacks a permission");
	like($e2, $says, "without $perm: the error names it") or diag($e2);
}
set_acl(map { $_->[0] } @acl);
$redis->cli('CLIENT', 'KILL', 'USER', 'rl');
$redis->cli('FLUSHALL');
($step, $err) = run_core();
ok(!defined $step, 'with the whole ACL back, the core subset works again') or diag("$step: $err");
$node->stop;

# --- a cluster (one node serving every slot) with sharded pub/sub -------------------------
# What a cluster adds to the table; everything else as above.
@cluster_acl = (
	[ '+cluster|slots', 'the slot map' ],
	[ '+command|info',  'whether the servers have sharded pub/sub (SPUBLISH)' ],
	[ '+asking',        'a slot in migration', 'quiet' ],
	[ '+ssubscribe',    'waiting, with sharded pub/sub' ],
	[ '+sunsubscribe',  'ending a wait, with sharded pub/sub', 'quiet' ],
	[ '+spublish',      'unlock messages, with sharded pub/sub' ],
);
$redis = RedisLockTest::Redis->new(extra => [
	'cluster-enabled yes', 'cluster-config-file nodes.conf',
	'cluster-port ' . RedisLockTest::free_port() ]);
$redis->cli('CLUSTER', 'ADDSLOTSRANGE', 0, 16383);
until_ok('the one-node cluster is up', sub { $redis->cli('CLUSTER', 'INFO') =~ /cluster_state:ok/ });
set_acl(map { $_->[0] } @acl, @cluster_acl);
$node = RedisLockTest::node('acl_cluster', undef,
	'redislock.url' => 'redis://rl@ignored',
	'redislock.cluster_nodes' => '127.0.0.1:' . $redis->port,
	'redislock.password' => 'pw',
	'redislock.watchdog_timeout' => '1s',
	'redislock.deadlock_timeout' => '200ms',
	'redislock.command_timeout' => '5s');
$obs = RedisLockTest::observer($node);
isnt($redis->cli('CLUSTER', 'KEYSLOT', "${P}m1"), $redis->cli('CLUSTER', 'KEYSLOT', "${P}m2"),
	'the multi-lock spans two slots');
($step, $err) = run_core();
ok(!defined $step, 'cluster: the core subset works as a Redis user with exactly the ACL of both tables')
  or diag("$step: $err");
# Takes each row of @$rows away in turn from an ACL of @$base and @$rows:
# the core subset must fail naming it in the hint, or (quiet) still work.
sub remove_each
{
	my ($mode, $base, $rows) = @_;
	for my $row (@$rows)
	{
		my $perm = $row->[0];
		set_acl(map { $_->[0] } @$base, grep { $_->[0] ne $perm } @$rows);
		$redis->cli('CLIENT', 'KILL', 'USER', 'rl');
		$redis->cli('SCRIPT', 'FLUSH');
		$redis->cli('FLUSHALL');
		my ($s2, $e2) = run_core();
		if (($row->[2] // '') eq 'quiet')
		{
			ok(!defined $s2, "$mode: without $perm the core subset still works (needed for: $row->[1])") or diag("$s2: $e2");
			next;
		}
		ok(defined $s2, "$mode: without $perm the core subset fails") or next;
		note("$mode: without $perm, $s2: $e2");
		my ($name) = $perm =~ /^\+(.*)/;
		like($e2, qr/HINT:  .*\+\Q$name\E\b/, "$mode: without $perm: the hint names it");
	}
}
remove_each('cluster', \@acl, \@cluster_acl);

# --- the same cluster with classic pub/sub -------------------------------------------------
# The sharded rows give way to the classic ones, which the single-server
# table has: taken out of it here, so that each is taken away in turn.
my %classic = map { $_ => 1 } qw(+subscribe +unsubscribe +publish);
my @classic_acl = (
	(grep { $_->[0] !~ /^\+s(?:subscribe|unsubscribe|publish)$/ } @cluster_acl),
	(grep { $classic{ $_->[0] } } @acl),
);
my @acl_no_pubsub = grep { !$classic{ $_->[0] } } @acl;
$node->append_conf('postgresql.conf', "redislock.cluster_pubsub = 'classic'\n");
$node->restart;
$obs = RedisLockTest::observer($node);
set_acl(map { $_->[0] } @acl_no_pubsub, @classic_acl);
$redis->cli('CLIENT', 'KILL', 'USER', 'rl');
$redis->cli('FLUSHALL');
($step, $err) = run_core();
ok(!defined $step, 'cluster, classic pub/sub: the core subset works with the classic rows in place of the sharded ones')
  or diag("$step: $err");
remove_each('cluster, classic pub/sub', \@acl_no_pubsub, \@classic_acl);
$node->stop;
$redis->stop;

# --- Sentinel: a master found through a sentinel ----------------------------------------------
# The sentinel is asked as its default user (redislock.sentinel_password); the
# master's ACL is the single-server table and what Sentinel adds.
my @sentinel_acl = (
	[ '+role', 'checking that the server the sentinels named is still the master' ],
);
$redis = RedisLockTest::Redis->new;
my $sentinel = RedisLockTest::Redis->new(sentinel => 1, requirepass => 'sent-secret', extra => [
	'sentinel monitor m 127.0.0.1 ' . $redis->port . ' 1' ]);
until_ok('the sentinel names the master', sub {
	(join ' ', $sentinel->cli('SENTINEL', 'get-master-addr-by-name', 'm')) eq '127.0.0.1 ' . $redis->port });
set_acl(map { $_->[0] } @acl, @sentinel_acl);
$node = RedisLockTest::node('acl_sentinel', undef,
	'redislock.url' => 'redis://rl@127.0.0.1:' . $redis->port,
	'redislock.password' => 'pw',
	'redislock.sentinels' => '127.0.0.1:' . $sentinel->port,
	'redislock.sentinel_master' => 'm',
	'redislock.sentinel_password' => 'sent-secret',
	'redislock.watchdog_timeout' => '1s',
	'redislock.deadlock_timeout' => '200ms',
	'redislock.command_timeout' => '5s');
$obs = RedisLockTest::observer($node);
($step, $err) = run_core();
ok(!defined $step, 'sentinel: the core subset works as a Redis user with the single-server ACL and +role')
  or diag("$step: $err");
remove_each('sentinel', \@acl, \@sentinel_acl);
$node->stop;

done_testing;
