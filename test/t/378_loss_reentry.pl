# 378_loss_reentry.pl — a session never believes it holds what Redis says it
# does not.  A re-entry that asked for a longer lease rewrote the session's
# shared slot (lease, renewal time) before Redis answered; when Redis
# refused it (another session held the lock since the hold was lost), the
# watchdog left the hold alone for a third of the new lease, a lease-less
# re-entry then succeeded locally without asking Redis, redis_locks showed
# two holders and redislock.on_lock_lost never acted.
#
# For every acquiring function of the catalog (the table %F; a function it
# lacks fails the test), A holds, the hold is lost (force release, or the
# keys deleted as a failover would; then, separately, its lease lapses while
# the watchdog is stopped), B takes it, and then:
#   - A's re-entry with a longer lease is refused;
#   - A's lease-less re-entry asks Redis and is refused too;
#   - redis_locks never shows more holders than the lock admits (one
#     exclusive or write holder, no reader beside a writer, one permit of a
#     pool of one);
#   - A's row shows the loss within the test's bound (the watchdog renews
#     every second here; with the defect it waited a third of an hour);
# and with redislock.on_lock_lost = terminate A is ended, within the bound.
# While A re-enters after a force release, the watchdog is stopped and A's
# lease is a minute long: only Redis's answer to A can show A the loss.
# A re-entry with a longer lease that fails because Redis is paused changes
# nothing the watchdog trusts: the lease in redis_locks stays what Redis
# last confirmed, and the next lease-less re-entry asks Redis.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use Test::More;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('lossreentry', $redis,
	'redislock.watchdog_timeout' => '3s',
	'redislock.command_timeout'  => '1s');
my $obs = RedisLockTest::observer($node);

# name => [take, lose (keys to delete, or undef: force release), B's take,
#          A's re-entry with a longer lease, A's lease-less re-entry,
#          what a refused re-entry returns, owned (a refusal means the hold
#          is gone), transaction scope]
my %F = (
	redis_lock_acquire => {
		take => "SELECT redis_lock_acquire('%s')",
		b    => "SELECT redis_lock_acquire('%s', '0')",
		long => "SELECT redis_lock_acquire('%s', '0', '1 hour')",
		bare => "SELECT redis_lock_acquire('%s', '0')" },
	'redis_lock_acquire fair' => {
		take => "SELECT redis_lock_acquire('%s', NULL, NULL, true)",
		b    => "SELECT redis_lock_acquire('%s', '0', NULL, true)",
		long => "SELECT redis_lock_acquire('%s', '0', '1 hour', true)",
		bare => "SELECT redis_lock_acquire('%s', '0', NULL, true)" },
	redis_xact_lock_acquire => {
		xact => 1,
		take => "SELECT redis_xact_lock_acquire('%s')",
		b    => "SELECT redis_lock_acquire('%s', '0')",
		long => "SELECT redis_xact_lock_acquire('%s', '0', '1 hour')",
		bare => "SELECT redis_xact_lock_acquire('%s', '0')" },
	redis_read_lock_acquire => {
		take => "SELECT redis_read_lock_acquire('%s')",
		b    => "SELECT redis_write_lock_acquire('%s', '0')",
		long => "SELECT redis_read_lock_acquire('%s', '0', '1 hour')",
		bare => "SELECT redis_read_lock_acquire('%s', '0')" },
	redis_write_lock_acquire => {
		take => "SELECT redis_write_lock_acquire('%s')",
		b    => "SELECT redis_write_lock_acquire('%s', '0')",
		long => "SELECT redis_write_lock_acquire('%s', '0', '1 hour')",
		bare => "SELECT redis_write_lock_acquire('%s', '0')" },
	redis_xact_read_lock_acquire => {
		xact => 1,
		take => "SELECT redis_xact_read_lock_acquire('%s')",
		b    => "SELECT redis_write_lock_acquire('%s', '0')",
		long => "SELECT redis_xact_read_lock_acquire('%s', '0', '1 hour')",
		bare => "SELECT redis_xact_read_lock_acquire('%s', '0')" },
	redis_xact_write_lock_acquire => {
		xact => 1,
		take => "SELECT redis_xact_write_lock_acquire('%s')",
		b    => "SELECT redis_write_lock_acquire('%s', '0')",
		long => "SELECT redis_xact_write_lock_acquire('%s', '0', '1 hour')",
		bare => "SELECT redis_xact_write_lock_acquire('%s', '0')" },
	redis_lock_acquire_all => {
		take => "SELECT redis_lock_acquire_all(ARRAY['%s:1', '%s'])",
		b    => "SELECT redis_lock_acquire('%s', '0')",
		long => "SELECT redis_lock_acquire_all(ARRAY['%s:1', '%s'], '0', '1 hour')",
		bare => "SELECT redis_lock_acquire_all(ARRAY['%s:1', '%s'], '0')" },
	redis_xact_lock_acquire_all => {
		xact => 1,
		take => "SELECT redis_xact_lock_acquire_all(ARRAY['%s:1', '%s'])",
		b    => "SELECT redis_lock_acquire('%s', '0')",
		long => "SELECT redis_xact_lock_acquire_all(ARRAY['%s:1', '%s'], '0', '1 hour')",
		bare => "SELECT redis_xact_lock_acquire_all(ARRAY['%s:1', '%s'], '0')" },
	redis_semaphore_acquire => {
		pool => 'semaphore', unowned => 1,
		take => "SELECT redis_semaphore_acquire('%s')",
		b    => "SELECT redis_semaphore_acquire('%s', 1, '0')",
		bare => "SELECT redis_semaphore_acquire('%s', 1, '0')" },
	redis_xact_semaphore_acquire => {
		pool => 'semaphore', unowned => 1, xact => 1,
		take => "SELECT redis_xact_semaphore_acquire('%s')",
		b    => "SELECT redis_semaphore_acquire('%s', 1, '0')",
		bare => "SELECT redis_xact_semaphore_acquire('%s', 1, '0')" },
	redis_permit_acquire => {
		pool => 'permit', unowned => 1,
		take => "SELECT redis_permit_acquire('%s')",
		b    => "SELECT redis_permit_acquire('%s', '0')",
		long => "SELECT redis_permit_acquire('%s', '0', '1 hour')",
		bare => "SELECT redis_permit_acquire('%s', '0')" },
	redis_xact_permit_acquire => {
		pool => 'permit', unowned => 1, xact => 1,
		take => "SELECT redis_xact_permit_acquire('%s')",
		b    => "SELECT redis_permit_acquire('%s', '0')",
		long => "SELECT redis_xact_permit_acquire('%s', '0', '1 hour')",
		bare => "SELECT redis_xact_permit_acquire('%s', '0')" },
);

my @catalog = split /\n/, $obs->query(q{SELECT string_agg(p.proname, E'\n' ORDER BY p.proname)
	FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
	JOIN pg_extension e ON d.refobjid = e.oid AND e.extname = 'redislock'
	WHERE p.proname LIKE '%\_acquire%'});
ok(@catalog > 0, 'the catalog lists acquiring functions');
ok(exists $F{$_}, "the table has $_") for @catalog;

# Deletes what Redis keeps of a pool, as a failover to an empty replica would.
sub lose_pool
{
	my ($kind, $name) = @_;
	if ($kind eq 'semaphore')
	{
		$redis->cli('DEL', $name, "redislock_semaphore_holders:{$name}",
			"redislock_semaphore_timeout:{$name}");
	}
	else
	{
		$redis->cli('DEL', $name, "{$name}:timeout");
	}
}

sub make_pool
{
	my ($kind, $name) = @_;
	$obs->query("SELECT redis_${kind}_try_set_permits('$name', 1)");
}

# More holders than the lock admits, as redis_locks shows them: for name,
# the rows in state held, read as "kind:count".
sub held_rows
{
	my ($name) = @_;
	return $obs->query("SELECT coalesce(string_agg(kind || ':' || hold_count, ',' ORDER BY kind), '')
		FROM redis_locks WHERE name = '$name' AND state = 'held'");
}

sub admits
{
	my ($rows) = @_;
	my (%n, $total);
	for (split /,/, $rows)
	{
		my ($k, $c) = split /:/;
		$n{$k}++;
		$total += $c;
	}
	return 0 if ($n{lock} // 0) + ($n{write} // 0) > 1;
	return 0 if ($n{write} || $n{lock}) && $n{read};
	return 0 if ($n{semaphore} || $n{permit}) && $total > 1;
	return 1;
}

sub a_state
{
	my ($a, $name) = @_;
	return $obs->query("SELECT coalesce(string_agg(state, ','), '') FROM redis_locks
		WHERE pid = " . $a->pid . " AND name = '$name'");
}

my @watchdog = split /,/, RedisLockTest::watchdog_pids($obs);
is(scalar @watchdog, 1, 'one watchdog');
my $stopped = 0;
sub stop_watchdog   { kill 'STOP', @watchdog; $stopped = 1; }
sub resume_watchdog { kill 'CONT', @watchdog if $stopped; $stopped = 0; }

# One pass over every function: A takes (with watchdog lease $wd), $lose
# loses every hold at once, B takes, A re-enters.  With $quiet the watchdog
# stays stopped from the loss until a pool's loss is awaited (the owned
# kinds, whose re-entry Redis refuses, come first).
sub pass_all
{
	my ($how, $lose, $wd, $quiet) = @_;
	my (%a, %b, %name);
	for my $f (sort keys %F)
	{
		my $c = $F{$f};
		(my $n = "$how:$f") =~ s/ /:/g;
		$name{$f} = $n;
		make_pool($c->{pool}, $n) if $c->{pool};
		$a{$f} = RedisLockTest::Session->new($node);
		$b{$f} = RedisLockTest::Session->new($node);
		$a{$f}->query("SET redislock.watchdog_timeout = '$wd'");
		$a{$f}->query('BEGIN') if $c->{xact};
		my $got = $a{$f}->query(sqlf($c->{take}, $n));
		ok(defined $got && $got ne 'f', "$how, $f: A takes it");
	}
	stop_watchdog() if $quiet;
	$lose->(\%name);
	for my $f (sort { ($F{$a}{unowned} // 0) <=> ($F{$b}{unowned} // 0) || $a cmp $b } keys %F)
	{
		my $c = $F{$f};
		my $n = $name{$f};
		resume_watchdog() if $c->{unowned};
		make_pool($c->{pool}, $n) if $c->{pool};
		my $got;
		RedisLockTest::wait_until($RedisLockTest::WAIT, "$how, $f: B takes it",
			sub { $got = $b{$f}->query(sqlf($c->{b}, $n)); defined $got && $got ne 'f' });
		ok(defined $got && $got ne 'f', "$how, $f: B takes it once A's hold is gone");
		my $refused = ($c->{pool} // '') eq 'permit' ? undef : 'f';
		if ($c->{long})
		{
			my ($v, $err) = $a{$f}->try(sqlf($c->{long}, $n));
			is($v, $refused, "$how, $f: A's re-entry with a longer lease is refused")
			  or diag($err // '');
		}
		# a pool's permits are not re-entered: the watchdog finds their loss
		ok(admits(held_rows($n)), "$how, $f: redis_locks shows no second holder after it")
		  or diag(held_rows($n)) unless $c->{pool};
		my ($v, $err) = $a{$f}->try(sqlf($c->{bare}, $n));
		is($v, $refused, "$how, $f: A's lease-less re-entry asks Redis and is refused")
		  or diag($err // '');
		ok(admits(held_rows($n)), "$how, $f: redis_locks shows no second holder")
		  or diag(held_rows($n)) unless $c->{pool};
		until_ok("$how, $f: A's row shows the loss" . ($stopped ? ' (the watchdog stopped)' : ''),
			sub { a_state($a{$f}, $n) =~ /^(lost,?)+$/ });
		ok(admits(held_rows($n)), "$how, $f: redis_locks shows no second holder once the loss shows")
		  or diag(held_rows($n));
	}
	resume_watchdog();
	for my $f (sort keys %F)
	{
		$a{$f}->query($F{$f}{xact} ? 'ROLLBACK' : 'SELECT redis_lock_release_all()');
		$_->close for ($a{$f}, $b{$f});
	}
}

# --- lost by a force release (or, for pools, the keys deleted) ---------------------
pass_all('force', sub {
	my ($name) = @_;
	for my $f (sort keys %F)
	{
		if ($F{$f}{pool}) { lose_pool($F{$f}{pool}, $name->{$f}); }
		else { $obs->query("SELECT redis_lock_force_release('$name->{$f}')"); }
	}
}, '60s', 1);

# --- lost by its lease running out while the watchdog is stopped ---------------------
pass_all('lapse', sub {
	my ($name) = @_;
	my @pids = split /,/, RedisLockTest::watchdog_pids($obs);
	ok(@pids == 1, 'lapse: one watchdog');
	kill 'STOP', @pids;
	for my $f (sort keys %F)
	{
		my $n = $name->{$f};
		if ($F{$f}{pool})
		{
			# the pool's own record of A's permits outlives the lease
			# (redislock gives them back): only their renewal stops
			lose_pool($F{$f}{pool}, $n);
			next;
		}
		until_ok("lapse, $f: the lease runs out in Redis",
			sub { $redis->cli('EXISTS', $n) eq '0' });
	}
	kill 'CONT', @pids;
}, '3s', 0);

# --- on_lock_lost = terminate acts on a loss that a refused re-entry shows --------------
for my $f (sort grep { !$F{$_}{unowned} } keys %F)
{
	my $c = $F{$f};
	(my $n = "term:$f") =~ s/ /:/g;
	my $a = RedisLockTest::Session->new($node);
	my $b = RedisLockTest::Session->new($node);
	$a->query(q{SET redislock.on_lock_lost = terminate});
	$a->query(q{SET redislock.watchdog_timeout = '60s'});
	$a->query('BEGIN') if $c->{xact};
	is($a->query(sqlf($c->{take}, $n)), 't', "terminate, $f: A takes it");
	stop_watchdog();
	$obs->query("SELECT redis_lock_force_release('$n')");
	is($b->query(sqlf($c->{b}, $n)), 't', "terminate, $f: B takes it");
	$a->try(sqlf($c->{long}, $n));
	my $pid = $a->pid;
	until_ok("terminate, $f: A is ended (the watchdog stopped)",
		sub { $obs->query("SELECT count(*) FROM pg_stat_activity WHERE pid = $pid") eq '0' });
	resume_watchdog();
	$b->query('SELECT redis_lock_release_all()');
	$_->close for ($a, $b);
}

# --- a re-entry that Redis never answers changes nothing trusted -------------------------
for my $f (sort grep { !$F{$_}{unowned} } keys %F)
{
	my $c = $F{$f};
	(my $n = "paused:$f") =~ s/ /:/g;
	my $a = RedisLockTest::Session->new($node);
	my $b = RedisLockTest::Session->new($node);
	$a->query(q{SET redislock.watchdog_timeout = '60s'});
	$a->query('BEGIN') if $c->{xact};
	is($a->query(sqlf($c->{take}, $n)), 't', "paused, $f: A takes it");
	$obs->query("SELECT redis_lock_force_release('$n')");
	is($b->query(sqlf($c->{b}, $n)), 't', "paused, $f: B takes it");
	# a transaction goes on past the failed call from its savepoint
	$a->query('SAVEPOINT s') if $c->{xact};
	$redis->pause;
	my ($v, $err) = $a->try(sqlf($c->{long}, $n));
	$redis->resume;
	ok(!defined $v && defined $err, "paused, $f: A's re-entry with a longer lease fails")
	  or diag("got " . ($v // 'NULL'));
	$a->query('ROLLBACK TO SAVEPOINT s') if $c->{xact};
	is($obs->query("SELECT count(*) FROM redis_locks WHERE pid = " . $a->pid . " AND lease > '1 minute'"),
		'0', "paused, $f: the lease the failed call asked for is not A's");
	($v, $err) = $a->try(sqlf($c->{bare}, $n));
	is($v, 'f', "paused, $f: A's lease-less re-entry then asks Redis and is refused")
	  or diag($err // '');
	ok(admits(held_rows($n)), "paused, $f: redis_locks shows no second holder")
	  or diag(held_rows($n));
	$a->query($c->{xact} ? 'ROLLBACK' : 'SELECT redis_lock_release_all()');
	$b->query('SELECT redis_lock_release_all()');
	$_->close for ($a, $b);
}

no_crash_ok($node, 'loss and re-entry');
done_testing();
