# 030_netns_partition.pl — network partition between PostgreSQL and Redis.
#
# Needs the namespace that test/faults/run.sh (root) sets up before prove:
# netns rlf<pid>, veth pair 10.200.0.1/30 (host) <-> 10.200.0.2/30 (netns),
# redis-server inside the namespace on 10.200.0.2:6379 (run as postgres).
# This test runs as postgres and asks run.sh's root loop for
#   blackhole  namespace end of the veth down: packets silently dropped
#              (connects and requests time out)
#   partition  host end down: no route (connects fail at once, requests in
#              flight get no answer)
#   heal       both ends up
# through a FIFO ($REDISLOCK_NETNS_CTL, answers in $REDISLOCK_NETNS_ACK).
# Without that environment (not run by run.sh, or netns not permitted) the
# test is skipped with the reason.
#
# Proves: during a partition every call fails with a clear ERROR
# (08001/08006 naming 10.200.0.2:6379) within connect_timeout +
# command_timeout + slack; the watchdog keeps retrying (renewal_failures
# grows) and its lock is not dropped; a blocked waiter is not pinned
# forever; after healing, calls work again and the held lock is renewed
# again (no manual step); nothing leaks.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../../lib", "$FindBin::RealBin/../../redisson";
use RedisLockTest;
use FakeRedisson;
use FaultLib qw(until_ok no_crash_ok stats timed_call);
use Test::More;
use Time::HiRes qw(time sleep);

plan skip_all => "network namespace not available: $ENV{REDISLOCK_NETNS_SKIP}" if $ENV{REDISLOCK_NETNS_SKIP};
plan skip_all => 'needs the network namespace set up by test/faults/run.sh (REDISLOCK_NETNS_* unset)'
  unless $ENV{REDISLOCK_NETNS_HOST} && $ENV{REDISLOCK_NETNS_CTL};

# With REDISLOCK_FAULT_TLS=1 the same partitions, over TLS: run.sh starts a
# second, TLS-only redis-server in the namespace, with a certificate for
# 10.200.0.2 signed by a throwaway CA.
my $TLS = $ENV{REDISLOCK_FAULT_TLS};
plan skip_all => 'TLS run: run.sh started no TLS redis-server in the namespace'
  if $TLS && !$ENV{REDISLOCK_NETNS_TLS_PORT};
my $HOST = $ENV{REDISLOCK_NETNS_HOST};
my $PORT = $TLS ? $ENV{REDISLOCK_NETNS_TLS_PORT} : $ENV{REDISLOCK_NETNS_PORT} // 6379;
my @TLS_OPT = $TLS ? (tls => { ca_file => $ENV{REDISLOCK_NETNS_TLS_CA} }) : ();
my ($CONNECT_T, $COMMAND_T, $SLACK) = (1, 1, 2.5);
my $BOUND = $CONNECT_T + $COMMAND_T + $SLACK;
my $server = "$HOST:$PORT";

my $seq = 0;
sub ctl
{
	my ($cmd) = @_;
	my $id = $$ * 1000 + ++$seq;
	open my $fh, '>', $ENV{REDISLOCK_NETNS_CTL} or die "ctl fifo: $!";
	print $fh "$cmd $id\n";
	close $fh;
	my $ack = "$ENV{REDISLOCK_NETNS_ACK}/$id";
	RedisLockTest::wait_until(10, "netns ctl $cmd acknowledged", sub { -s $ack })
	  or die "netns control loop did not answer '$cmd'";
	open my $a, '<', $ack; my $r = <$a>; close $a; chomp $r;
	die "netns ctl $cmd failed: $r" unless $r eq 'rc=0';
	return 1;
}
my $partitioned = 0;
END { eval { ctl('heal') } if $partitioned; }

sub rcli { my $c = FakeRedisson::Conn->new(host => $HOST, port => $PORT, timeout => 5, @TLS_OPT); my $v = $c->cmd(@_); $c->close; $v }

rcli('FLUSHALL');
my $node = RedisLockTest::node('netns', undef,
	'redislock.url' => ($TLS ? 'rediss' : 'redis') . "://$HOST:$PORT",
	($TLS ? ('redislock.tls_ca_file' => $ENV{REDISLOCK_NETNS_TLS_CA}) : ()),
	'redislock.connect_timeout' => "${CONNECT_T}s",
	'redislock.command_timeout' => "${COMMAND_T}s",
	'redislock.watchdog_timeout' => '15s');
my $obs = RedisLockTest::observer($node);
my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $c = RedisLockTest::Session->new($node);
is($a->query("SELECT redis_lock_acquire('np:held')"), 't', "A holds np:held over the veth ($server)");
is($b->query("SELECT redis_lock_acquire('np:b', '0', '1 min')"), 't', 'B holds np:b (fixed lease)');
is(rcli('EXISTS', 'np:held'), 1, 'lock hash is in the namespaced Redis');

my @calls = (
	"SELECT redis_lock_acquire('np:x', '0')",
	"SELECT redis_lock_acquire('np:y', '0', '30 s')",
	"SELECT (redis_lock_status('np:held')).locked",
	"SELECT redis_lock_release('np:b')",
	"SELECT redis_lock_acquire('np:b', '0', '1 min')",
	"BEGIN; SELECT redis_xact_lock_acquire('np:z', '0'); COMMIT",
);

sub calls_fail_bounded
{
	my ($mode) = @_;
	for my $sql (@calls)
	{
		my ($v, $err, $code, $dt) = timed_call($b, $sql, 60);
		$b->try('ROLLBACK');
		ok(defined $err && $code =~ /^0800[16]$/ && $err =~ /\Q$server\E/,
			"$mode: '$sql' fails clearly") or diag("got: " . ($err // "value $v") . " [" . ($code // '') . "]");
		cmp_ok($dt, '<=', $BOUND, sprintf("$mode: ... within %.1fs (took %.2fs)", $BOUND, $dt));
	}
}

# --- 1. silent drop ------------------------------------------------------------
my $s0 = stats($obs);
$c->start("SELECT redis_lock_acquire('np:held', '90 s')");
ok(RedisLockTest::wait_for_extension_wait($node, $c->pid, 30), 'C waits for np:held');
ctl('blackhole'); $partitioned = 1;
my $t_part = time();
calls_fail_bounded('blackhole');
until_ok(30, 'watchdog keeps retrying: renewal_failures grows', sub {
	stats($obs)->{renewal_failures} > $s0->{renewal_failures} });
is($obs->query("SELECT state FROM redis_locks WHERE name = 'np:held' AND pid = " . $a->pid), 'held',
	"A's lock still 'held' locally during the partition (not dropped)");
my $wdone = $c->is_done;
diag(sprintf("waiter C %s %.1fs into the partition", $wdone ? 'ended' : 'still waiting', time() - $t_part));
ctl('heal'); $partitioned = 0;
my $t_heal = time();

until_ok(30, 'calls work again after healing', sub {
	my ($v) = $b->try("SELECT redis_lock_acquire('np:x', '0')"); defined $v && $v eq 't' });
$b->query("SELECT redis_lock_release('np:x')");
my $renew0 = $obs->query("SELECT renewed_at FROM redis_locks WHERE name = 'np:held' AND pid = " . $a->pid);
until_ok(30, "A's lock renewed again after healing", sub {
	my $r = $obs->query("SELECT state || ' ' || renewed_at FROM redis_locks WHERE name = 'np:held' AND pid = " . $a->pid);
	defined $r && $r =~ /^held / && $r ne "held $renew0" });
is(stats($obs)->{lost_locks}, $s0->{lost_locks}, 'nothing reported lost (partition shorter than the lease)');
cmp_ok(rcli('PTTL', 'np:held'), '>', 10000, 'lease in Redis refreshed to ~15 s');

# the waiter: ended with an error during the partition, or still waits and
# gets the lock when A releases
is($a->query("SELECT redis_lock_release('np:held')"), 't', 'A releases np:held');
my ($cv, $cerr, $ccode) = $c->finish(30);
isnt($ccode // '', 'TIMEOUT', 'waiter C ended (not pinned)');
if (defined $cerr)
{
	like($ccode, qr/^0800[16]$/, "waiter C failed clearly: $cerr");
}
else
{
	is($cv, 't', 'waiter C got np:held after healing');
	$c->query('SELECT redis_lock_release_all()');
}

# --- 2. no route -----------------------------------------------------------------
ctl('partition'); $partitioned = 1;
calls_fail_bounded('no-route');
ctl('heal'); $partitioned = 0;
until_ok(30, 'calls work again after healing (no-route)', sub {
	my ($v) = $b->try("SELECT redis_lock_acquire('np:x', '0')"); defined $v && $v eq 't' });

# --- 3. partition in the middle of a call (requests in flight) --------------------
$b->query('SELECT redis_lock_release_all()');
{
	# pause Redis by a blackhole while B's call is under way: bounded
	my $t0 = time();
	$b->start("SELECT redis_lock_acquire('np:held', '5 s')");  # free -> quick; then:
	$b->finish(10);
	$a->start("SELECT redis_lock_acquire('np:held', '20 s')");  # waits for B
	ok(RedisLockTest::wait_for_extension_wait($node, $a->pid, 30), 'A waits for B');
	# subscribed, not still connecting: over TLS the handshake takes long
	# enough for the blackhole to fall into it, which fails A's call
	until_ok(30, 'A is subscribed to the unlock channel', sub {
		(rcli('PUBSUB', 'NUMSUB', 'redisson_lock__channel:{np:held}'))->[1] >= 1 });
	ctl('blackhole'); $partitioned = 1;
	my ($v, $err, $code, $dt) = timed_call($b, "SELECT redis_lock_release('np:held')", 60);
	ok(defined $err && $code =~ /^0800[16]$/, 'release during blackhole fails clearly')
	  or diag("got " . ($err // $v));
	cmp_ok($dt, '<=', $BOUND, sprintf('... within %.1fs (%.2fs)', $BOUND, $dt));
	ctl('heal'); $partitioned = 0;
	my ($rv, $rerr) = $b->try('SELECT redis_lock_release_all()');
	ok(!defined $rerr, "after healing, B's next call (release_all) succeeds ($rv): the failed release is settled")
	  or diag("release_all: $rerr");
	my $t1 = time();
	($v, $err) = $a->finish(40);
	is($v, 't', 'A gets np:held once B gave it back') or diag("A: " . ($err // $v // 'undef'));
	cmp_ok(time() - $t1, '<', 10, '... promptly (woken by the unlock)');
	$a->try("SELECT redis_lock_release_all()");
}

# --- 4. a request that timed out must not take effect later ---------------------------
# The request is written into the socket while packets are dropped; the call
# ends with "did not answer within command_timeout" (SQL: not acquired) and
# the extension drops the connection.  If that close() leaves the unsent bytes
# to the kernel (no SO_LINGER 0 / RST), TCP retransmits them once the network
# heals and Redis executes the stale acquire: a lock SQL reported as not taken,
# held for the whole fixed lease by an owner that no longer knows about it.
for my $mode ('blackhole', 'partition')
{
	my $name = "np:stale:$mode";
	is($b->query("SELECT (redis_lock_status('$name')).locked"), 'f', "stale/$mode: B connected, lock free");
	ctl($mode); $partitioned = 1;
	my ($v, $err, $code, $dt) = timed_call($b, "SELECT redis_lock_acquire('$name', '0', '1 hour')", 60);
	like($code // '', qr/^0800[16]$/, "stale/$mode: acquire fails clearly ($code: $err)");
	ctl('heal'); $partitioned = 0;
	# the session's next call (settles whatever it knows about) ...
	$b->try("SELECT (redis_lock_status('np:other')).locked");
	# ... then watch Redis for a while: TCP retransmission backoff after ~1 s
	# of loss is a few seconds
	my $appeared = RedisLockTest::wait_until(8, "(must not happen) $name appears in Redis", sub {
		rcli('EXISTS', $name) == 1 });
	my $detail = $appeared
	  ? "fields " . join(' ', @{ rcli('HGETALL', $name) }) . ", pttl " . rcli('PTTL', $name)
	  . "; B's owner id " . $b->query('SELECT redis_lock_owner_id()')
	  . "; redis_locks rows for B: " . $obs->query("SELECT count(*) FROM redis_locks WHERE pid = " . $b->pid)
	  . "; B's release: " . join(' ', map { $_ // 'undef' } $b->try("SELECT redis_lock_release('$name')"))
	  : '';
	ok(!$appeared, "stale/$mode: a timed-out acquire does not create the lock later")
	  or diag("BUG: $name appeared in Redis after the heal: $detail");
	rcli('DEL', $name);
}

$_->close for $a, $b, $c;
until_ok(40, 'redis_locks empty', sub { $obs->query('SELECT count(*) FROM redis_locks') == 0 });
sub left_keys
{
	my $rc = FakeRedisson::Conn->new(host => $HOST, port => $PORT, @TLS_OPT);
	my @k = grep { !/^redisson_lock_token/ } @{ $rc->cmd('KEYS', 'np:*') };
	return map { "$_ (pttl " . $rc->cmd('PTTL', $_) . ", " . join(' ', @{ $rc->cmd('HGETALL', $_) }) . ")" } @k;
}
my @left = left_keys();
diag("lock keys left right after the sessions closed: @left") if @left;
until_ok(40, 'no lock key left in Redis', sub { !left_keys() });
no_crash_ok($node, 'partition');
$node->stop;
done_testing();
