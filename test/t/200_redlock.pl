# Redlock over 5 independent masters (real redis-servers on loopback):
# majority acquisition, clear errors without a majority, Redisson RedLock
# interop, the watchdog keeping (and restoring) a majority, lost locks, and a
# contention run with masters killed and restarted empty during which the
# counter stays exact and fencing tokens strictly increase.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $rl = RedisLockTest::Redlock->new(n => 5);
my $node = RedisLockTest::node('redlock', undef,
	'redislock.redlock_nodes' => $rl->list,
	'redislock.watchdog_timeout' => '3s',
	'max_connections' => '30');

my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $owner_a = $a->query('SELECT redis_lock_owner_id()');

# --- a majority, on every master at once ------------------------------------
is($a->query("SELECT redis_lock_acquire('rl:a', '0', '1 min')"), 't', 'A acquires over 5 masters');
is($rl->holders('rl:a'), 5, 'the hold is on all 5 masters');
is($a->query("SELECT masters FROM redis_locks WHERE name = 'rl:a'"), '5/5', 'redis_locks: held on 5/5 masters');
is($a->query('SELECT mode FROM redis_lock_stats'), 'redlock', 'redis_lock_stats names the mode');
is($a->query("SELECT mode FROM redis_lock_status('rl:a')"), 'redlock', 'status names the mode');
is($a->query("SELECT held_by_me FROM redis_lock_status('rl:a')"), 't', 'status: held by A');
is($a->query("SELECT count(*) FROM redis_lock_nodes('rl:a') WHERE locked AND error IS NULL"), 5,
	'redis_lock_nodes: one row per master, all locked');
is($b->query("SELECT redis_lock_acquire('rl:a', '0', '1 min')"), 'f', 'B is refused');
my $owner_b = $b->query('SELECT redis_lock_owner_id()');
is(scalar(grep { $_->cli('HEXISTS', 'rl:a', $owner_b) } $rl->nodes), 0,
	'... and leaves no hold of its own behind');
my $t1 = $a->query("SELECT redis_lock_fencing_token('rl:a')");

# a waiter is woken by the release (the holder's lease is 1 min)
$b->start("SELECT redis_lock_acquire('rl:a', '30 s', '1 min')");
waits_ok($b, 'B waits for rl:a');
is($a->query("SELECT redis_lock_release('rl:a')"), 't', 'A releases');
my ($v) = $b->finish(30);
is($v, 't', 'B gets the lock after the release');
cmp_ok($b->query("SELECT redis_lock_fencing_token('rl:a')"), '>', $t1, "B's token is above A's");
is($b->query("SELECT redis_lock_release('rl:a')"), 't', 'B releases');
is($rl->holders('rl:a'), 0, 'no hold left on any master');

# fair locks cannot be kept in order across independent masters
my (undef, $err, $state) = $a->try("SELECT redis_lock_acquire('rl:f', '0', '1 min', true)");
is($state, '0A000', 'fair lock with redlock: 0A000');

# --- Redisson's RedLock over the same masters excludes us and vice versa -----
my @java = map { FakeRedisson->new(port => $_->port) } $rl->nodes;
my $LONG = 60000;
my $got = grep { !defined $_->try_lock('rl:j', 1, $LONG) } @java[0 .. 2];
is($got, 3, 'a Redisson RedLock takes 3 of the 5 masters');
is($a->query("SELECT redis_lock_acquire('rl:j', '0', '1 min')"), 'f', 'then we cannot get a majority');
is($rl->holders('rl:j'), 3, '... and gave back what we got');
$_->unlock('rl:j', 1) for @java[0 .. 2];
is($a->query("SELECT redis_lock_acquire('rl:j', '0', '1 min')"), 't', 'after Redisson unlocks, we acquire');
my $java_got = grep { !defined $_->try_lock('rl:j', 1, $LONG) } @java;
cmp_ok($java_got, '<', 3, 'now Redisson cannot get a majority');
$java[$_]->unlock('rl:j', 1) for 0 .. 4;
is($a->query("SELECT redis_lock_release('rl:j')"), 't', 'we release');

# --- 2 masters down: still a majority; 3 down: a clear error -----------------
$rl->kill9(3);
$rl->kill9(4);
is($a->query("SELECT redis_lock_acquire('rl:k', '0', '1 min')"), 't', 'with 2 of 5 masters dead, acquisition works');
is($b->query("SELECT redis_lock_acquire('rl:k', '0', '1 min')"), 'f', '... and excludes others');
is($a->query("SELECT redis_lock_release('rl:k')"), 't', '... and releases');
$rl->kill9(2);
($v, $err, $state) = $a->try("SELECT redis_lock_acquire('rl:k', '0', '1 min')");
is($state, '08006', 'with 3 of 5 masters dead: 08006');
like($err // '', qr/Only 2 of 5 Redlock masters answered, 3 needed/, '... saying how many answered');
like($err // '', qr/127\.0\.0\.1:\d+": Connection refused/, '... and naming the failed masters');
is($a->query("SELECT count(*) FROM redis_locks WHERE name = 'rl:k' AND state <> 'unsettled'"), 0,
	'nothing is recorded as held');
is($a->query("SELECT state FROM redis_locks WHERE name = 'rl:k'"), 'unsettled',
	'the masters that answered may have granted it: the worker is to settle it');
$rl->restart_empty($_) for 2 .. 4;

# --- a silent master (SIGSTOP) does not hold up the others -------------------
# With a 5 min command timeout, waiting for it would run into the statement
# timeout; once a majority answered, a straggler only gets a short grace.
$rl->node(1)->pause;
$b->query("SET redislock.command_timeout = '5min'");
$b->query("SET statement_timeout = '60s'");
($v, $err, $state) = $b->try("SELECT redis_lock_acquire('rl:p', '0', '1 min')");
is($v, 't', 'with one master silent, acquisition completes on the others') or diag($err);
($v, $err, $state) = $b->try("SELECT redis_lock_release('rl:p')");
is($v, 't', '... and so does the release') or diag($err);
$rl->node(1)->resume;
$b->query('RESET redislock.command_timeout');
$b->query('RESET statement_timeout');

# --- the watchdog keeps a majority and restores lost holds -----------------
is($a->query("SELECT redis_lock_acquire('rl:w')"), 't', 'A takes rl:w in watchdog mode (3 s lease)');
$rl->restart_empty(0);
$rl->restart_empty(1);
until_ok('the watchdog restores the hold on the masters restarted empty',
	sub { $rl->holders('rl:w') == 5 });
is($a->query("SELECT state FROM redis_locks WHERE name = 'rl:w'"), 'held', 'rl:w is still held');
until_ok('redis_locks shows the hold on 5/5 masters again',
	sub { $a->query("SELECT masters FROM redis_locks WHERE name = 'rl:w'") eq '5/5' });
is($b->query("SELECT redis_lock_acquire('rl:w', '0', '1 min')"), 'f', 'and still excludes B');

# three masters losing it: below a majority, the lock is lost (they are all
# down before the first comes back, so no renewal can restore one in between)
$rl->kill9($_) for 0 .. 2;
$rl->restart_empty($_) for 0 .. 2;
until_ok('rl:w is reported lost', sub {
	$a->query("SELECT state FROM redis_locks WHERE name = 'rl:w'") eq 'lost' });
(undef, $err, $state) = $a->try('CREATE TABLE guard(i int)');
is($state, '55P03', 'the commit guard stops a writing transaction under the lost lock');
$a->query("SELECT redis_lock_release_all()");

# --- contention run: masters die and come back empty during it ---------------
my $setup = RedisLockTest::Session->new($node);
$setup->query(<<'SQL');
CREATE TABLE counter(v int NOT NULL);
INSERT INTO counter VALUES (0);
CREATE TABLE tokens(id serial PRIMARY KEY, token bigint NOT NULL);
CREATE PROCEDURE bump(rounds int)
LANGUAGE plpgsql AS $$
DECLARE
    cur int;
BEGIN
    FOR i IN 1 .. rounds LOOP
        PERFORM redis_xact_lock_acquire('rl:ctr', NULL, '10 s');
        SELECT v INTO cur FROM counter;
        PERFORM pg_sleep(0.001);
        UPDATE counter SET v = cur + 1;
        INSERT INTO tokens(token) VALUES (redis_lock_fencing_token('rl:ctr'));
        COMMIT;
    END LOOP;
END $$;
SQL
# A holder whose majority included both killed masters really loses the
# lock (Redlock tolerates losing masters beyond a majority, not below it):
# the commit guard then stops its transaction with 55P03, and the session
# starts again. Mutual exclusion means no update is ever lost: the counter
# equals the number of committed rounds.
my $SESSIONS = 4;
my @s = map { RedisLockTest::Session->new($node) } 1 .. $SESSIONS;
$_->start('CALL bump(60)') for @s;
my %running = map { $_ => $_ } @s;
my (@errors, $guarded);
my $pump = sub {
	for my $s (grep { $_->is_done } values %running)
	{
		my ($r, $e, $st) = $s->finish(10);
		delete $running{$s};
		next unless defined $e;
		if (($st // '') eq '55P03' && $guarded++ < 20)
		{
			$s->start('CALL bump(20)');
			$running{$s} = $s;
		}
		else
		{
			push @errors, "[" . ($st // '') . "] $e";
		}
	}
};
my $progress = sub { $pump->(); $setup->query('SELECT v FROM counter') };
my $at = 0;
until_ok('the run makes progress', sub { ($at = $progress->()) >= 20 });
$rl->kill9(3);
$rl->kill9(4);
until_ok('progress with 2 masters dead', sub { $progress->() >= $at + 20 });
$at = $progress->();
$rl->restart_empty(3);
$rl->restart_empty(4);
until_ok('progress after they came back empty', sub { $progress->() >= $at + 20 });
until_ok('every session finished', sub { $pump->(); !%running }, 600);
is(scalar(@errors), 0, 'contention run: no errors but lost-lock commits refused') or diag(join("\n", @errors));
note('commits refused by the commit guard: ' . ($guarded // 0));
my $v_end = $setup->query('SELECT v FROM counter');
my $rounds = $setup->query('SELECT count(*) FROM tokens');
cmp_ok($rounds, '>=', 100, "many rounds committed ($rounds)");
is($v_end, $rounds, 'the counter equals the committed rounds: mutual exclusion held throughout');
is($setup->query(<<'SQL'), 0, 'fencing tokens strictly increase from holder to holder');
SELECT count(*) FROM (SELECT token, lag(token) OVER (ORDER BY id) AS prev FROM tokens) t
WHERE prev IS NOT NULL AND token <= prev
SQL
is($rl->holders('rl:ctr'), 0, 'no hold left');

# read-write locks, multi-locks, semaphores and latches are refused with
# Redlock, before Redis
for my $call ("redis_read_lock_acquire('rl:rw')", "redis_write_lock_acquire('rl:rw')",
	"redis_xact_read_lock_acquire('rl:rw')", "redis_lock_acquire_all(ARRAY['rl:m1', 'rl:m2'])",
	"redis_semaphore_try_set_permits('rl:sem', 1)", "redis_semaphore_acquire('rl:sem')",
	"redis_xact_semaphore_acquire('rl:sem')", "redis_semaphore_available('rl:sem')",
	"redis_permit_try_set_permits('rl:sem', 1)", "redis_permit_acquire('rl:sem')",
	"redis_latch_try_set_count('rl:latch', 1)", "redis_latch_await('rl:latch')")
{
	my (undef, $err, $st) = $a->try("SELECT $call");
	is($st, '0A000', "$call: 0A000 with Redlock") or diag($err);
}
is($a->query("SELECT count(*) FROM redis_locks WHERE name LIKE 'rl:rw' OR name LIKE 'rl:m_' OR name = 'rl:sem'"), 0,
	'... and nothing is taken');

no_crash_ok($node, 'redlock');
done_testing();
