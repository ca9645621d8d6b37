# 420_hot_standby.pl — redislock on a streaming replica in recovery (hot
# standby), with redislock preloaded there too and the same Redis: every
# kind of hold and wait (session, transaction, read, write, semaphore,
# expiring permit, count-down latch, multi-lock) works from the standby
# against holders on the primary; the watchdog renews there; the views work
# there; a failover: the primary's sessions' locks expire within their
# lease (nobody renews them), so a standby session waiting for one gets it;
# a promotion while a standby session holds a lock: the lock stays held and
# renewed across it, and is released once.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $WD      = 2;    # redislock.watchdog_timeout, seconds
my $redis   = RedisLockTest::Redis->new;
my $primary = RedisLockTest::node('primary', $redis,
	'redislock.watchdog_timeout' => "${WD}s",
	init                         => { allows_streaming => 1 });
$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);    # postgresql.conf too: redislock preloaded
$standby->start;
$primary->wait_for_catchup($standby);

sub key_exists { redis_cmd($redis, 'EXISTS', $_[0]) }

my $p   = RedisLockTest::Session->new($primary);
my $s   = RedisLockTest::Session->new($standby);
my $sob = RedisLockTest::observer($standby);
is($s->query('SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');
is($s->query("SELECT extversion FROM pg_extension WHERE extname = 'redislock'"),
	$p->query("SELECT extversion FROM pg_extension WHERE extname = 'redislock'"), '... with redislock (replicated)');

$p->query("SELECT redis_semaphore_try_set_permits('sb:sem', 1)");
$p->query("SELECT redis_permit_try_set_permits('sb:permit', 1)");

# --- every kind of hold and wait on the standby ---------------------------------------
# hold/release: on the standby; seen: on the primary, what the hold looks like
# from there; block/unblock: a primary session holding what the standby's
# wait then waits for (wait_name in redis_lock_waits).  %V% is the value the
# matching take returned (a permit id).
my @cases = (
	{ kind => 'lock', hold => "SELECT redis_lock_acquire('sb:lock', '0')", release => "SELECT redis_lock_release('sb:lock')",
	  seen => ["SELECT redis_lock_acquire('sb:lock', '0')", 'f'],
	  block => "SELECT redis_lock_acquire('sb:lock')", unblock => "SELECT redis_lock_release('sb:lock')",
	  wait => "SELECT redis_lock_acquire('sb:lock', '60 s')", wait_name => 'sb:lock' },
	{ kind => 'transaction lock', hold => "BEGIN; SELECT redis_xact_lock_acquire('sb:xact', '0')", release => 'COMMIT',
	  seen => ["SELECT redis_lock_acquire('sb:xact', '0')", 'f'],
	  block => "SELECT redis_lock_acquire('sb:xact')", unblock => "SELECT redis_lock_release('sb:xact')",
	  wait => "SELECT redis_xact_lock_acquire('sb:xact', '60 s')", wait_name => 'sb:xact' },
	{ kind => 'read lock', hold => "SELECT redis_read_lock_acquire('sb:rw', '0')", release => "SELECT redis_read_lock_release('sb:rw')",
	  seen => ["SELECT redis_write_lock_acquire('sb:rw', '0')", 'f'],
	  block => "SELECT redis_write_lock_acquire('sb:rw')", unblock => "SELECT redis_write_lock_release('sb:rw')",
	  wait => "SELECT redis_read_lock_acquire('sb:rw', '60 s')", wait_name => 'sb:rw' },
	{ kind => 'write lock', hold => "SELECT redis_write_lock_acquire('sb:rw', '0')", release => "SELECT redis_write_lock_release('sb:rw')",
	  seen => ["SELECT redis_read_lock_acquire('sb:rw', '0')", 'f'],
	  block => "SELECT redis_read_lock_acquire('sb:rw')", unblock => "SELECT redis_read_lock_release('sb:rw')",
	  wait => "SELECT redis_write_lock_acquire('sb:rw', '60 s')", wait_name => 'sb:rw' },
	{ kind => 'semaphore', hold => "SELECT redis_semaphore_acquire('sb:sem', 1, '0')", release => "SELECT redis_semaphore_release('sb:sem')",
	  seen => ["SELECT redis_semaphore_available('sb:sem')", 0],
	  block => "SELECT redis_semaphore_acquire('sb:sem')", unblock => "SELECT redis_semaphore_release('sb:sem')",
	  wait => "SELECT redis_semaphore_acquire('sb:sem', 1, '60 s')", wait_name => 'sb:sem' },
	{ kind => 'expiring permit', hold => "SELECT redis_permit_acquire('sb:permit', '0')", release => "SELECT redis_permit_release('sb:permit', '%V%')",
	  seen => ["SELECT redis_permit_available('sb:permit')", 0],
	  block => "SELECT redis_permit_acquire('sb:permit')", unblock => "SELECT redis_permit_release('sb:permit', '%V%')",
	  wait => "SELECT redis_permit_acquire('sb:permit', '60 s')", wait_name => 'sb:permit' },
	{ kind => 'latch', hold => "SELECT redis_latch_try_set_count('sb:latch', 1)", release => "SELECT redis_latch_count_down('sb:latch') = 0",
	  seen => ["SELECT redis_latch_count('sb:latch')", 1],
	  block => "SELECT redis_latch_try_set_count('sb:latch', 1)", unblock => "SELECT redis_latch_count_down('sb:latch') = 0",
	  wait => "SELECT redis_latch_await('sb:latch', '60 s')", wait_name => 'sb:latch', no_release_after_wait => 1 },
	{ kind => 'multi-lock', hold => "SELECT redis_lock_acquire_all(ARRAY['sb:m1', 'sb:m2'], '0')",
	  release => "SELECT redis_lock_release('sb:m1') AND redis_lock_release('sb:m2')",
	  seen => ["SELECT redis_lock_acquire('sb:m2', '0')", 'f'],
	  block => "SELECT redis_lock_acquire('sb:m2')", unblock => "SELECT redis_lock_release('sb:m2')",
	  wait => "SELECT redis_lock_acquire_all(ARRAY['sb:m1', 'sb:m2'], '60 s')", wait_name => 'sb:m1' },
);

sub taken { my ($v) = @_; return defined $v && ($v eq 't' || $v =~ /^[0-9a-f]{32}$/) }
sub with_v { my ($sql, $v) = @_; $sql =~ s/%V%/$v/g; return $sql }

for my $c (@cases)
{
	my $k = $c->{kind};
	# held by a standby session
	my $v = $s->query($c->{hold});
	ok(taken($v), "standby: $k taken") or diag("got " . ($v // 'NULL'));
	is($p->query($c->{seen}[0]), $c->{seen}[1], "... the primary sees it ($c->{seen}[0])");
	my $r = $s->query(with_v($c->{release}, $v));
	is($r, 't', "standby: $k released") if $c->{release} ne 'COMMIT';
	# a standby session waits for a primary session
	my $b = $p->query($c->{block});
	ok(taken($b), "primary: $k taken");
	$s->start($c->{wait});
	until_ok("standby: waits for the $k (redis_lock_waits there shows $c->{wait_name})", sub {
		($sob->query('SELECT name FROM redis_lock_waits WHERE pid = ' . $s->pid) // '') eq $c->{wait_name} });
	is($p->query(with_v($c->{unblock}, $b)), 't', "primary: $k released");
	my ($w, $err) = $s->finish($RedisLockTest::WAIT);
	ok(taken($w), "standby: ... and the waiter got it") or diag($err // ('got ' . ($w // 'NULL')));
	$s->query(with_v($c->{release}, $w)) unless $c->{no_release_after_wait} || $c->{kind} eq 'transaction lock';
}
ok(!grep({ key_exists($_) } qw(sb:lock sb:xact sb:rw sb:m1 sb:m2)), 'no lock is left in Redis');
is($p->query("SELECT redis_semaphore_available('sb:sem')"), 1, '... the semaphore has its permit');
is($p->query("SELECT redis_permit_available('sb:permit')"), 1, '... and the expiring permit is back');

# --- the watchdog renews on the standby, and the views ----------------------------------------
{
	is($s->query("SELECT redis_lock_acquire('sb:wd')"), 't', 'standby: a watchdog-mode lock taken');
	is($sob->query("SELECT scope || '/' || renewal || '/' || state FROM redis_locks WHERE name = 'sb:wd' AND pid = " . $s->pid),
		'session/watchdog/held', '... redis_locks on the standby shows it');
	until_ok("... held for 3 watchdog_timeout periods (${WD}s), renewed", sub {
		$sob->query("SELECT renewed_at - acquired_at > interval '" . (3 * $WD) . " s' FROM redis_locks WHERE name = 'sb:wd'") eq 't'
		  && key_exists('sb:wd') });
	ok(redis_cmd($redis, 'PTTL', 'sb:wd') > 0, '... and alive in Redis');
	cmp_ok($sob->query('SELECT renewals FROM redis_lock_stats'), '>=', 3, '... redis_lock_stats on the standby counts the renewals');
	is($sob->query('SELECT lost_locks FROM redis_lock_stats'), 0, '... and no lost lock');
	is($s->query("SELECT redis_lock_release('sb:wd')"), 't', '... released');
}

# --- failover: the primary's locks expire within their lease; a promotion while a standby session holds a lock ---
{
	is($s->query("SELECT redis_lock_acquire('sb:promote')"), 't', 'standby: session S holds sb:promote (watchdog mode)');
	is($p->query("SELECT redis_lock_acquire('sb:primary-held')"), 't', 'primary: a session holds sb:primary-held (watchdog mode)');
	my $w = RedisLockTest::Session->new($standby);
	$w->start("SELECT redis_lock_acquire('sb:primary-held', '60 s')");
	until_ok('standby: session W waits for it', sub {
		($sob->query('SELECT name FROM redis_lock_waits WHERE pid = ' . $w->pid) // '') eq 'sb:primary-held' });
	$p->close;
	$primary->stop('immediate');
	my ($v, $err) = $w->finish($RedisLockTest::WAIT);
	is($v, 't', "the primary is gone: nobody renews its lock, which expires within its lease; W gets it") or diag($err);

	my $stats0 = lock_stats($s);
	$standby->promote;
	until_ok('the standby is promoted', sub { $sob->query('SELECT pg_is_in_recovery()') eq 'f' });
	is($s->query('SELECT pg_is_in_recovery()'), 'f', "S's session lives on, out of recovery");
	my $promoted = $sob->query('SELECT now()');
	until_ok('sb:promote is renewed after the promotion', sub {
		$sob->query("SELECT renewed_at > '$promoted'::timestamptz + interval '" . (2 * $WD) . " s' FROM redis_locks WHERE name = 'sb:promote'") eq 't' });
	ok(key_exists('sb:promote'), '... and held in Redis');
	is($sob->query("SELECT state FROM redis_locks WHERE name = 'sb:promote'"), 'held', '... state held');
	is($s->query("SELECT redis_lock_release('sb:promote')"), 't', 'S releases it once');
	ok(!key_exists('sb:promote'), '... gone from Redis');
	my $stats1 = lock_stats($s);
	is($stats1->{releases} - $stats0->{releases}, 1, '... one release counted since the promotion');
	is($stats1->{lost_locks}, 0, '... no lost lock');
	is($stats1->{worker_released} - $stats0->{worker_released}, 0, '... nothing released by the worker');
	my ($r) = $s->try("SELECT redis_lock_release('sb:promote')");
	is($r, 'f', '... a second release finds nothing to release');
	$w->query("SELECT redis_lock_release('sb:primary-held')");
}

no_crash_ok($standby, 'standby');
done_testing();
