# 110_worker.pl — the "redislock watchdog" background worker and the settings
# around it: the worker runs when preloaded, reloads its settings on SIGHUP
# (it follows a redislock.url change), what pg_terminate_backend does to it,
# clean stop; without preloading, watchdog-mode acquires and the views fail
# with a clear error while fixed leases work; GUC defaults, limits and
# privileges.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $T = 60;

# No process of the node died of a signal (and no assertion failure / PANIC).
sub worker_pids
{
	my ($s) = @_;
	return map { $_->[0] } $s->rows(
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'redislock watchdog' ORDER BY pid");
}

my $redis  = RedisLockTest::Redis->new;
my $redis2 = RedisLockTest::Redis->new;
my $node   = RedisLockTest::node('worker', $redis);
my $obs    = RedisLockTest::observer($node);
my $r1     = FakeRedisson::Conn->new(port => $redis->port);
my $r2     = FakeRedisson::Conn->new(port => $redis2->port);

# --- 1. the worker runs -------------------------------------------------------------
my @w;
until_ok("one 'redislock watchdog' in pg_stat_activity",
	sub { @w = worker_pids($obs); @w == 1 });
my $worker = $w[0];
is($obs->query("SELECT backend_type FROM pg_stat_activity WHERE pid = $worker"),
	'redislock watchdog', 'backend_type is redislock watchdog');

# --- 2. GUCs: defaults, limits, privileges ---------------------------------------------
my $su = RedisLockTest::Session->new($node);
is($su->query('SHOW redislock.verify_on_commit'), 'on', 'verify_on_commit defaults to on');
is($su->query('SHOW redislock.sync_replicas'), '0', 'sync_replicas defaults to 0');
is($su->query('SHOW redislock.max_locks'), '4096', 'max_locks defaults to 4096');
is($su->query('SHOW redislock.watchdog_timeout'), '30s', 'watchdog_timeout defaults to 30s');
is($su->query("SELECT context FROM pg_settings WHERE name = 'redislock.max_locks'"),
	'postmaster', 'max_locks needs a restart (context postmaster)');
is($su->query("SELECT min_val FROM pg_settings WHERE name = 'redislock.max_locks'"),
	'16', 'max_locks minimum is 16');
is($su->query("SELECT unit || ':' || min_val FROM pg_settings WHERE name = 'redislock.watchdog_timeout'"),
	'ms:1000', 'watchdog_timeout is in ms with minimum 1 s');
for my $g (qw(command_timeout connect_timeout))
{
	is($su->query("SELECT unit FROM pg_settings WHERE name = 'redislock.$g'"), 'ms',
		"$g is in ms");
	my (undef, $err) = $su->try("SET redislock.$g = '250ms'");
	ok(!defined $err, "$g settable per session") or diag($err);
	$su->query("RESET redislock.$g");
}
{
	my (undef, $err, $st) = $su->try("SET redislock.max_locks = 100");
	is($st, '55P02', 'SET max_locks at run time: 55P02 (cant_change_runtime_param)')
	  or diag($err);
	(undef, $err, $st) = $su->try("SET redislock.watchdog_timeout = '500ms'");
	is($st, '22023', 'watchdog_timeout below 1 s is rejected (22023)') or diag($err);
	(undef, $err, $st) = $su->try("SET redislock.sync_replicas = -1");
	is($st, '22023', 'negative sync_replicas is rejected (22023)') or diag($err);
	(undef, $err) = $su->try("SET redislock.watchdog_timeout = '1s'");
	ok(!defined $err, 'superuser sets watchdog_timeout = 1s for the session') or diag($err);
	is($su->query('SHOW redislock.watchdog_timeout'), '1s', '... and it shows 1s');
	(undef, $err) = $su->try("SET redislock.verify_on_commit = off; SET redislock.sync_replicas = 0");
	ok(!defined $err, 'verify_on_commit and sync_replicas settable per session') or diag($err);
	$su->query('RESET ALL');
}
$node->safe_psql('postgres', 'CREATE ROLE plain LOGIN; GRANT USAGE ON SCHEMA public TO plain');
{
	my $pl = RedisLockTest::Session->new($node, user => 'plain');
	my (undef, $err, $st) = $pl->try("SET redislock.watchdog_timeout = '1s'");
	is($st, '42501', 'a non-superuser cannot SET watchdog_timeout (42501)') or diag($err);
	(undef, $err) = $pl->try("SET redislock.verify_on_commit = off");
	ok(!defined $err, 'a non-superuser may SET verify_on_commit') or diag($err);
	# views are readable by everyone
	(undef, $err) = $pl->try('SELECT count(*) FROM redis_locks');
	ok(!defined $err, 'a non-superuser reads redis_locks') or diag($err);
	(undef, $err) = $pl->try('SELECT acquires FROM redis_lock_stats');
	ok(!defined $err, 'a non-superuser reads redis_lock_stats') or diag($err);
	$pl->close;
}

# --- 3. the worker renews (baseline, old url) -----------------------------------------
{
	my $a = RedisLockTest::Session->new($node);
	$a->query("SET redislock.watchdog_timeout = '1s'");
	my $before = lock_stats($obs)->{renewals};
	is($a->query("SELECT redis_lock_acquire('hup:before')"), 't', 'watchdog lock on the first redis');
	is($r1->cmd('EXISTS', 'hup:before'), 1, 'key in the first redis');
	until_ok('the worker renews it (renewals +3)', sub { lock_stats($obs)->{renewals} >= $before + 3 });
	ok($r1->cmd('PTTL', 'hup:before') > 0, 'still held after 3 renewals of a 1 s lease');
	is($a->query("SELECT redis_lock_release('hup:before')"), 't', 'released');
	$a->close;
}

# --- 4. SIGHUP: the worker follows a redislock.url change -------------------------------
# A lock taken in the second redis after the reload is renewed only if the
# worker also switched: renewing in the first redis would find nothing and
# mark it lost.
$node->append_conf('postgresql.conf', "redislock.url = '" . $redis2->url . "'\n");
$node->reload;
{
	my $url2 = $redis2->url;
	my $b;
	until_ok('new sessions see the new url', sub {
		$b = RedisLockTest::Session->new($node);
		$b->query('SHOW redislock.url') eq $url2;
	});
	is_deeply([ worker_pids($obs) ], [$worker], 'reload does not restart the worker');
	$b->query("SET redislock.watchdog_timeout = '1s'");
	my $s0 = lock_stats($obs);
	is($b->query("SELECT redis_lock_acquire('hup:after')"), 't', 'watchdog lock after the reload');
	is($r2->cmd('EXISTS', 'hup:after'), 1, 'it is in the second redis');
	is($r1->cmd('EXISTS', 'hup:after'), 0, 'not in the first');
	my $id = $b->query('SELECT redis_lock_owner_id()');
	until_ok('renewed 4 times after the reload (>1 lease)',
		sub { lock_stats($obs)->{renewals} >= $s0->{renewals} + 4 });
	is($r2->cmd('HEXISTS', 'hup:after', $id), 1, 'still held in the second redis');
	ok($r2->cmd('PTTL', 'hup:after') > 0, 'PTTL > 0');
	is($obs->query("SELECT state FROM redis_locks WHERE name = 'hup:after'"), 'held',
		'redis_locks: held');
	is(lock_stats($obs)->{lost_locks}, $s0->{lost_locks}, 'nothing reported lost');
	is(lock_stats($obs)->{renewal_failures}, $s0->{renewal_failures}, 'no renewal failures');
	is($b->query("SELECT redis_lock_release('hup:after')"), 't', 'released');
	is($r2->cmd('EXISTS', 'hup:after'), 0, 'key gone');
	$b->close;
}

# --- 5. pg_terminate_backend of the worker ---------------------------------------------
# The worker must come back (bgw_restart_time 5 s): while none runs, watchdog
# leases lapse.  PostgreSQL unregisters a background worker that exits with
# code 0, so the worker has to exit non-zero on SIGTERM for this.  The lock
# held meanwhile has a 15 s lease, longer than the restart delay, so the new
# worker must find it still held and renew it.
{
	my $a = RedisLockTest::Session->new($node);
	$a->query("SET redislock.watchdog_timeout = '15s'");
	is($a->query("SELECT redis_lock_acquire('term:held')"), 't', 'watchdog lock (15 s) held across the worker kill');
	my $id = $a->query('SELECT redis_lock_owner_id()');
	is($obs->query("SELECT pg_terminate_backend($worker)"), 't', 'pg_terminate_backend(worker)');
	until_ok('old worker gone', sub { !grep { $_ == $worker } worker_pids($obs) }, 30);
	my @nw;
	my $back = RedisLockTest::wait_until(30, 'a new watchdog', sub {
		@nw = worker_pids($obs);
		@nw == 1 && $nw[0] != $worker;
	});
	ok($back, 'a new redislock watchdog runs after pg_terminate_backend of the old one')
	  or diag('observed: no redislock watchdog within 30 s of pg_terminate_backend');
	if ($back)
	{
		$worker = $nw[0];
		my $ren0 = $obs->query("SELECT extract(epoch FROM renewed_at) FROM redis_locks WHERE name = 'term:held'");
		until_ok('the new worker renews the lock (renewed_at advances)', sub {
			$obs->query("SELECT extract(epoch FROM renewed_at) FROM redis_locks WHERE name = 'term:held'") > $ren0;
		});
		is($r2->cmd('HEXISTS', 'term:held', $id), 1, 'lock still held after the worker change');
		is($obs->query("SELECT state FROM redis_locks WHERE name = 'term:held'"), 'held', 'redis_locks: held');
		is($a->query("SELECT redis_lock_release('term:held')"), 't', 'released');
	}
	else
	{
		$a->query("SELECT redis_lock_release('term:held')");
		$a->notices;
	}
	$a->close;
}

# A server restart brings the worker back in any case.
$node->restart;
$obs = RedisLockTest::observer($node);
until_ok('a watchdog runs after a server restart', sub { @w = worker_pids($obs); @w == 1 });
{
	my $a = RedisLockTest::Session->new($node);
	$a->query("SET redislock.watchdog_timeout = '1s'");
	my $r0 = lock_stats($obs)->{renewals};
	is($a->query("SELECT redis_lock_acquire('restart:held')"), 't', 'watchdog lock after restart');
	until_ok('renewed again (renewals +3)', sub { lock_stats($obs)->{renewals} >= $r0 + 3 });
	ok($r2->cmd('PTTL', 'restart:held') > 0, 'still held');
	is($a->query("SELECT redis_lock_release('restart:held')"), 't', 'released');
	$a->close;
}

# --- 6. clean stop ------------------------------------------------------------------
no_crash_ok($node, 'before stop');
my $logpos = length(slurp($node->logfile));
$node->stop('fast');
my $tail = substr(slurp($node->logfile), $logpos);
# exit code 1 is how a worker that wants to be restarted ends; anything else
# (other codes, signals) is not a clean stop.
unlike($tail, qr/redislock watchdog.*(?:exited with exit code (?:[2-9]|\d\d)|terminated by signal)/,
	'the worker stops cleanly with the server');
like($tail, qr/database system is shut down/, 'server shut down');
no_crash_ok($node, 'after stop');

# --- 7. without shared_preload_libraries ----------------------------------------------
my $np = RedisLockTest::node('nopreload', $redis, preload => 0, create_extension => 0);
{
	my $s = RedisLockTest::Session->new($np);
	my ($v, $err, $st) = $s->try('CREATE EXTENSION redislock');
	ok(!defined $err, 'CREATE EXTENSION works without preloading')
	  or diag("CREATE EXTENSION without shared_preload_libraries failed [" . ($st // '') . "]: $err\n"
		  . join("\n", grep { /FATAL|ERROR/ } split /\n/, slurp($np->logfile)));
	SKIP: {
		skip 'the library cannot be loaded without preloading', 16 if defined $err;
		is($s->query("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'redislock watchdog'"),
			0, 'no watchdog without preloading');
		($v, $err, $st) = $s->try("SELECT redis_lock_acquire('np:wd')");
		is($st, '55000', 'watchdog-mode acquire without preloading: 55000') or diag($err);
		like($err // '', qr/shared_preload_libraries/, 'the message says shared_preload_libraries');
		like($err // '', qr/HINT:.*shared_preload_libraries/s, 'and the hint names it too');
		is($r1->cmd('EXISTS', 'np:wd'), 0, 'nothing taken in Redis');
		($v, $err, $st) = $s->try("SELECT redis_xact_lock_acquire('np:wd')");
		is($st, '55000', 'same for a transaction lock without a lease') or diag($err);
		is($s->query("SELECT redis_lock_acquire('np:fixed', '0', '10 s')"), 't',
			'a fixed lease works without preloading');
		my $id = $s->query('SELECT redis_lock_owner_id()');
		is($r1->cmd('HEXISTS', 'np:fixed', $id), 1, '... held in Redis');
		my $pttl = $r1->cmd('PTTL', 'np:fixed');
		ok($pttl > 0 && $pttl <= 10000, '... with the 10 s lease') or diag("PTTL $pttl");
		for my $view (qw(redis_locks redis_lock_stats))
		{
			($v, $err, $st) = $s->try("SELECT * FROM $view");
			like($err // '', qr/redislock must be loaded via shared_preload_libraries/,
				"$view errors without preloading");
			is($st, '55000', "$view: SQLSTATE 55000");
		}
		is($s->query("SELECT redis_lock_release('np:fixed')"), 't', 'release works without preloading');
		is($r1->cmd('EXISTS', 'np:fixed'), 0, 'key gone');
		is($s->query('SELECT 1'), '1', 'session still fine');
	}
	$s->close;
}
no_crash_ok($np, 'no-preload node');
$np->stop('fast');

done_testing();
