# 510_redisson_fair_mixed.pl — one fair queue shared by SQL sessions and
# real Redisson fair-lock threads, every version in @RealRedisson::VERSIONS:
#   fifo      a SQL holder; waiters queued SQL, Java, Java giving up, SQL,
#             SQL giving up, Java (each seen in redisson_lock_queue:{n}
#             before the next one queues); the two give-ups end while the
#             others wait (a give-up takes its wait time off the deadlines
#             behind it: the waiters behind must keep their places); then
#             every hold is released in turn: the lock goes exactly in
#             queue order, nobody times out (F2: each Java acquisition
#             takes its wait time off every deadline);
#   long-hold the same without the give-up, but the holder keeps the lock
#             past two thread wait times after the last waiter queued (F1:
#             a Java waiter's deadline must be counted from those ahead,
#             or it is dropped as stale and, before 3.32, never woken).
# Both sides must use the same thread wait time (docs: fair_wait_timeout):
# SQL sets redislock.fair_wait_timeout to the Java side's, which is 1 s
# where the version has fairLockWaitTimeout (3.46+, set here), 5 s before
# 3.13.3 and 300 s otherwise. long-hold runs where it is at most 5 s: with
# 300 s it would last ten minutes.
# Every wait is bounded ($T); holds have 10-minute leases, so only a message
# explains a prompt hand-over.
# Takes about a minute for all eight versions (one PostgreSQL node, one JVM
# per version).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;
use Test::More;

my $T    = 30;         # bound for a hand-over; far below the lease
my $LONG = 600_000;    # 10-minute leases, ms
my $GIVE_UP = 1500;    # the giving-up Java thread's tryLock wait, ms

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('fair_mixed', $redis, 'max_connections' => '30');
my $rc    = FakeRedisson::Conn->new(port => $redis->port);
my $h     = RedisLockTest::Session->new($node);
my @sql   = map { RedisLockTest::Session->new($node) } 1 .. 3;
my %sql_owner = map { ($_ => $sql[$_]->query('SELECT redis_lock_owner_id()')) } 0 .. 2;

sub redis_now_ms
{
	my $t = $rc->cmd('TIME');
	return $t->[0] * 1000 + int($t->[1] / 1000);
}

# The thread wait time the Java side uses for lock(), and the connect
# options that set it.
sub java_wait
{
	my ($v) = @_;
	return (1000, ['fairWait=1000']) if RealRedisson::version_cmp($v, '3.46.0') >= 0;
	return (5000, []) if RealRedisson::version_cmp($v, '3.13.3') < 0;
	return (300_000, []);
}

# One waiter: {kind => 'sql'|'java', ...}; start() queues it.
sub start_waiter
{
	my ($j, $name, $w) = @_;
	my $l = sql_literal($name);
	if ($w->{kind} eq 'sql')
	{
		my $wait = $w->{give_up} ? "$GIVE_UP ms" : "${T}s";
		$w->{s}->start("SELECT redis_lock_acquire($l, '$wait', '10 min', true)");
	}
	elsif ($w->{give_up})
	{
		$j->start($w->{tag}, $w->{thread}, 'tryLock', 'fair', $name, $GIVE_UP, $LONG);
	}
	else
	{
		$j->start($w->{tag}, $w->{thread}, 'lockInterruptibly', 'fair', $name, $LONG);
	}
}

# undef while it waits, else [ok, value] / [err, message]
sub waiter_result
{
	my ($j, $w) = @_;
	if ($w->{kind} eq 'sql')
	{
		return undef unless $w->{s}->is_done;
		my ($val, $err) = $w->{s}->finish(5);
		return defined $err ? [ 'err', $err ] : [ 'ok', $val ];
	}
	my $r = $j->poll($w->{tag});
	return undef unless defined $r;
	$j->result($w->{tag}, 0);
	return $r;
}

sub release_waiter
{
	my ($j, $name, $w) = @_;
	if ($w->{kind} eq 'sql')
	{
		return $w->{s}->query('SELECT redis_lock_release(' . sql_literal($name) . ')') eq 't';
	}
	return $j->run($w->{thread}, 'unlock', 'fair', $name) eq 'null';
}

# What Redis holds for the lock, for a failure's diagnostics.
sub redis_state
{
	my ($name) = @_;
	my $now = redis_now_ms();
	my $z = $rc->cmd('ZRANGE', FakeRedisson::timeout_key($name), 0, -1, 'WITHSCORES');
	my %score = @$z;
	return "holders {" . join(',', @{ $rc->cmd('HGETALL', $name) }) . "}, queue "
	  . join(',', map { "$_ (" . (defined $score{$_} ? $score{$_} - $now : 'none') . " ms)" }
		  @{ RedisLockTest::fair_queue($rc, $name) });
}

sub mixed_case
{
	my ($j, $v, $case, $wait) = @_;
	my $name = "fair510:$v:$case";
	my $l = sql_literal($name);
	$_->query("SET redislock.fair_wait_timeout = $wait") for ($h, @sql);
	my @w = (
		{ kind => 'sql', s => $sql[0], owner => $sql_owner{0}, label => 'SQL 1' },
		{ kind => 'java', thread => "$case-j1", tag => "$case-j1", label => 'Java 1' },
		($case eq 'fifo' ? ({ kind => 'java', thread => "$case-jg", tag => "$case-jg", give_up => 1, label => 'Java giving up' }) : ()),
		{ kind => 'sql', s => $sql[1], owner => $sql_owner{1}, label => 'SQL 2' },
		($case eq 'fifo' ? ({ kind => 'sql', s => $sql[2], owner => $sql_owner{2}, give_up => 1, label => 'SQL giving up' }) : ()),
		{ kind => 'java', thread => "$case-j2", tag => "$case-j2", label => 'Java 2' },
	);
	$_->{owner} //= $j->owner($_->{thread}) for @w;

	is($h->query("SELECT redis_lock_acquire($l, '0', '10 min', true)"), 't', "$case: SQL holds (10 min lease)");
	my @queued;
	for my $w (@w)
	{
		start_waiter($j, $name, $w);
		push @queued, $w->{owner};
		my $want = join(',', @queued);
		RedisLockTest::until_ok("$case: $w->{label} queued after those before it",
			sub { join(',', @{ RedisLockTest::fair_queue($rc, $name) }) eq $want });
	}
	my $queued_at = redis_now_ms();

	my @order = grep { !$_->{give_up} } @w;
	if ($case eq 'fifo')
	{
		my ($jg, $sg) = grep { $_->{give_up} } @w;
		my ($st, $r) = $j->result($jg->{tag}, $T);
		is("$st " . ($r // ''), 'ok false', "$case: the Java thread gives up (tryLock $GIVE_UP ms)");
		my ($val, $err) = $sg->{s}->finish($T);
		is($val, 'f', "$case: the SQL session gives up (wait $GIVE_UP ms)") or diag($err // 'no error');
		is(join(',', @{ RedisLockTest::fair_queue($rc, $name) }), join(',', map { $_->{owner} } @order),
			"$case: the others keep their places");
	}
	else
	{
		# the holds ahead outlast two thread wait times
		my $until = $queued_at + 2 * $wait + 200;
		RedisLockTest::until_ok("$case: Redis's clock passes two wait times after the last waiter queued",
			sub { redis_now_ms() >= $until }, 2 * $wait / 1000 + $T);
		is(join(',', @{ RedisLockTest::fair_queue($rc, $name) }), join(',', map { $_->{owner} } @order),
			"$case: the queue is unchanged");
	}

	is($h->query("SELECT redis_lock_release($l)"), 't', "$case: the SQL holder releases");
	my @waiting = @order;
	my $all_ok = 1;
	for my $want (@order)
	{
		my ($first, $res);
		RedisLockTest::wait_until($T, "$case: someone gets the lock", sub {
				for my $w (@waiting)
				{
					my $r = waiter_result($j, $w);
					if (defined $r) { ($first, $res) = ($w, $r); return 1; }
				}
				return 0;
			});
		if (!$first)
		{
			fail("$case: $want->{label} gets the lock next (nobody did within $T s)");
			diag(redis_state($name));
			$all_ok = 0;
			last;
		}
		my $got = "$first->{label}: " . join(' ', @$res);
		my $ok = is($got, "$want->{label}: ok " . ($want->{kind} eq 'sql' ? 't' : 'null'),
			"$case: $want->{label} gets the lock next");
		@waiting = grep { $_ != $first } @waiting;
		if (!$ok)
		{
			$all_ok = 0;
			diag(redis_state($name));
			release_waiter($j, $name, $first) if $res->[0] eq 'ok' && $res->[1] ne 'f';
			last;
		}
		is($rc->cmd('HGET', $name, $first->{owner}), '1', "$case: the hash holds $first->{label}");
		ok(release_waiter($j, $name, $first), "$case: $first->{label} releases");
	}
	if ($all_ok)
	{
		is($rc->cmd('EXISTS', $name, FakeRedisson::queue_key($name), FakeRedisson::timeout_key($name)), 0,
			"$case: lock, queue and deadlines gone");
	}
	# leave nothing waiting for the next case
	for my $w (@waiting)
	{
		if ($w->{kind} eq 'sql') { $w->{s}->cancel; $w->{s}->try('SELECT redis_lock_release_all()'); }
		else { $j->cancel($w->{tag}); $j->result($w->{tag}, 5); }
	}
	$rc->cmd('DEL', $name, FakeRedisson::queue_key($name), FakeRedisson::timeout_key($name));
	return $all_ok;
}

my %record;
for my $v (RealRedisson::usable_versions())
{
	my ($wait, $opts) = java_wait($v);
	my $j = eval { RealRedisson->new(version => $v, port => $redis->port, options => $opts) };
	if (!$j)
	{
		fail("Redisson $v: the client starts and connects");
		diag($@);
		next;
	}
	note("Redisson $v: thread wait time $wait ms, client id " . $j->id . ", log " . $j->logfile);
	$record{$v}{fifo} = mixed_case($j, $v, 'fifo', $wait) ? 'ok' : 'FAIL';
	if ($wait <= 5000)
	{
		$record{$v}{'long-hold'} = mixed_case($j, $v, 'long-hold', $wait) ? 'ok' : 'FAIL';
	}
	else
	{
		$record{$v}{'long-hold'} = 'n/a (wait time 300 s)';
	}
	$j->kill;
}
diag("fair queue across SQL and Java, per version:\n"
	  . join('', map { "$_\tfifo $record{$_}{fifo}\tlong-hold $record{$_}{'long-hold'}\n" } grep { $record{$_} } RealRedisson::versions()));

$_->close for ($h, @sql);
RedisLockTest::no_crash_ok($node, 'fair queue across SQL and Java');
done_testing();
