# 247_release_error_reply.pl — a release that Redis refuses with an error
# reply (here READONLY: the server is made a replica of a dead address for
# the call, which keeps its data) leaves the hold held, and its later loss
# is reported like any other.
#
# A last release marks the hold "being released" (in the shared slot, so
# that a renewal crossing the release is not taken for a loss, test 245;
# and in the session, so that a repeated call after a lost reply finds the
# hold gone without a warning). Both marks used to stay after an error
# reply: the watchdog then never reported the hold's loss (no WARNING,
# 'held' for ever, redislock.on_lock_lost did nothing), and a later release
# of the lost hold said true.
#
# For every kind whose release goes through that path (lock, read lock,
# write lock, semaphore permits, expiring permit, a multi-lock released by
# redis_lock_release_all): watchdog mode — the release fails, the hold is
# then deleted in Redis, and the watchdog reports it lost (server log,
# redis_locks 'lost', on_lock_lost = cancel cancels the holder's statement);
# a release then says false with "was no longer held". Fixed lease (no
# watchdog: the session's own mark alone) — the release fails, the hold is
# deleted, a release says false with "was no longer held".
# Takes about 15 s.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use Test::More;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('release_error_reply', $redis);
my $obs   = RedisLockTest::observer($node);
my $dead  = RedisLockTest::free_port();    # nothing listens there

sub state_of
{
	my ($name) = @_;
	return $obs->query("SELECT string_agg(state, ',') FROM redis_locks WHERE name = '$name'");
}

# Redis answers every write with -READONLY while it follows a master that
# cannot be reached; it keeps its data.
sub read_only
{
	my ($on) = @_;
	$redis->cli('REPLICAOF', $on ? ('127.0.0.1', $dead) : ('NO', 'ONE'));
	until_ok('Redis is ' . ($on ? 'a replica' : 'a master again'), sub {
		($redis->cli('ROLE') // '') =~ ($on ? qr/^slave/ : qr/^master/) });
}

# kind, name, how to take it (watchdog; fixed lease or undef), how to give
# it back (%s: what the take returned), how to lose it in Redis
my @kinds = (
	[ 'lock', 'ere:lock',
		"SELECT redis_lock_acquire('%n')", "SELECT redis_lock_acquire('%n', '0', '10 min')",
		"SELECT redis_lock_release('%n')",
		sub { $redis->cli('DEL', $_[0]) } ],
	[ 'read lock', 'ere:read',
		"SELECT redis_read_lock_acquire('%n')", "SELECT redis_read_lock_acquire('%n', '0', '10 min')",
		"SELECT redis_read_lock_release('%n')",
		sub { $redis->cli('DEL', $_[0]) } ],
	[ 'write lock', 'ere:write',
		"SELECT redis_write_lock_acquire('%n')", "SELECT redis_write_lock_acquire('%n', '0', '10 min')",
		"SELECT redis_write_lock_release('%n')",
		sub { $redis->cli('DEL', $_[0]) } ],
	[ 'semaphore', 'ere:sem',
		"SELECT redis_semaphore_try_set_permits('%n', 3) AND redis_semaphore_acquire('%n', 2)", undef,
		"SELECT redis_semaphore_release('%n', 2)",
		sub { $redis->cli('HDEL', "redislock_semaphore_holders:{$_[0]}", $_[1]) } ],
	[ 'expiring permit', 'ere:pes',
		"SELECT redis_permit_try_set_permits('%n', 3) AND set_config('ere.permit', redis_permit_acquire('%n'), false) IS NOT NULL",
		"SELECT redis_permit_try_set_permits('%n', 3) AND set_config('ere.permit', redis_permit_acquire('%n', '0', '10 min'), false) IS NOT NULL",
		"SELECT redis_permit_release('%n', current_setting('ere.permit'))",
		sub { $redis->cli('DEL', "{$_[0]}:timeout") } ],
	[ 'multi-lock', 'ere:multi',
		"SELECT redis_lock_acquire_all(ARRAY['%n', '%n:2'])",
		"SELECT redis_lock_acquire_all(ARRAY['%n', '%n:2'], '0', '10 min')",
		'SELECT redis_lock_release_all()',
		sub { $redis->cli('DEL', $_[0], "$_[0]:2") } ],
);

for my $k (@kinds)
{
	my ($kind, $name, $take_wd, $take_fixed, $release, $lose) = @$k;
	for my $lease (qw(watchdog fixed))
	{
		my $take = $lease eq 'watchdog' ? $take_wd : $take_fixed;
		next unless defined $take;
		my $what = "$kind/$lease";
		my $n    = "$name:$lease";
		(my $t = $take)    =~ s/%n/$n/g;
		(my $r = $release) =~ s/%n/$n/g;
		my $a = RedisLockTest::Session->new($node);
		my $pid = $a->pid;
		my $owner = $a->query('SELECT redis_lock_owner_id()');
		$a->query("SET redislock.watchdog_timeout = '1s'; SET redislock.on_lock_lost = cancel");
		is($a->query($t), 't', "$what: A holds $n");

		read_only(1);
		my (undef, $err) = $a->try($r);
		like($err // '', qr/READONLY/, "$what: the release fails: Redis answered READONLY")
		  or diag("release gave: " . ($err // 'no error'));
		read_only(0);
		is(state_of($n), 'held', "$what: the hold is still shown held");

		if ($lease eq 'watchdog')
		{
			$a->start('SELECT pg_sleep(600)');
			until_ok("$what: A's statement runs", sub {
				($obs->query("SELECT wait_event FROM pg_stat_activity WHERE pid = $pid") // '') eq 'PgSleep' });
			$lose->($n, $owner);
			# a hold never reported lost would make every later wait run out:
			# once is enough to show it
			my $reported = until_ok("$what: the server log reports the loss", sub {
				slurp($node->logfile) =~ /"\Q$n\E" held by the session with PID $pid was lost/ });
			if ($reported)
			{
				until_ok("$what: redis_locks shows it lost", sub { (state_of($n) // '') =~ /^lost/ });
				my (undef, $cerr, $st) = $a->finish($RedisLockTest::WAIT);
				is($st, '57014', "$what: on_lock_lost = cancel cancelled A's statement") or diag($cerr);
				told_like($node, $cerr, $pid, qr/because Redis .*"\Q$n\E(:2)?" was lost/, "$what: ... naming the hold");
			}
			else
			{
				is(state_of($n), 'lost', "$what: redis_locks shows it lost");
				ok($a->is_done, "$what: on_lock_lost = cancel cancelled A's statement");
				$a->cancel;
			}
		}
		else
		{
			$lose->($n, $owner);
		}
		$a->notices;
		my ($v, $rerr) = $a->try($r);
		is($rerr, undef, "$what: a release now ends without error");
		is($v, $kind eq 'multi-lock' ? 0 : 'f', "$what: ... and says nothing was released");
		like(join("\n", $a->notices), qr/was no longer held/, "$what: ... with a WARNING saying so");
		$a->close;
	}
}

done_testing();
