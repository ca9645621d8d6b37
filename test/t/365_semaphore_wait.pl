# 365_semaphore_wait.pl — waiting for semaphore permits, expiring permits
# and count-down latches: waits show wait_event_type Extension, end at once
# with the right SQLSTATE on cancel (57014), lock_timeout (55P03) and
# statement_timeout (57014), end with false / NULL when `wait` runs out,
# and leave nothing behind (no permit taken, no subscription); asking for
# more permits than can ever exist waits, as in Redisson; and a permit
# waiter wakes at the earliest expiry of a fixed-lease permit, although
# nothing is published when a lease runs out; a semaphore waiter sees
# permits added without a message (Redisson before 3.16.2's addPermits)
# within redislock.semaphore_recheck.  With Redlock every function
# is refused with 0A000 and says why (the releases may instead answer false
# + WARNING, as for anything not held: nothing can be held there).
#
# That last one without timing thresholds: a MONITOR connection records
# every command Redis runs, in order, with the client that sent it (the
# commands a script runs follow its EVAL/EVALSHA line); the checks are that
# no PUBLISH on the permits' channel ran, from anyone, before the waiter's
# successful attempt, and that the only one is its own (the reclaim of the
# expired permit, which Redisson's acquire script also publishes).  The
# holder's lease is short (2 s) so that the test is quick; if the lease ran
# out before the waiter was seen waiting, the case is run again with twice
# the lease (the checks only count once the waiter was seen waiting).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Time::HiRes ();
use Test::More;

my $T   = 60;
my $HEX = qr/^[0-9a-f]{32}$/;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('semwait', $redis, 'redislock.watchdog_timeout' => '10min');
my $rc    = FakeRedisson::Conn->new(port => $redis->port);
my $java  = FakeRedisson->new(port => $redis->port);
my $obs   = RedisLockTest::observer($node);

my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $b_id = $b->query('SELECT redis_lock_owner_id()');

sub numsub { $rc->cmd('PUBSUB', 'NUMSUB', $_[0])->[1] }
sub holders_key { "redislock_semaphore_holders:{$_[0]}" }
sub in_wait
{
	my ($s) = @_;
	my $t = $obs->query('SELECT wait_event_type FROM pg_stat_activity WHERE pid = ' . $s->pid);
	return defined $t && $t eq 'Extension';
}

# The three kinds of wait, each on an object nobody will free: the SQL text
# for a wait bounded by $wait (an SQL literal or NULL), the channel, and
# what the wait returns when it ends empty-handed.
my %kind = (
	semaphore => {
		setup => sub {
			$a->query("SELECT redis_semaphore_try_set_permits('wx:sem', 1)");
			$a->query("SELECT redis_semaphore_acquire('wx:sem')") eq 't' or die 'A: no permit';
		},
		sql     => sub { "SELECT redis_semaphore_acquire('wx:sem', 1, $_[0])" },
		channel => FakeRedisson::sem_channel('wx:sem'),
		empty   => 'f',
		clean   => sub {
			is($rc->cmd('HEXISTS', holders_key('wx:sem'), $b_id), 0, "$_[0]: B holds no permit");
			is($rc->cmd('GET', 'wx:sem'), '0', "$_[0]: the pool is unchanged (0 free)");
		},
	},
	permit => {
		setup => sub {
			$a->query("SELECT redis_permit_try_set_permits('wx:pes', 1)");
			defined $a->query("SELECT redis_permit_acquire('wx:pes', '0', '10 min')") or die 'A: no permit';
		},
		sql     => sub { "SELECT redis_permit_acquire('wx:pes', $_[0], '10 min')" },
		channel => FakeRedisson::sem_channel('wx:pes'),
		empty   => undef,
		clean   => sub {
			is($rc->cmd('ZCARD', FakeRedisson::permit_timeout_key('wx:pes')), 1, "$_[0]: only A's permit is out");
			is($rc->cmd('GET', 'wx:pes'), '0', "$_[0]: the pool is unchanged (0 free)");
		},
	},
	latch => {
		setup => sub {
			$a->query("SELECT redis_latch_try_set_count('wx:latch', 1)") eq 't' or die 'no latch';
		},
		sql     => sub { "SELECT redis_latch_await('wx:latch', $_[0])" },
		channel => FakeRedisson::latch_channel('wx:latch'),
		empty   => 'f',
		clean   => sub { is($rc->cmd('GET', 'wx:latch'), '1', "$_[0]: the count is unchanged (1)") },
	},
);

for my $k (qw(semaphore permit latch))
{
	my $K = $kind{$k};
	$K->{setup}->();
	my $gone = sub { my ($what) = @_; until_ok("$what: no subscriber left", sub { numsub($K->{channel}) == 0 }) };

	# cancel
	$b->start($K->{sql}->('NULL'));
	waits_ok($b, "$k: B (no bound)");
	until_ok("$k: B subscribed to $K->{channel}", sub { numsub($K->{channel}) >= 1 });
	my ($v, $err, $st) = $b->cancel($T);
	is($st, '57014', "$k: pg_cancel_backend ends the wait with 57014") or diag("v=" . ($v // 'NULL') . " err=$err");
	$K->{clean}->("$k cancel");
	$gone->("$k cancel");
	is($b->query('SELECT 1'), '1', "$k: the session is usable afterwards");

	# wait runs out
	$b->start($K->{sql}->("'300 ms'"));
	($v, $err, $st) = $b->finish($T);
	ok(!defined $err, "$k: a wait bounded by 300 ms ends without an error") or diag($err);
	is($v, $K->{empty}, "$k: ... and returns " . ($K->{empty} // 'NULL'));
	$K->{clean}->("$k wait");
	$gone->("$k wait");
	is($b->query($K->{sql}->("'0'")), $K->{empty}, "$k: wait '0': one try");

	# lock_timeout
	$b->query("SET lock_timeout = '300ms'");
	($v, $err, $st) = $b->try($K->{sql}->('NULL'));
	is($st, '55P03', "$k: lock_timeout ends the wait with 55P03 (lock_not_available)") or diag($err);
	$b->query('RESET lock_timeout');
	$K->{clean}->("$k lock_timeout");
	$gone->("$k lock_timeout");

	# statement_timeout
	$b->query("SET statement_timeout = '300ms'");
	($v, $err, $st) = $b->try($K->{sql}->('NULL'));
	is($st, '57014', "$k: statement_timeout ends the wait with 57014") or diag($err);
	like($err // '', qr/statement timeout/, "$k: ... canceling statement due to statement timeout");
	$b->query('RESET statement_timeout');
	$K->{clean}->("$k statement_timeout");
	$gone->("$k statement_timeout");

	# the wait bound is the smaller of wait and lock_timeout
	$b->query("SET lock_timeout = '1h'");
	($v, $err) = $b->try($K->{sql}->("'300 ms'"));
	is($v, $K->{empty}, "$k: wait 300 ms under lock_timeout 1h: ends with " . ($K->{empty} // 'NULL'));
	$b->query('RESET lock_timeout');
}
is($a->query("SELECT redis_semaphore_release('wx:sem')"), 't', 'A releases its permit');

# --- more permits than can ever exist: a wait, as in Redisson --------------------------
{
	is($rc->cmd('GET', 'wx:sem'), '1', 'the pool of 1 is free');
	$b->start("SELECT redis_semaphore_acquire('wx:sem', 5, '60 s')");
	waits_ok($b, 'B (for 5 permits of a pool of 1)');
	my ($v, $err, $st) = $b->cancel($T);
	is($st, '57014', '... until cancelled') or diag($err);
	is($rc->cmd('GET', 'wx:sem'), '1', '... nothing taken');
	is($b->query("SELECT redis_semaphore_acquire('wx:sem', 5, '300 ms')"), 'f', "bounded: f");
	is($a->query("SELECT redis_semaphore_available('wx:sem')"), 1, 'still 1 available');
}

# --- a permit waiter wakes at the earliest expiry, with no publish -----------------------
# MONITOR lines: "<time> [<db> <client addr>|lua] "<cmd>" "<arg>" ...".
sub monitor
{
	my $m = FakeRedisson::Conn->new(port => $redis->port);
	my $ok = $m->cmd('MONITOR');
	die "MONITOR: $ok" unless $ok eq 'OK';
	return $m;
}

# The MONITOR lines up to an ECHO of a fresh marker sent after the call.
my $mark_seq = 0;
sub monitor_lines
{
	my ($m) = @_;
	my $mark = "monitor-mark-" . ++$mark_seq;
	$rc->cmd('ECHO', $mark);
	my @l;
	while (1)
	{
		my $e = $m->next_event($T) // return [ @l, 'NO MARKER' ];
		next if ref $e;
		return \@l if $e =~ /"echo" "\Q$mark\E"/i;
		push @l, $e;
	}
}

# Each line as [source, command, args text], lua lines attributed to the
# client whose EVAL/EVALSHA/FCALL they follow ([addr, cmd, args, 'lua']).
sub parse_monitor
{
	my ($lines) = @_;
	my ($runner, @out);
	for my $l (@$lines)
	{
		my ($src, $cmd, $rest) = $l =~ /^\S+ \[\d+ (\S+)\] "([^"]*)"(.*)$/ or next;
		$cmd = lc $cmd;
		if ($src eq 'lua')
		{
			push @out, [ $runner // '?', $cmd, $rest, 'lua' ];
		}
		else
		{
			$runner = $src if $cmd =~ /^(eval|evalsha|eval_ro|evalsha_ro|fcall)$/;
			push @out, [ $src, $cmd, $rest, '' ];
		}
	}
	return \@out;
}

# The payloads $sub got on $ch before a marker published now on $ch.
sub drain
{
	my ($sub, $ch) = @_;
	$rc->cmd('PUBLISH', $ch, 'marker');
	my @m;
	while (1)
	{
		my $m = $sub->next_message($T) // return [ @m, 'NO MARKER' ];
		return \@m if $m->[1] eq 'marker';
		push @m, $m->[1];
	}
}

{
	my $n   = 'wx:expire';
	my $ch  = FakeRedisson::sem_channel($n);
	my $z   = FakeRedisson::permit_timeout_key($n);
	is($a->query("SELECT redis_permit_try_set_permits('$n', 1)"), 't', "expiry: a pool of 1 ($n)");
	my $sub = FakeRedisson::Conn->new(port => $redis->port);
	$sub->subscribe($ch);
	my ($done, $lease) = (0, 2);
	for my $try (1 .. 5)
	{
		my $aid = $a->query("SELECT redis_permit_acquire('$n', '0', '$lease s')");
		die "A: no permit" unless defined $aid;
		my $score = $java->permit_state($n)->{members}{$aid};
		my $m = monitor();
		$b->start("SELECT redis_permit_acquire('$n', '60 s', '10 min')");
		my $seen_waiting = RedisLockTest::wait_until($T, 'B waits or returns', sub { in_wait($b) || $b->is_done })
		  && !$b->is_done;
		my ($v, $err) = $b->finish($T);
		my $lines = monitor_lines($m);
		$m->close;
		if (!$seen_waiting)
		{
			diag("try $try: A's $lease s lease ran out before B was seen waiting; again with twice the lease");
			$b->query("SELECT redis_permit_release('$n', '$v')") if defined $v && $v =~ $HEX;
			$rc->cmd('DEL', $n, $z);
			$a->query("SELECT redis_permit_try_set_permits('$n', 1)");
			drain($sub, $ch);
			$lease *= 2;
			next;
		}
		$done = 1;
		like($v, $HEX, "expiry: B, seen waiting, gets a permit once A's $lease s lease ran out") or diag($err);
		my $st = $java->permit_state($n);
		is_deeply([ keys %{ $st->{members} } ], [$v], "expiry: A's expired permit was reclaimed, B's is out");
		cmp_ok(FakeRedisson::now_ms(), '>=', $score, "expiry: (A's lease has run out by the test's clock)");

		my $ops = parse_monitor($lines);
		# B's attempts: the scripts naming $n, from B's connection (the first
		# one to run a script on $n after the MONITOR started)
		my @scripts = grep { $_->[3] eq '' && $_->[1] =~ /^(eval|evalsha)/ && index($_->[2], "\"$n\"") >= 0 } @$ops;
		my $baddr = @scripts ? $scripts[0][0] : '?';
		my @battempts = grep { $_->[0] eq $baddr } @scripts;
		cmp_ok(scalar(@battempts), '>=', 2, "expiry: B tried more than once (refused, then took it)");
		is(scalar(grep { $_->[0] ne $baddr } @scripts), 0, "expiry: nobody else ran a script on $n meanwhile");
		# the publishes on the channel, and where they stand
		my ($last_b, @pubs) = (-1);
		for my $i (0 .. $#$ops)
		{
			my $o = $ops->[$i];
			$last_b = $i if $o->[3] eq '' && $o->[0] eq $baddr && grep { $_ == $o } @battempts;
			push @pubs, [ $i, $o ] if $o->[1] =~ /^s?publish$/ && index($o->[2], "\"$ch\"") >= 0;
		}
		ok(!grep({ $_->[0] < $last_b } @pubs),
			"expiry: nothing was published on $ch before B's last attempt (nothing could wake it)")
		  or diag(join("\n", @$lines));
		ok(!grep({ $_->[1][0] ne $baddr || $_->[1][3] ne 'lua' } @pubs),
			"expiry: the only publish is from B's own script (its reclaim of A's permit)")
		  or diag(join("\n", @$lines));
		is_deeply(drain($sub, $ch), [ ('1') x scalar(@pubs) ],
			"expiry: a subscriber of $ch saw only that message before a marker published after B returned");
		is($b->query("SELECT redis_permit_release('$n', '$v')"), 't', 'expiry: B releases');
		last;
	}
	ok($done, 'expiry: B was seen waiting in one of the tries');
	$sub->close;
}

# --- Redlock: refused (0A000) with the reason, nothing written -------------------------
{
	my $rl = RedisLockTest::Redlock->new(n => 3);
	my $rn = RedisLockTest::node('semredlock', undef, 'redislock.redlock_nodes' => $rl->list);
	my $s  = RedisLockTest::Session->new($rn);
	my $id = FakeRedisson::new_permit_id();
	for my $sql (
		"redis_semaphore_try_set_permits('rk', 1)", "redis_semaphore_add_permits('rk', 1)",
		"redis_semaphore_acquire('rk')", "redis_xact_semaphore_acquire('rk')",
		"redis_semaphore_release('rk')", "redis_semaphore_available('rk')",
		"redis_permit_try_set_permits('rk', 1)", "redis_permit_set_permits('rk', 1)",
		"redis_permit_available('rk')", "redis_permit_acquire('rk')", "redis_xact_permit_acquire('rk')",
		"redis_permit_release('rk', '$id')",
		"redis_latch_try_set_count('rk', 1)", "redis_latch_count_down('rk')",
		"redis_latch_count('rk')", "redis_latch_await('rk', '0')")
	{
		$s->notices;
		my ($v, $err, $st) = $s->try("SELECT $sql");
		is($st, '0A000', "redlock: $sql refused with 0A000") or diag($err);
		like($err // '', qr/Redlock/, "redlock: ... saying why");
	}
	is(scalar(grep { $_ > 0 } map { scalar @{ FakeRedisson::conn_to($_->port)->cmd('KEYS', '*') } } $rl->nodes), 0,
		'redlock: nothing written on any master');
	$s->close;
}

# --- room that comes without a message --------------------------------------
# Redisson before 3.16.2 adds permits (addPermits) with a plain SET and
# publishes nothing (S1 in redisson-versions.md); a semaphore waiter must
# still see them, within redislock.semaphore_recheck. The test's nodes run
# with it off (RedisLockTest::node); this session turns it on, at 1 s.
{
	my $name = 'wx:silent';
	is($b->query("SELECT redis_semaphore_try_set_permits('$name', 1)"), 't', 'silent: a pool of 1');
	is($b->query("SELECT redis_semaphore_acquire('$name', 1, '0')"), 't', 'silent: B takes it');
	my (undef, $serr) = $a->try("SET redislock.semaphore_recheck = '1s'");
	is($serr, undef, 'silent: A sets redislock.semaphore_recheck = 1s');
	$a->start("SELECT redis_semaphore_acquire('$name', 1, NULL)");
	RedisLockTest::until_ok('silent: A waits', sub { in_wait($a) && numsub(FakeRedisson::sem_channel($name)) >= 1 });
	my $sub = FakeRedisson::Conn->new(port => $redis->port);
	$sub->subscribe(FakeRedisson::sem_channel($name));
	# what Redisson 3.16.1's addPermits runs: GET, SET value + 1, no PUBLISH
	is($rc->cmd('EVAL', "local v = redis.call('get', KEYS[1]) or 0; redis.call('set', KEYS[1], v + ARGV[1])",
		1, $name, 1), undef, 'silent: a permit added without a message');
	my ($val, $err) = $a->finish($T);
	is($val, 't', "silent: A got it within $T s by its re-check") or diag($err);
	my $m = $sub->next_message(1);
	is($m && "$m->[0]: $m->[1]", undef, '... and nothing was published before it');
	$sub->close;
	$a->query('RESET redislock.semaphore_recheck');
	$a->query("SELECT redis_semaphore_release('$name', 1)") if ($val // '') eq 't';
	$b->query("SELECT redis_semaphore_release('$name', 1)");
}

$_->close for $a, $b;
no_crash_ok($node, 'semaphore waits');
done_testing();
