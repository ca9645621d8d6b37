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
#             or it is dropped as stale and, before 3.32, never woken);
#   give-up   the same queue (holder, X, a Java waiter J) built twice, X
#             giving up once as a Java tryLock (Redisson's acquireFailed),
#             once as a SQL session: J's deadline must drop by X's slot
#             both times (release.lua's give-up arithmetic);
#   force-stale  a Java waiter S whose JVM was killed, at the head after its
#             place ran out, with a SQL waiter L behind it that cannot have
#             called Redis since: redis_lock_force_release drops S and wakes
#             L on L's own channel, as Redisson's forceUnlock does
#             (force_release.lua); where the thread wait time is short.
# Both sides must use the same thread wait time (docs: fair_wait_timeout):
# SQL sets redislock.fair_wait_timeout to the Java side's, which is 1 s
# where the version has fairLockWaitTimeout (3.46+, set here), 5 s before
# 3.13.3 and 300 s otherwise. long-hold and force-stale run where it is at
# most 5 s: with 300 s they would last ten and five minutes.
# Every wait is bounded ($T); holds have 10-minute leases (but force-stale's
# holder, on a 5 s watchdog lease), so only a message explains a prompt
# hand-over.
# Takes about 100 s for all eight versions (one PostgreSQL node, one JVM
# per version; force-stale ends it).
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
my $node  = RedisLockTest::node('fair_mixed', $redis, 'max_connections' => '30',
	'redislock.watchdog_timeout' => '5s');
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

# (a) A waiter that gives up takes its thread wait time off the deadlines of
# those behind it, whichever side it is on: the same queue is built twice,
# a SQL holder (10-minute lease), a waiter X, a Java waiter J behind it; X
# gives up once as a Java tryLock (Redisson's own acquireFailed), once as a
# SQL session with redislock.fair_wait_timeout at Java's thread wait time.
# J's deadline must change by the same amount both times (X's slot). J
# never moves its own deadline (a queued Java waiter's retry changes no
# score, and with the holder's 10-minute lease ahead it does not even
# retry), so only X's leaving changes it.
sub give_up_shift
{
	my ($j, $v) = @_;
	my $wait = 3000;    # X's wait; J has that long to queue behind it
	# the slot a Java tryLock(wait) takes: its wait, or 5 s before 3.13.3
	my $slot = RealRedisson::version_cmp($v, '3.13.3') >= 0 ? $wait : 5000;
	my $x_sql = $sql[2];
	my %c = map { ($_ => { name => "fair510:$v:give-up-$_", jtag => "gu-$_-j" }) } qw(java sql);
	$c{java}{xtag} = 'gu-java-x';
	$x_sql->query("SET redislock.fair_wait_timeout = $slot");
	for my $x (qw(java sql))
	{
		my $c = $c{$x};
		my $l = sql_literal($c->{name});
		is($h->query("SELECT redis_lock_acquire($l, '0', '10 min', true)"), 't', "give-up $x: SQL holds (10 min lease)");
		# a thread busy with a started operation answers nothing else
		my $xo = $x eq 'java' ? $j->owner($c->{xtag}) : $sql_owner{2};
		$c->{jo} = $j->owner($c->{jtag});
		if ($x eq 'java')
		{
			$j->start($c->{xtag}, $c->{xtag}, 'tryLock', 'fair', $c->{name}, $wait, $LONG);
		}
		else
		{
			$x_sql->start("SELECT redis_lock_acquire($l, '$wait ms', '10 min', true)");
		}
		until_ok("give-up $x: X ($x) is queued",
			sub { join(',', @{ RedisLockTest::fair_queue($rc, $c->{name}) }) eq $xo });
		$j->start($c->{jtag}, $c->{jtag}, 'lockInterruptibly', 'fair', $c->{name}, $LONG);
		until_ok("give-up $x: the Java waiter J is queued behind X",
			sub { join(',', @{ RedisLockTest::fair_queue($rc, $c->{name}) }) eq "$xo,$c->{jo}" });
		$c->{before} = $rc->cmd('ZSCORE', FakeRedisson::timeout_key($c->{name}), $c->{jo});
	}
	my ($st, $r) = $j->result($c{java}{xtag}, $T);
	is("$st " . ($r // ''), 'ok false', "give-up java: X gives up (tryLock $wait ms)");
	my ($val, $err) = $x_sql->finish($T);
	is($val, 'f', "give-up sql: X gives up (wait $wait ms)") or diag($err // 'no error');
	for my $x (qw(java sql))
	{
		my $c = $c{$x};
		until_ok("give-up $x: X has left the queue, J is still in it",
			sub { join(',', @{ RedisLockTest::fair_queue($rc, $c->{name}) }) eq $c->{jo} })
		  or diag(redis_state($c->{name}));
		$c->{delta} = $rc->cmd('ZSCORE', FakeRedisson::timeout_key($c->{name}), $c->{jo}) - $c->{before};
	}
	is($c{java}{delta}, -$slot, "give-up java: Redisson's acquireFailed takes X's slot ($slot ms) off J's deadline");
	is($c{sql}{delta}, $c{java}{delta}, 'give-up sql: a SQL give-up changes J\'s deadline as the Java give-up does');
	for my $x (qw(java sql))
	{
		my $c = $c{$x};
		$j->cancel($c->{jtag});
		$j->result($c->{jtag}, 5);
		$rc->cmd('DEL', FakeRedisson::queue_key($c->{name}), FakeRedisson::timeout_key($c->{name}));
		$h->query('SELECT redis_lock_release(' . sql_literal($c->{name}) . ')');
		$rc->cmd('DEL', $c->{name});
	}
	return $c{sql}{delta} == $c{java}{delta} && $c{java}{delta} == -$slot;
}

# (b) A force-release drops the queue heads whose place ran out before it
# wakes the first live one, as Redisson's forceUnlock. The stale head S is a
# Java lock() waiter whose JVM is killed (so this ends $j); the live waiter
# L behind it is a SQL session that renews its place only every third of its
# fair_wait_timeout (10 minutes here), so between messages it calls Redis
# again only after 200 s: once S's deadline has passed with the queue still
# S, L, nobody has retried since, and only the force-release can drop S.
# (A Java waiter cannot be L: it sleeps until the deadline of the one ahead
# - its enqueue reply is that deadline - now, and before 3.32 so is every
# retry's - and its retry at that moment drops S itself, so a force-release
# could only race it.) S's place starts at the holder's
# remaining lease (watchdog, 5 s) plus the thread wait time, so it runs out
# within seconds; L must queue before that, and a late L shows as a queue
# without S, never as a pass.
sub force_stale
{
	my ($j, $v, $wait) = @_;
	my $name = "fair510:$v:force-stale";
	my $l = sql_literal($name);
	my $L = $sql[0];
	my $lo = $sql_owner{0};
	is($h->query("SELECT redis_lock_acquire($l, '0', NULL, true)"), 't', 'force-stale: SQL holds (watchdog lease, 5 s)');
	my $so = $j->owner('fs-s');
	$j->start('fs-s', 'fs-s', 'lockInterruptibly', 'fair', $name, $LONG);
	until_ok('force-stale: the Java waiter S is queued', sub { join(',', @{ RedisLockTest::fair_queue($rc, $name) }) eq $so });
	$L->query('SET redislock.fair_wait_timeout = 600000');
	$L->start("SELECT redis_lock_acquire($l, '${T}s', '10 min', true)");
	until_ok('force-stale: the SQL waiter L is queued behind S',
		sub { join(',', @{ RedisLockTest::fair_queue($rc, $name) }) eq "$so,$lo" })
	  or diag(redis_state($name));
	$j->kill;
	my $sub = FakeRedisson::Conn->new(port => $redis->port);
	my $end = "fair510:end:$$";
	$sub->subscribe(FakeRedisson::fair_channel($name, $so), FakeRedisson::fair_channel($name, $lo), $end);
	my $s_deadline = $rc->cmd('ZSCORE', FakeRedisson::timeout_key($name), $so);
	until_ok("force-stale: S's place runs out (Redis's clock)", sub { redis_now_ms() > $s_deadline }, $wait / 1000 + $T);
	is(join(',', @{ RedisLockTest::fair_queue($rc, $name) }), "$so,$lo",
		'force-stale: the queue is still S, L: nobody dropped S');
	is($sql[1]->query("SELECT redis_lock_force_release($l)"), 't', 'force-stale: the lock is force-released');
	$rc->cmd('PUBLISH', $end, 'end');
	my (@heard, $m);
	while (($m = $sub->next_message($T)) && $m->[0] ne $end)
	{
		push @heard, ($m->[0] eq FakeRedisson::fair_channel($name, $so) ? 'S' : 'L') . ":$m->[1]";
	}
	my $ok = is(join(',', @heard), 'L:0', "force-stale: only L's channel hears the force-release");
	$ok &= is($rc->cmd('ZSCORE', FakeRedisson::timeout_key($name), $so), undef, 'force-stale: S has no deadline left');
	$ok &= ok(!grep({ $_ eq $so } @{ RedisLockTest::fair_queue($rc, $name) }), 'force-stale: S is out of the queue');
	my ($val, $err) = $L->finish($T);
	$ok &= is($val, 't', 'force-stale: L gets the lock') or diag($err // 'no error');
	$L->cancel unless defined $val;
	$L->try('SELECT redis_lock_release_all()');
	$h->try('SELECT redis_lock_release_all()');
	$sub->close;
	$rc->cmd('DEL', $name, FakeRedisson::queue_key($name), FakeRedisson::timeout_key($name));
	return $ok;
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
	$record{$v}{'give-up'} = give_up_shift($j, $v) ? 'ok' : 'FAIL';
	# kills the JVM
	$record{$v}{'force-stale'} = $wait <= 5000 ? (force_stale($j, $v, $wait) ? 'ok' : 'FAIL') : 'n/a (wait time 300 s)';
	$j->kill;
}
diag("fair queue across SQL and Java, per version:\n"
	  . join('', map { my $r = $record{$_}; "$_\t" . join("\t", map { "$_ $r->{$_}" } grep { $r->{$_} } qw(fifo long-hold give-up force-stale)) . "\n" }
		  grep { $record{$_} } RealRedisson::versions()));

$_->close for ($h, @sql);
RedisLockTest::no_crash_ok($node, 'fair queue across SQL and Java');
done_testing();
