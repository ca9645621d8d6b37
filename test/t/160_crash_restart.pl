# 160_crash_restart.pl — PostgreSQL crash-restart (kill -9 of a backend, and
# kill -9 of the watchdog itself): the postmaster reinitialises, a new
# watchdog starts, the dead sessions' watchdog locks are no longer renewed
# (PTTL only goes down) and expire within their lease, and new sessions get
# a new owner-id instance part.  The only "terminated by signal" lines in the
# log are the processes this test killed.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;
use Time::HiRes qw(sleep);

my $T = 60;

sub instance_of { my ($id) = @_; return (split /:/, $id)[0]; }

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('crash', $redis,
	'redislock.watchdog_timeout' => '2s',
	'restart_after_crash'        => 'on');
my $rc = FakeRedisson::Conn->new(port => $redis->port);
my %killed;    # pids this test killed with SIGKILL

# Waits until the node accepts connections again after a crash and the
# watchdog runs; returns the new observer.
sub wait_recovered
{
	my ($what) = @_;
	my $obs;
	until_ok("$what: server accepts connections again", sub {
		$obs = eval { RedisLockTest::Session->new($node) };
		$obs && defined $obs->query('SELECT 1');
	});
	until_ok("$what: a watchdog runs again", sub { defined RedisLockTest::watchdog_pids($obs) });
	return $obs;
}

# After the crash nothing may renew these keys: their PTTL only goes down
# until they are gone.  Polls every 100 ms, bounded.
sub expire_without_renewal_ok
{
	my ($what, @keys) = @_;
	my %last;
	my @rose;
	my $gone = RedisLockTest::wait_until($T, "$what: keys expire", sub {
		my $left = 0;
		for my $k (@keys)
		{
			my $p = $rc->cmd('PTTL', $k);
			next if $p == -2;
			$left++;
			push @rose, "$k: $last{$k} -> $p" if defined $last{$k} && $p > $last{$k};
			push @rose, "$k: PTTL $p above the 2 s lease" if $p > 2000;
			$last{$k} = $p;
		}
		return $left == 0;
	});
	ok($gone, "$what: the dead sessions' watchdog locks expired");
	ok(!@rose, "$what: their PTTL never went up (nothing renewed them)") or diag(join("\n", @rose));
}

# --- 1. kill -9 of a regular backend ---------------------------------------------------
my $obs = RedisLockTest::Session->new($node);
my $old_worker = RedisLockTest::watchdog_pids($obs);
ok(defined $old_worker, "watchdog running ($old_worker)");
my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $a_id = $a->query('SELECT redis_lock_owner_id()');
my $b_id = $b->query('SELECT redis_lock_owner_id()');
is(instance_of($a_id), instance_of($b_id), 'sessions share the instance part of the owner id');
isnt($a_id, $b_id, 'but not the session number');
is($a->query("SELECT redis_lock_acquire('cr:a1')"), 't', 'A holds cr:a1 (watchdog, 2 s)');
is($a->query("SELECT redis_lock_acquire('cr:a2')"), 't', 'A holds cr:a2');
is($b->query("SELECT redis_lock_acquire('cr:b1')"), 't', 'B holds cr:b1');
my $r0 = lock_stats($obs)->{renewals};
until_ok('the locks are being renewed', sub { lock_stats($obs)->{renewals} >= $r0 + 3 });

my $victim = $b->pid;
$killed{$victim} = 1;
ok(kill('KILL', $victim), "kill -9 backend $victim (B)");
until_ok('postmaster reports the crash', sub {
	slurp($node->logfile) =~ /(?:server process|client backend) \(PID $victim\) was terminated by signal 9/;
});
$_->close for grep { $_->{dbh} } ($a, $b, $obs);
$obs = wait_recovered('backend crash');
my $new_worker = RedisLockTest::watchdog_pids($obs);
isnt($new_worker, $old_worker, "a new watchdog ($new_worker)");
is($obs->query('SELECT count(*) FROM redis_locks'), 0, 'redis_locks is empty after the reinitialisation');
is(lock_stats($obs)->{renewals}, 0, 'counters start again from zero');
expire_without_renewal_ok('backend crash', 'cr:a1', 'cr:a2', 'cr:b1');

my $c = RedisLockTest::Session->new($node);
my $c_id = $c->query('SELECT redis_lock_owner_id()');
isnt(instance_of($c_id), instance_of($a_id), "new owner-id instance part after the crash ($c_id)");
is($c->query("SELECT redis_lock_acquire('cr:a1', '0')"), 't', 'a new session takes cr:a1 at once');
is($rc->cmd('HEXISTS', 'cr:a1', $c_id), 1, 'held by the new session');
is($c->query("SELECT redis_lock_release('cr:a1')"), 't', 'released');

# --- 2. kill -9 of the watchdog itself ------------------------------------------------------
# PostgreSQL treats a background worker killed by a signal as a crash too:
# everything restarts, including the watchdog.
my $d = RedisLockTest::Session->new($node);
my $d_id = $d->query('SELECT redis_lock_owner_id()');
is($d->query("SELECT redis_lock_acquire('cr:d1')"), 't', 'D holds cr:d1');
$r0 = lock_stats($obs)->{renewals};
until_ok('renewed by the new watchdog', sub { lock_stats($obs)->{renewals} >= $r0 + 3 });
$killed{$new_worker} = 1;
ok(kill('KILL', $new_worker), "kill -9 the watchdog $new_worker");
until_ok('postmaster reports the worker crash', sub {
	slurp($node->logfile) =~ /redislock watchdog" \(PID $new_worker\) was terminated by signal 9/;
});
$_->close for grep { $_->{dbh} } ($c, $d, $obs);
$obs = wait_recovered('watchdog crash');
my $third_worker = RedisLockTest::watchdog_pids($obs);
ok($third_worker ne $new_worker && $third_worker ne $old_worker, "yet another watchdog ($third_worker)");
expire_without_renewal_ok('watchdog crash', 'cr:d1');
my $e = RedisLockTest::Session->new($node);
my $e_id = $e->query('SELECT redis_lock_owner_id()');
isnt(instance_of($e_id), instance_of($d_id), 'new instance part again');
$e->query("SET redislock.watchdog_timeout = '1s'");
is($e->query("SELECT redis_lock_acquire('cr:e1')"), 't', 'E holds cr:e1');
$r0 = lock_stats($obs)->{renewals};
until_ok('the restarted watchdog renews (renewals +4)', sub { lock_stats($obs)->{renewals} >= $r0 + 4 });
is($rc->cmd('HEXISTS', 'cr:e1', $e_id), 1, 'cr:e1 still held');
is($e->query("SELECT redis_lock_release('cr:e1')"), 't', 'released');
$e->close;

# --- 3. the log: only the processes we killed died of a signal ---------------------------
my @sig = grep { /was terminated by signal/ } split /\n/, slurp($node->logfile);
my @unexpected = grep { my $l = $_; !grep { $l =~ /\(PID $_\) was terminated by signal 9/ } keys %killed } @sig;
is(scalar(@sig), 2, 'two processes terminated by a signal (the two we killed)') or diag(join("\n", @sig));
ok(!@unexpected, 'no other process died of a signal') or diag(join("\n", @unexpected));
my @trap = grep { /TRAP:|PANIC:/ } split /\n/, slurp($node->logfile);
ok(!@trap, 'no assertion failure or PANIC') or diag(join("\n", @trap));

$obs->close;
$node->stop('fast');
done_testing();
