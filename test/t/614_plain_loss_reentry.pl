# 614_plain_loss_reentry.pl — 378 for the plain layout: a session never
# believes it holds a plain lock that Redis says another client has.  A
# takes, the hold is lost to another client (the key overwritten with that
# client's token on every master, as when A's lease ran out and redsync, say,
# took the lock), and A re-enters with a longer lease: Redis refuses, and at
# once A is told (the WARNING) and A's row shows 'lost'; the next lease-less
# re-entry asks Redis and is refused too, and the other client's key is
# left as it was.  For every acquiring function of the layout (the table
# @F: one lock, a multi-lock, either scope), on a single server and on
# Redlock over 3 masters.  The watchdog is stopped from the loss on and A's
# lease is 10 minutes long: only Redis's answer to A can show A the loss.
# (Before, a Redlock multi-lock took no notice of the refusal: the row
# stayed 'held' until the watchdog's next renewal.)
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use Test::More;

# [label, A's take, A's re-entry with a longer lease, A's lease-less
#  re-entry, transaction scope]; %s is the name lost, %s:1 stays A's
my @F = (
	[ 'lock', "SELECT redis_lock_acquire('%s')",
		"SELECT redis_lock_acquire('%s', '0', '1 hour')",
		"SELECT redis_lock_acquire('%s', '0')" ],
	[ 'xact', "SELECT redis_xact_lock_acquire('%s')",
		"SELECT redis_xact_lock_acquire('%s', '0', '1 hour')",
		"SELECT redis_xact_lock_acquire('%s', '0')", 1 ],
	[ 'all', "SELECT redis_lock_acquire_all(ARRAY['%s:1', '%s'])",
		"SELECT redis_lock_acquire_all(ARRAY['%s:1', '%s'], '0', '1 hour')",
		"SELECT redis_lock_acquire_all(ARRAY['%s:1', '%s'], '0')" ],
	[ 'xact_all', "SELECT redis_xact_lock_acquire_all(ARRAY['%s:1', '%s'])",
		"SELECT redis_xact_lock_acquire_all(ARRAY['%s:1', '%s'], '0', '1 hour')",
		"SELECT redis_xact_lock_acquire_all(ARRAY['%s:1', '%s'], '0')", 1 ],
);
my $OTHER = 'other-client-token';

# the watchdog this test stopped, resumed whatever happens
my @stopped;
END { kill 'CONT', @stopped if @stopped; }

sub state_of
{
	my ($obs, $a, $name) = @_;
	return $obs->query("SELECT coalesce(string_agg(state, ','), '') FROM redis_locks
		WHERE pid = " . $a->pid . " AND name = '$name'");
}

sub mode_case
{
	my ($mode, $node, @masters) = @_;
	my $obs = RedisLockTest::observer($node);
	my @watchdog;
	until_ok("$mode: one watchdog",
		sub { @watchdog = split /,/, RedisLockTest::watchdog_pids($obs); @watchdog == 1 });
	my (%a, %name);
	for my $f (@F)
	{
		my ($label, $take, undef, undef, $xact) = @$f;
		$name{$label} = "pl:$mode:$label";
		$a{$label} = RedisLockTest::Session->new($node);
		$a{$label}->query("SET redislock.layout = 'plain'");
		$a{$label}->query("SET redislock.watchdog_timeout = '10min'");
		$a{$label}->query('BEGIN') if $xact;
		is($a{$label}->query(sqlf($take, $name{$label})), 't', "$mode, $label: A takes it");
	}
	@stopped = @watchdog;
	kill 'STOP', @watchdog;
	for my $f (@F)
	{
		my $n = $name{ $f->[0] };
		is($_->cli('SET', $n, $OTHER, 'PX', '600000'), 'OK',
			"$mode, $f->[0]: another client has $n on master " . $_->port) for @masters;
	}
	for my $f (@F)
	{
		my ($label, undef, $long, $bare) = @$f;
		my ($a, $n) = ($a{$label}, $name{$label});
		$a->notices;
		my ($v, $err) = $a->try(sqlf($long, $n));
		is($v, 'f', "$mode, $label: A's re-entry with a longer lease is refused") or diag($err // '');
		like(join("\n", $a->notices), qr/"\Q$n\E" held by this session was lost/,
			"$mode, $label: ... and A is told its hold was lost");
		is(state_of($obs, $a, $n), 'lost', "$mode, $label: A's row shows the loss at once");
		is(state_of($obs, $a, "$n:1"), 'held', "$mode, $label: A still holds $n:1")
		  if $label =~ /all/;
		($v, $err) = $a->try(sqlf($bare, $n));
		is($v, 'f', "$mode, $label: A's lease-less re-entry asks Redis and is refused")
		  or diag($err // '');
		is($_->cli('GET', $n), $OTHER, "$mode, $label: the other client's key is untouched on master " . $_->port)
		  for @masters;
	}
	kill 'CONT', @watchdog;
	@stopped = ();
	for my $f (@F)
	{
		$a{ $f->[0] }->query($f->[4] ? 'ROLLBACK' : 'SELECT redis_lock_release_all()');
		$a{ $f->[0] }->close;
	}
	is($obs->query("SELECT count(*) FROM redis_locks WHERE name LIKE 'pl:$mode:%'"), '0',
		"$mode: nothing left held");
	no_crash_ok($node, $mode);
	$node->stop;
}

{
	my $redis = RedisLockTest::Redis->new;
	mode_case('single', RedisLockTest::node('plainloss', $redis), $redis);
}
{
	my $rl = RedisLockTest::Redlock->new(n => 3);
	mode_case('redlock', RedisLockTest::node('plainlossrl', undef,
		'redislock.redlock_nodes' => $rl->list), $rl->nodes);
}

done_testing();
