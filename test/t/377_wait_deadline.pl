# 377_wait_deadline.pl — a wait ends at its wait time whatever the server
# does.  Redis is stopped (SIGSTOP) with command_timeout at its default 5 s;
# a session then calls, with wait => '2 s', every function of the catalog
# that waits (a function the table below lacks fails the test).  Its first
# attempt is in flight when the wait's deadline comes: the call must return
# what a wait that ran out returns (false, NULL) while Redis is still
# stopped, not the command_timeout ERROR a call without a wait gets.  The
# order of events is the check, not the clock: Redis is resumed (SIGCONT)
# only once the result is in.
#
# Redis may then run the request that was cut off and grant it: the call
# said "not taken", so redislock must give it back — within a bounded wait
# no field of the waiter is left in the lock's hash, and another session
# can take the resource.
#
# Then the same with wait => NULL, ended by lock_timeout (55P03) and by
# statement_timeout (57014); and with Redlock over 3 masters, two of them
# stopped, for the exclusive lock.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $T = 30;    # bound on any one call: far past command_timeout

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('waitdeadline', $redis,
	'redislock.deadlock_timeout' => '500ms');
my $rc = FakeRedisson::Conn->new(port => $redis->port);

# function => [ its call with wait => '2 s' ($W) on resource $n, what it
#   returns when not taken, the resource's lock hash (undef: none), another
#   session's taking of it (returns true when free), that one's release ]
my $W = q{'2 s'};
my $L = q{'10 min'};
my %CASES = (
	redis_lock_acquire => [ "SELECT redis_lock_acquire('%s', $W, $L)", 'f', '%s',
		"SELECT redis_lock_acquire('%s', '0')", "SELECT redis_lock_release('%s')" ],
	'redis_lock_acquire fair' => [ "SELECT redis_lock_acquire('%s', $W, $L, true)", 'f', '%s',
		"SELECT redis_lock_acquire('%s', '0')", "SELECT redis_lock_release('%s')" ],
	redis_xact_lock_acquire => [ "SELECT redis_xact_lock_acquire('%s', $W, $L)", 'f', '%s',
		"SELECT redis_lock_acquire('%s', '0')", "SELECT redis_lock_release('%s')" ],
	redis_read_lock_acquire => [ "SELECT redis_read_lock_acquire('%s', $W, $L)", 'f', '%s',
		"SELECT redis_write_lock_acquire('%s', '0')", "SELECT redis_write_lock_release('%s')" ],
	redis_write_lock_acquire => [ "SELECT redis_write_lock_acquire('%s', $W, $L)", 'f', '%s',
		"SELECT redis_write_lock_acquire('%s', '0')", "SELECT redis_write_lock_release('%s')" ],
	redis_xact_read_lock_acquire => [ "SELECT redis_xact_read_lock_acquire('%s', $W, $L)", 'f', '%s',
		"SELECT redis_write_lock_acquire('%s', '0')", "SELECT redis_write_lock_release('%s')" ],
	redis_xact_write_lock_acquire => [ "SELECT redis_xact_write_lock_acquire('%s', $W, $L)", 'f', '%s',
		"SELECT redis_write_lock_acquire('%s', '0')", "SELECT redis_write_lock_release('%s')" ],
	redis_lock_acquire_all => [ "SELECT redis_lock_acquire_all(ARRAY['%s', '%s:2'], $W, $L)", 'f', '%s',
		"SELECT redis_lock_acquire_all(ARRAY['%s', '%s:2'], '0')",
		"SELECT redis_lock_release('%s') AND redis_lock_release('%s:2')" ],
	redis_xact_lock_acquire_all => [ "SELECT redis_xact_lock_acquire_all(ARRAY['%s', '%s:2'], $W, $L)", 'f', '%s',
		"SELECT redis_lock_acquire_all(ARRAY['%s', '%s:2'], '0')",
		"SELECT redis_lock_release('%s') AND redis_lock_release('%s:2')" ],
	redis_semaphore_acquire => [ "SELECT redis_semaphore_acquire('%s', 1, $W)", 'f', undef,
		"SELECT redis_semaphore_acquire('%s', 1, '0')", "SELECT redis_semaphore_release('%s')" ],
	redis_xact_semaphore_acquire => [ "SELECT redis_xact_semaphore_acquire('%s', 1, $W)", 'f', undef,
		"SELECT redis_semaphore_acquire('%s', 1, '0')", "SELECT redis_semaphore_release('%s')" ],
	redis_permit_acquire => [ "SELECT redis_permit_acquire('%s', $W, $L)", undef, undef,
		"SELECT redis_permit_acquire('%s', '0') IS NOT NULL", undef ],
	redis_xact_permit_acquire => [ "SELECT redis_xact_permit_acquire('%s', $W, $L)", undef, undef,
		"SELECT redis_permit_acquire('%s', '0') IS NOT NULL", undef ],
	redis_latch_await => [ "SELECT redis_latch_await('%s', $W)", 'f', undef, undef, undef ],
);

my $obs = RedisLockTest::observer($node);
my @catalog = split /\n/, $obs->query(q{SELECT string_agg(DISTINCT p.proname, E'\n' ORDER BY p.proname)
	FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
	JOIN pg_extension e ON d.refobjid = e.oid AND e.extname = 'redislock'
	WHERE 'wait' = ANY (p.proargnames)});
ok(@catalog >= 10, 'the catalog lists the functions that wait');
ok(exists $CASES{$_}, "the table has $_") for @catalog;

# Fills every %s of a template with $n.
sub fill { my ($t, $n) = @_; (my $s = $t) =~ s/%s/$n/g; return $s; }

# The fields of $owner (an owner id) in lock hash $key.
sub fields_of
{
	my ($key, $owner) = @_;
	my $h = $rc->cmd('HGETALL', $key);
	my @f;
	for (my $i = 0; $i < @$h; $i += 2) { push @f, $h->[$i] if index($h->[$i], $owner) == 0; }
	return @f;
}

# One case: $s calls $sql (in a transaction for the xact ones) while the
# Redis servers of @paused are stopped.  Returns (value, err, sqlstate).
sub call_while_stopped
{
	my ($s, $sql, $xact, @paused) = @_;
	$s->query('BEGIN') if $xact;
	$_->pause for @paused;
	$s->start($sql);
	my ($v, $err, $st) = $s->finish($T);
	ok(kill(0, $_->{pid}) && ((RedisLockTest::slurp("/proc/$_->{pid}/stat") =~ /^\d+ \(.*?\) (\S)/)[0] // '') eq 'T',
		'Redis is still stopped when the call has returned') for @paused;
	$_->resume for @paused;
	if (defined $st && $st eq 'TIMEOUT')
	{
		fail("still running after ${T}s: $sql");
		$s->cancel($T);
	}
	$s->query('ROLLBACK') if $xact;
	return ($v, $err, $st);
}

# After the call said "not taken": nothing of $owner is left, another
# session takes the resource.
sub not_left_held
{
	my ($case, $n, $owner, $other) = @_;
	my (undef, undef, $hash, $take, $release) = @{ $CASES{$case} };
	if (defined $hash)
	{
		for my $key (fill($hash, $n), $case =~ /_all$/ ? fill($hash, $n) . ':2' : ())
		{
			until_ok("$case: no field of the waiter left in $key",
				sub { fields_of($key, $owner) == 0 });
		}
	}
	return unless defined $take;
	until_ok("$case: another session takes what the waiter was refused",
		sub { $other->query(fill($take, $n)) eq 't' });
	is($other->query(fill($release, $n)), 't', "$case: ... and gives it back") if defined $release;
}

my $w = RedisLockTest::Session->new($node);
my $o = RedisLockTest::Session->new($node);
my $owner = $w->query('SELECT redis_lock_owner_id()');
$owner =~ s/:\d+$//;    # the session's id; a field is "<id>:<thread>", writers add ":write"

my $i = 0;
for my $case (sort keys %CASES)
{
	my ($call, $none) = @{ $CASES{$case} };
	my $n = 'wd:' . $i++;
	$o->query("SELECT redis_semaphore_try_set_permits('$n', 1)") if $case =~ /semaphore/;
	$o->query("SELECT redis_permit_try_set_permits('$n', 1)") if $case =~ /permit/;
	$o->query("SELECT redis_latch_try_set_count('$n', 1)") if $case =~ /latch/;
	# the waiter's command connection is open: the attempt itself is cut off
	is($w->query("SELECT redis_lock_acquire('wd:warm', '0', $L) AND redis_lock_release('wd:warm')"), 't',
		"$case: the waiter talks to Redis");

	my ($v, $err, $st) = call_while_stopped($w, fill($call, $n), ($case =~ /xact/ ? 1 : 0), $redis);
	is($st, undef, "$case: the wait ends without an ERROR while Redis is stopped")
	  or diag($err);
	is($v, $none, "$case: it returns what a wait that ran out returns");
	not_left_held($case, $n, $owner, $o);
}

# --- wait => NULL: lock_timeout and statement_timeout end it -------------------------
for my $t ([ 'lock_timeout', '55P03' ], [ 'statement_timeout', '57014' ])
{
	my ($guc, $code) = @$t;
	my $n = "wd:$guc";
	is($w->query("SELECT redis_lock_acquire('wd:warm', '0', $L) AND redis_lock_release('wd:warm')"), 't',
		"$guc: the waiter talks to Redis");
	$w->query("SET $guc = '2s'");
	my (undef, $err, $st) = call_while_stopped($w, "SELECT redis_lock_acquire('$n', NULL, $L)", 0, $redis);
	$w->query("RESET $guc");
	is($st, $code, "$guc: the wait ends with its own SQLSTATE while Redis is stopped")
	  or diag($err);
	not_left_held('redis_lock_acquire', $n, $owner, $o);
}
$_->close for ($w, $o);
no_crash_ok($node, 'single server');

# --- Redlock: two of three masters stopped -------------------------------------------
{
	my $masters = RedisLockTest::Redlock->new(n => 3);
	my @m = $masters->nodes;
	my $rl = RedisLockTest::node('waitdeadline_rl', undef,
		'redislock.redlock_nodes' => $masters->list);
	my $rw = RedisLockTest::Session->new($rl);
	my $ro = RedisLockTest::Session->new($rl);
	my $rowner = $rw->query('SELECT redis_lock_owner_id()');
	$rowner =~ s/:\d+$//;
	is($rw->query("SELECT redis_lock_acquire('wd:warm', '0', $L) AND redis_lock_release('wd:warm')"), 't',
		'redlock: the waiter talks to the masters');
	my ($v, $err, $st) = call_while_stopped($rw,
		"SELECT redis_lock_acquire('wd:rl', $W, $L)", 0, @m[0, 1]);
	is($st, undef, 'redlock: the wait ends without an ERROR while two masters are stopped')
	  or diag($err);
	is($v, 'f', 'redlock: it returns false');
	for my $k (0 .. 2)
	{
		my $c = FakeRedisson::Conn->new(port => $m[$k]->port);
		until_ok("redlock: no field of the waiter left on master $k", sub {
			my $h = $c->cmd('HGETALL', 'wd:rl');
			!grep { index($_, $rowner) == 0 } @$h;
		});
	}
	until_ok('redlock: another session takes the lock',
		sub { $ro->query("SELECT redis_lock_acquire('wd:rl', '0')") eq 't' });
	is($ro->query("SELECT redis_lock_release('wd:rl')"), 't', 'redlock: ... and gives it back');
	$_->close for ($rw, $ro);
	no_crash_ok($rl, 'redlock');
}

done_testing();
