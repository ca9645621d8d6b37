# 385_pgbouncer.pl — redislock behind PgBouncer (Debian's pgbouncer) in
# pool_mode = transaction: transaction-scope locks, waits and the
# mutual-exclusion counter work through it; a session-scope lock belongs to
# the server connection, so another client that gets that connection holds
# it too; redislock.warn_session_locks (here set by PgBouncer's
# connect_query) makes session-scope acquisitions warn.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use Test::More;
use Time::HiRes qw(time sleep);

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('pgb', $redis);
my $pgb   = RedisLockTest::PgBouncer->new(
	$node,
	pool_mode => 'transaction',
	databases => {
		pooled => 'pool_size=2',
		one    => 'pool_size=1',
		warned => q{pool_size=1 connect_query='SET redislock.warn_session_locks = on'},
	});
my $obs = RedisLockTest::observer($node);    # straight to PostgreSQL

sub via { RedisLockTest::Session->new($node, $pgb->session_opts($_[0])) }

sub status
{
	my ($name, $col) = @_;
	return $obs->query("SELECT $col FROM redis_lock_status('$name')");
}

# --- 1. a transaction-scope lock through the pooler ---------------------------
my $a = via('pooled');
$a->query('BEGIN');
is($a->query("SELECT redis_xact_lock_acquire('pgb:x', '0')"), 't', 'xact lock taken through PgBouncer');
my $apid = $a->query('SELECT pg_backend_pid()');
is($obs->query("SELECT scope FROM redis_locks WHERE name = 'pgb:x' AND pid = $apid"), 'transaction',
	'... held by the server connection of the transaction');
is(status('pgb:x', 'locked'), 't', '... and in Redis');
$a->query('COMMIT');
is($obs->query("SELECT count(*) FROM redis_locks WHERE name = 'pgb:x'"), 0, 'COMMIT releases it');
is(status('pgb:x', 'locked'), 'f', '... in Redis too');
$a->query('BEGIN');
is($a->query("SELECT redis_xact_lock_acquire('pgb:x', '0')"), 't', 'taken again');
$a->query('ROLLBACK');
is(status('pgb:x', 'locked'), 'f', 'ROLLBACK releases it');

# --- 2. a second client waits, and gets the lock after the first COMMITs ------
my $b = via('pooled');
$a->query('BEGIN');
is($a->query("SELECT redis_xact_lock_acquire('pgb:w', '0')"), 't', 'A holds pgb:w');
$apid = $a->query('SELECT pg_backend_pid()');
my $aowner = $a->query('SELECT redis_lock_owner_id()');

my (undef, $terr, $tstate) = $b->try(
	q{BEGIN; SET LOCAL lock_timeout = '200ms'; SELECT redis_xact_lock_acquire('pgb:w')});
is($tstate, '55P03', "B's wait ends at lock_timeout (55P03)") or diag($terr);
$b->try('ROLLBACK');

$b->query('BEGIN');
my $bpid = $b->query('SELECT pg_backend_pid()');
isnt($bpid, $apid, 'A and B are on two server connections');
$b->start("SELECT redis_xact_lock_acquire('pgb:w')");
ok(RedisLockTest::wait_for_extension_wait($node, $bpid, $RedisLockTest::WAIT), 'B waits');
# libpq's cancel request goes to PgBouncer, which passes it to B's server connection
ok($b->cancel_blocking, "a cancel through PgBouncer");
$b->try('ROLLBACK');
until_ok("... ends B's wait", sub {
	($obs->query("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $bpid") // '') ne 'Extension' });
is(status('pgb:w', 'holders[1]'), $aowner, '... and A still holds pgb:w');
is($b->query('SELECT 1'), 1, 'B goes on');

$b->query('BEGIN');
$bpid = $b->query('SELECT pg_backend_pid()');
my $bowner = $b->query('SELECT redis_lock_owner_id()');
$b->start("SELECT redis_xact_lock_acquire('pgb:w')");
ok(RedisLockTest::wait_for_extension_wait($node, $bpid, $RedisLockTest::WAIT),
	"B's server connection waits in redislock");
ok(!$b->is_done, '... B has not got it');
$a->query('COMMIT');
my ($v, $err) = $b->finish($RedisLockTest::WAIT);
is($v, 't', 'B gets pgb:w after A commits') or diag($err);
is(status('pgb:w', 'holders[1]'), $bowner, "... Redis holder is B's server connection");
$b->query('COMMIT');
is(status('pgb:w', 'locked'), 'f', "B's COMMIT releases it");
$_->close for ($a, $b);

# --- 3. the mutual-exclusion counter through the pooler ----------------------
# Every round is one transaction (a DO block: read, 1 ms sleep, write, under
# redis_xact_lock_acquire), so with more clients than server connections
# PgBouncer runs each client's rounds on whichever connection is free.
my ($clients, $rounds) = (6, 20);
$obs->query(<<'SQL');
CREATE TABLE mutex_counter(v int NOT NULL);
INSERT INTO mutex_counter VALUES (0);
CREATE TABLE counter_backends(pid int NOT NULL);
SQL
my $round_sql = <<'SQL';
DO $$
DECLARE
    cur int;
BEGIN
    PERFORM redis_xact_lock_acquire('pgb:counter');
    SELECT v INTO cur FROM mutex_counter;
    PERFORM pg_sleep(0.001);
    UPDATE mutex_counter SET v = cur + 1;
    INSERT INTO counter_backends VALUES (pg_backend_pid());
END $$
SQL
my @c = map { via('pooled') } 1 .. $clients;
my @left = ($rounds) x $clients;
my @errors;
$_->start($round_sql) for @c;
my $deadline = time() + 600;
while (grep { $_ > 0 } @left)
{
	last if time() > $deadline;
	my $progress = 0;
	for my $i (0 .. $#c)
	{
		next unless $left[$i] > 0 && $c[$i]->is_done;
		my (undef, $e, $state) = $c[$i]->finish;
		push @errors, "[$state] $e" if defined $e;
		$progress = 1;
		$c[$i]->start($round_sql) if --$left[$i] > 0;
	}
	sleep(0.002) unless $progress;
}
is_deeply(\@left, [ (0) x $clients ], 'every client ran all its rounds');
is_deeply(\@errors, [], '... without errors');
is($obs->query('SELECT v FROM mutex_counter'), $clients * $rounds,
	"counter exact: $clients clients x $rounds rounds through PgBouncer");
cmp_ok($obs->query('SELECT count(DISTINCT pid) FROM counter_backends'), '<=', 2,
	"... on at most the pool's 2 server connections");
is(status('pgb:counter', 'locked'), 'f', 'no lock left behind');
$_->close for @c;

# --- 4. a session-scope lock belongs to the server connection ----------------
# One server connection: a second client runs on the very connection the
# first took a session lock on, and "re-enters" a lock it never took.
my $c1 = via('one');
my $c2 = via('one');
is($c1->query("SELECT redis_lock_acquire('pgb:s', '0')"), 't', 'client 1 takes session lock pgb:s');
is($c2->query("SELECT redis_lock_acquire('pgb:s', '0')"), 't',
	'client 2 gets it too: the same server connection holds it');
is($obs->query("SELECT hold_count FROM redis_locks WHERE name = 'pgb:s'"), 2,
	'... as a second hold of one owner (counted in the session: a watchdog re-entry, see 375)');
is($c2->query('SELECT redis_lock_release_all()'), 1, 'client 2 can release what client 1 took');
is(status('pgb:s', 'locked'), 'f', '... gone');
$_->close for ($c1, $c2);

# Two server connections: the client that took a session lock runs its
# release on the other one, where the lock is not held. A client in a
# transaction keeps the lock's connection busy, so that the release cannot
# run there.
my $x = via('pooled');
is($x->query("SELECT redis_lock_acquire('pgb:s2', '0')"), 't', 'X takes session lock pgb:s2');
my $holder = $obs->query("SELECT pid FROM redis_locks WHERE name = 'pgb:s2'");
my @y;
while (1)
{
	my $y = via('pooled');
	$y->query('BEGIN');
	my $ypid = $y->query('SELECT pg_backend_pid()');
	if ($ypid == $holder) { push @y, $y; last; }
	# the other connection: keep it until the holder's is taken too
	push @y, $y;
	die "pool has more than 2 server connections" if @y > 2;
}
my $yh = pop @y;
$_->query('COMMIT') for @y;    # frees the connection without the lock
is($x->query("SELECT redis_lock_release('pgb:s2')"), 'f',
	"X's release runs on the other server connection: not held there");
ok((grep { /WARNING/ } $x->notices), '... with a WARNING');
is(status('pgb:s2', 'locked'), 't', '... and the lock stays held');
is($obs->query("SELECT pid FROM redis_locks WHERE name = 'pgb:s2'"), $holder,
	'... by the server connection that took it');
is($yh->query("SELECT redis_lock_release('pgb:s2')"), 't', 'the client now on that connection releases it');
$yh->query('COMMIT');
is(status('pgb:s2', 'locked'), 'f', '... gone');
$_->close for ($x, $yh, @y);

# --- 5. redislock.warn_session_locks ---------------------------------------------
my $w = via('warned');
is($w->query('SHOW redislock.warn_session_locks'), 'on', "PgBouncer's connect_query turned the warning on");
$w->notices;

# call => [the transaction-scope function the hint names, what the warning names]
my %session = (
	"redis_lock_acquire('pgb:warn', '0')"       => [ 'redis_xact_lock_acquire', 'lock "pgb:warn" belongs' ],
	"redis_read_lock_acquire('pgb:warn:r', '0')" => [ 'redis_xact_read_lock_acquire', 'lock "pgb:warn:r" belongs' ],
	"redis_write_lock_acquire('pgb:warn:w', '0')" => [ 'redis_xact_write_lock_acquire', 'lock "pgb:warn:w" belongs' ],
	# a multi-lock by its lock names, not as the array "{pgb:warn:a,pgb:warn:b}"
	"redis_lock_acquire_all(ARRAY['pgb:warn:a', 'pgb:warn:b'], '0')" =>
	  [ 'redis_xact_lock_acquire_all', 'locks "pgb:warn:a", "pgb:warn:b" belong' ],
);
for my $call (sort keys %session)
{
	my ($xact, $names) = @{ $session{$call} };
	is($w->query("SELECT $call"), 't', "$call through PgBouncer");
	my $n = join("\n", $w->notices);
	like($n, qr/WARNING:  session-scope \Q$names\E to this server connection/, "... warns, naming $names")
	  or diag("notices: $n");
	like($n, qr/HINT:  Use \Q$xact\E\(\), which releases the lock at COMMIT or ROLLBACK/,
		"... and points to $xact()");
}
is($w->query('SELECT redis_lock_release_all()'), 5, 'the warned session locks are released');
$w->notices;

is($w->query(q{BEGIN; SELECT redis_xact_lock_acquire('pgb:warn:x', '0'); COMMIT}), undef,
	'a transaction-scope lock through the same connection');
is(scalar(grep { /WARNING/ } $w->notices), 0, '... does not warn');

my $direct = RedisLockTest::Session->new($node);
is($direct->query("SELECT redis_lock_acquire('pgb:busy', '0')"), 't', 'another session holds pgb:busy');
is($w->query("SELECT redis_lock_acquire('pgb:busy', '0')"), 'f', 'a session lock not obtained');
is(scalar(grep { /WARNING/ } $w->notices), 0, '... does not warn');
$direct->query("SELECT redis_lock_release('pgb:busy')");
$direct->close;
$w->close;

my $p = via('pooled');
is($p->query('SHOW redislock.warn_session_locks'), 'off', 'off by default');
is($p->query("SELECT redis_lock_acquire('pgb:quiet', '0') AND redis_lock_release('pgb:quiet')"), 't',
	'a session lock with the setting off');
is(scalar(grep { /WARNING/ } $p->notices), 0, '... does not warn');
$p->close;

no_crash_ok($node, 'pgbouncer');
done_testing();
