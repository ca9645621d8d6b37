# 405_pg_cron.pl — pg_cron jobs take redislock's locks, in both of pg_cron's
# ways of running a job: background workers (cron.use_background_workers =
# on) and libpq connections to the server (off; cron.host is the node's
# Unix socket directory, where pg_hba trusts local connections).  For each:
# jobs take session, transaction, read/write locks, semaphore permits and
# expiring permits; wait for a lock a SQL session holds and one a Redisson
# client holds; time out and say so in cron.job_run_details; are cancelled
# and terminated while waiting and while holding (their locks are gone from
# Redis at once); two copies of one job (as on two servers of a fleet, and
# a Java @Scheduled task on the same lock) never overlap; a job whose lock
# was force-released cannot commit (the commit guard).
#
# Debian 12's pg_cron is 1.4.2, whose finest schedule is one minute (seconds
# came with 1.5): every job of both servers is scheduled for one minute of
# the day, the next ('MI HH24 * * *', UTC as pg_cron 1.4 reads it), so each
# runs once and all at the same time (unscheduling a running job would
# cancel it); the scenarios then play out side by side, each job on locks
# of its own.  The longest wait is the one for that minute.
#
# pg_cron 1.4's launcher reads a running background worker's messages with
# a blocking read (1.5 reads without waiting): while one such job runs, it
# records nothing about the others.  So each scenario waits for what it can
# see (the job's backend waiting, gone; Redis; tables), and the runs'
# status and return_message in cron.job_run_details are checked at the
# end, once every job has ended.  docs/database-jobs.md copies its examples
# from here.
#
# The Redisson client is the real one (RealRedisson: test/redisson-java's
# driver, the newest version in @RealRedisson::VERSIONS); its @Scheduled task
# is test/redisson-java's NightlyReport.nightlyReport(), which the docs page
# copies.  Nothing here needs the transcribed client (FakeRedisson) as a
# Redisson client.
# Takes 1 to 2 min (up to a minute of it waiting for pg_cron's next minute).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;    # only its Redis connection, which redis_cmd uses
use Test::More;

RedisLockTest::require_pg_cron();

my $LONG  = 600_000;    # Redisson lease: 10 min, so only an unlock frees it
my $redis = RedisLockTest::Redis->new;
my ($JAVA_VERSION) = reverse RealRedisson::versions();
my $java  = RealRedisson->new(version => $JAVA_VERSION, port => $redis->port);
my $TICK  = 150;        # bound for a job's run to start: the next minute, and then some

sub key_exists { redis_cmd($redis, 'EXISTS', $_[0]) }

# The job bodies, as users write them: each job calls one function.
# make_report stands for a report's work; here it finishes when the test
# releases test:report-may-finish.
my $setup_sql = <<'SQL';
CREATE TABLE cron_seen(name text, kind text, scope text);
CREATE TABLE guarded(v int);
CREATE TABLE report_runs(server text, outcome text, started timestamptz, ended timestamptz);

CREATE FUNCTION cron_holds(p text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (redis_lock_acquire(p || ':session', '0')
            AND redis_xact_lock_acquire(p || ':xact', '0')
            AND redis_xact_read_lock_acquire(p || ':read', '0')
            AND redis_xact_write_lock_acquire(p || ':write', '0')
            AND redis_xact_semaphore_acquire(p || ':sem', 1, '0')
            AND redis_xact_permit_acquire(p || ':permit', '0') IS NOT NULL) THEN
        RAISE EXCEPTION 'a lock was busy';
    END IF;
    INSERT INTO cron_seen SELECT name, kind, scope FROM redis_locks WHERE pid = pg_backend_pid();
END $$;

CREATE FUNCTION cron_take(lock_name text, wait interval) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT redis_xact_lock_acquire(lock_name, wait) THEN
        RAISE EXCEPTION 'lock % is busy', lock_name;
    END IF;
    RETURN 'took ' || lock_name;
END $$;

CREATE FUNCTION cron_hold_and_work(p text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM redis_lock_acquire(p || ':s');
    PERFORM redis_xact_lock_acquire(p || ':x');
    PERFORM redis_xact_semaphore_acquire(p || ':sem');
    PERFORM pg_sleep(300);    -- the job's work, until cancelled or terminated
END $$;

CREATE FUNCTION cron_guarded(p text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM redis_xact_lock_acquire(p || ':guard');
    INSERT INTO guarded VALUES (1);
    PERFORM redis_xact_lock_acquire(p || ':guard-go');    -- the test's signal to go on
END $$;

CREATE FUNCTION make_report(server text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    started timestamptz := clock_timestamp();
BEGIN
    PERFORM redis_xact_lock_acquire('test:report-may-finish');
    INSERT INTO report_runs VALUES (server, 'done', started, clock_timestamp());
END $$;

CREATE FUNCTION nightly_report(server text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT redis_xact_lock_acquire('jobs:nightly-report', wait => '0') THEN
        INSERT INTO report_runs VALUES (server, 'skipped', clock_timestamp(), NULL);
        RETURN;    -- another server runs it
    END IF;
    PERFORM make_report(server);
END $$;
SQL

# --- two servers, one per way pg_cron runs jobs -----------------------------------
my %n;    # mode => { node, obs, a (session A), jobs => { scenario => jobid }, runs => { scenario => runid } }
for my $mode ('bgw', 'libpq')
{
	my $node = RedisLockTest::node(
		"cron_$mode", $redis,
		start                         => 0,
		preload                       => 0,
		shared_preload_libraries      => 'redislock,pg_cron',
		'cron.database_name'          => 'postgres',
		'cron.use_background_workers' => $mode eq 'bgw' ? 'on' : 'off',
		# pg_cron runs 5 jobs at once by default with background workers
		'cron.max_running_jobs'       => 20,
		max_worker_processes          => 32);
	if ($mode eq 'libpq')
	{
		# pg_cron connects as the job's user to cron.host: here the Unix
		# socket directory, trusted for local connections (the first
		# matching pg_hba line wins).
		$node->append_conf('postgresql.conf', "cron.host = '" . $node->host . "'\n");
		my $hba = $node->data_dir . '/pg_hba.conf';
		my $old = slurp($hba);
		open my $fh, '>', $hba or die "$hba: $!";
		print $fh "local all all trust\n", $old;
		close $fh;
	}
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION redislock; CREATE EXTENSION pg_cron;');
	my $obs = RedisLockTest::observer($node);
	$obs->query($setup_sql);
	$obs->query("SELECT redis_semaphore_try_set_permits('$mode:$_', 1)") for qw(sem c:sem t:sem);
	$obs->query("SELECT redis_permit_try_set_permits('$mode:permit', 1)");
	$n{$mode} = { node => $node, obs => $obs, a => RedisLockTest::Session->new($node) };
}

# What holds what before the jobs run: session A of each server, and the
# Redisson client.
for my $mode (sort keys %n)
{
	my $a = $n{$mode}{a};
	is($a->query("SELECT redis_lock_acquire('$mode:$_')"), 't', "$mode: session A holds $mode:$_")
	  for qw(busy busy-wait busy-c busy-t guard-go);
	is($java->run("holder-$mode", 'tryLock', 'plain', "$mode:java", 0, $LONG), 'true',
		"$mode: the Redisson client holds $mode:java");
}
is($n{bgw}{a}->query("SELECT redis_lock_acquire('test:report-may-finish')"), 't',
	'the reports may not finish yet');

# Every job of both servers at the same minute: the next one, or the one
# after when this one is about to end.
my $when = $n{bgw}{obs}->query(q{SELECT to_char(date_trunc('minute', now() AT TIME ZONE 'UTC')
  + CASE WHEN extract(second FROM now()) < 55 THEN interval '1 min' ELSE interval '2 min' END, 'FMMI FMHH24')});
for my $mode (sort keys %n)
{
	my %cmd = (
		holds        => "SELECT cron_holds('$mode')",
		wait_session => "SELECT cron_take('$mode:busy-wait', '300 s')",
		wait_java    => "SELECT cron_take('$mode:java', '300 s')",
		timeout_wait => "SELECT cron_take('$mode:busy', '1 s')",
		timeout_lt   => "SELECT redis_xact_lock_acquire('$mode:busy') FROM set_config('lock_timeout', '1s', true)",
		cancel_wait  => "SELECT cron_take('$mode:busy-c', '300 s')",
		term_wait    => "SELECT cron_take('$mode:busy-t', '300 s')",
		cancel_hold  => "SELECT cron_hold_and_work('$mode:c')",
		term_hold    => "SELECT cron_hold_and_work('$mode:t')",
		guard        => "SELECT cron_guarded('$mode')",
		report       => "SELECT nightly_report('server-$mode')");
	for my $sc (sort keys %cmd)
	{
		$n{$mode}{jobs}{$sc} = $n{$mode}{obs}->query(
			"SELECT cron.schedule('$mode-$sc', '$when * * *', \$cmd\$$cmd{$sc}\$cmd\$)");
	}
}
until_ok("every job of both servers has started (at $when UTC)", sub {
	for my $m (values %n)
	{
		for my $sc (keys %{ $m->{jobs} })
		{
			next if defined $m->{runs}{$sc};
			$m->{runs}{$sc} = $m->{obs}->query(
				"SELECT min(runid) FROM cron.job_run_details WHERE jobid = $m->{jobs}{$sc} AND job_pid > 0");
			return 0 unless defined $m->{runs}{$sc};
		}
	}
	return 1;
}, $TICK) or BAIL_OUT('pg_cron did not run the jobs');

my @expect;    # [mode, scenario, status, return_message pattern]: checked at the end

for my $mode ('bgw', 'libpq')
{
	my ($node, $obs, $a) = @{ $n{$mode} }{qw(node obs a)};
	my %runid = %{ $n{$mode}{runs} };
	my $run = sub {
		return $obs->dbh->selectrow_hashref(
			"SELECT status, return_message, job_pid FROM cron.job_run_details WHERE runid = $runid{$_[0]}");
	};
	my $pid_of = sub { $run->($_[0])->{job_pid} };
	# Waits for the run's backend to end.
	my $over = sub {
		my ($sc, $status, $msg) = @_;
		my $pid = $pid_of->($sc);
		until_ok("$mode: $sc: the job's backend has ended", sub {
			!defined $obs->query("SELECT 1 FROM pg_stat_activity WHERE pid = $pid") });
		push @expect, [ $mode, $sc, $status, $msg ];
	};
	# Waits for the run's backend to wait for $lock (redis_lock_waits; a
	# Redis round trip alone shows wait_event_type Extension too); returns
	# its pid.
	my $waiting = sub {
		my ($sc, $lock) = @_;
		my $pid;
		until_ok("$mode: $sc: the job's backend waits for $lock", sub {
			$pid = $run->($sc)->{job_pid};
			return 0 unless $pid;
			return ($obs->query("SELECT name FROM redis_lock_waits WHERE pid = $pid") // '') eq $lock
			  && ($obs->query("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $pid") // '') eq 'Extension';
		});
		return $pid;
	};

	# --- every kind of hold ----------------------------------------------------
	{
		$over->('holds', 'succeeded');
		is($obs->query("SELECT string_agg(name || '/' || kind || '/' || scope, ' ' ORDER BY name) FROM cron_seen"),
			join(' ', map { "$mode:$_" } 'permit/permit/transaction', 'read/read/transaction',
				'sem/semaphore/transaction', 'session/lock/session', 'write/write/transaction',
				'xact/lock/transaction'),
			"$mode: ... redis_locks showed each in the job's backend");
		until_ok("$mode: ... and the job's end released all of them in Redis", sub {
			!grep { key_exists("$mode:$_") } qw(session xact read write) });
		is($obs->query("SELECT redis_semaphore_available('$mode:sem')"), 1, "$mode: ... the semaphore permit came back");
		is($obs->query("SELECT redis_permit_available('$mode:permit')"), 1, "$mode: ... the expiring permit came back");
	}

	# --- waits for a lock a SQL session holds ------------------------------------
	{
		my $pid = $waiting->('wait_session', "$mode:busy-wait");
		is($obs->query("SELECT array_to_string(redis_lock_blocking_pids($pid), ',')"), $a->pid,
			"$mode: ... blocked by session A");
		$a->query("SELECT redis_lock_release('$mode:busy-wait')");
		$over->('wait_session', 'succeeded');    # it got the lock when A released it
		until_ok("$mode: ... and released it at its COMMIT", sub { !key_exists("$mode:busy-wait") });
	}

	# --- waits for a lock a Redisson client holds ----------------------------------
	{
		my $pid = $waiting->('wait_java', "$mode:java");
		is($obs->query("SELECT holders[1] FROM redis_lock_waits WHERE pid = $pid"), $java->owner("holder-$mode"),
			"$mode: ... redis_lock_waits names the Redisson owner");
		is($java->run("holder-$mode", 'unlock', 'plain', "$mode:java"), 'null', "$mode: ... Redisson unlocks");
		$over->('wait_java', 'succeeded');
		until_ok("$mode: ... released at its COMMIT", sub { !key_exists("$mode:java") });
	}

	# --- timeouts, reported in cron.job_run_details (checked at the end) ---------------
	$over->('timeout_wait', 'failed', qr/lock $mode:busy is busy/);
	$over->('timeout_lt', 'failed', qr/could not obtain Redis lock "$mode:busy"/);

	# --- cancelled and terminated while waiting ---------------------------------------
	for my $how ('cancel', 'terminate')
	{
		my $sc = $how eq 'cancel' ? 'cancel_wait' : 'term_wait';
		my $lock = $how eq 'cancel' ? "$mode:busy-c" : "$mode:busy-t";
		my $pid = $waiting->($sc, $lock);
		$obs->query("SELECT pg_${how}_backend($pid)");
		$over->($sc, 'failed', $how eq 'cancel' ? qr/canceling statement due to user request/ : undef);
		until_ok("$mode: ... its wait is gone from redis_lock_waits", sub {
			!defined $obs->query("SELECT 1 FROM redis_lock_waits WHERE pid = $pid") });
		is(redis_cmd($redis, 'HGET', $lock, $a->query('SELECT redis_lock_owner_id()')), 1,
			"$mode: ... and A still holds $lock");
	}

	# --- cancelled and terminated while holding -----------------------------------------
	for my $how ('cancel', 'terminate')
	{
		my $sc = $how eq 'cancel' ? 'cancel_hold' : 'term_hold';
		my $p = $how eq 'cancel' ? "$mode:c" : "$mode:t";
		my $pid;
		until_ok("$mode: $how while holding: the job holds its three locks", sub {
			$pid = $run->($sc)->{job_pid};
			$pid && $obs->query("SELECT count(*) FROM redis_locks WHERE pid = $pid") == 3;
		});
		ok(key_exists("$p:s") && key_exists("$p:x"), "$mode: ... in Redis");
		is($obs->query("SELECT redis_semaphore_available('$p:sem')"), 0, "$mode: ... the semaphore's permit too");
		$obs->query("SELECT pg_${how}_backend($pid)");
		until_ok("$mode: ${how}led while holding: its locks are gone from Redis", sub {
			!key_exists("$p:s") && !key_exists("$p:x") });
		until_ok("$mode: ... and its semaphore permit came back", sub {
			$obs->query("SELECT redis_semaphore_available('$p:sem')") == 1 });
		$over->($sc, 'failed', $how eq 'cancel' ? qr/canceling statement due to user request/ : undef);
	}

	# --- the commit guard: a job whose lock was lost cannot commit ---------------------
	{
		my $pid = $waiting->('guard', "$mode:guard-go");
		is($obs->query("SELECT state FROM redis_locks WHERE pid = $pid AND name = '$mode:guard'"), 'held',
			"$mode: the job holds $mode:guard and has written");
		is($java->run('admin', 'forceUnlock', 'plain', "$mode:guard"), 'true',
			"$mode: ... a Redisson client force-unlocks $mode:guard");
		$a->query("SELECT redis_lock_release('$mode:guard-go')");
		$over->('guard', 'failed', qr/"$mode:guard" was lost before COMMIT/);    # the commit guard
		is($obs->query('SELECT count(*) FROM guarded'), 0, "$mode: ... and its write is not committed");
		until_ok("$mode: ... nothing of it is left in Redis", sub {
			!key_exists("$mode:guard") && !key_exists("$mode:guard-go") });
	}
}

# --- one report at a time across the fleet, and a Java @Scheduled task -----------------
{
	my $outcomes = sub {
		join ' ', sort map { @{ $_->{obs}->dbh->selectcol_arrayref('SELECT outcome FROM report_runs') } } values %n;
	};
	my $reporter;
	until_ok('the report job of one server runs the report, the other skips', sub {
		return 0 unless $outcomes->() eq 'skipped';
		for my $mode (keys %n)
		{
			my $pid = $n{$mode}{obs}->query(
				"SELECT job_pid FROM cron.job_run_details WHERE runid = $n{$mode}{runs}{report}");
			$reporter = $mode
			  if $pid && ($n{$mode}{obs}->query("SELECT name FROM redis_lock_waits WHERE pid = $pid") // '')
			  eq 'test:report-may-finish';
		}
		return defined $reporter;
	});
	is($java->run('scheduler', 'task.nightlyReport'), 'skipped',
		'... the Java @Scheduled task skips its run while the report runs');
	$n{bgw}{a}->query("SELECT redis_lock_release('test:report-may-finish')");
	until_ok('... the report is done', sub { $outcomes->() eq 'done skipped' });
	for my $mode (sort keys %n)
	{
		push @expect, [ $mode, 'report', 'succeeded' ];
		my $pid = $n{$mode}{obs}->query("SELECT job_pid FROM cron.job_run_details WHERE runid = $n{$mode}{runs}{report}");
		until_ok("$mode: ... its report job has ended", sub {
			!defined $n{$mode}{obs}->query("SELECT 1 FROM pg_stat_activity WHERE pid = $pid") });
	}
	is($java->run('scheduler', 'task.nightlyReport'), 'ran', '... then the Java task runs the report');
	is(key_exists('jobs:nightly-report'), 0, '... and unlocked jobs:nightly-report');
}

# docs/database-jobs.md shows the Java task as the test runs it.
{
	my $src = slurp("$FindBin::RealBin/../redisson-java/src/main/java/redislock/test/NightlyReport.java");
	my ($method) = $src =~ /^(\t\/\/ In a Spring service:.*?^\t\}\n)/ms;
	$method =~ s/^\t//mg;
	$method =~ s/\t/    /g;
	ok(defined $method, 'NightlyReport.java has nightlyReport()');
	ok(defined $method && index(slurp("$FindBin::RealBin/../../docs/database-jobs.md"), $method) >= 0,
		'docs/database-jobs.md shows nightlyReport() as NightlyReport.java has it');
}

# --- what cron.job_run_details says about each run ----------------------------------------
until_ok('every run has its final status in cron.job_run_details', sub {
	!grep {
		($n{ $_->[0] }{obs}->query("SELECT status FROM cron.job_run_details WHERE runid = $n{$_->[0]}{runs}{$_->[1]}")
			  // '') !~ /^(succeeded|failed)$/
	} @expect;
});
for my $e (@expect)
{
	my ($mode, $sc, $status, $msg) = @$e;
	my $r = $n{$mode}{obs}->dbh->selectrow_hashref(
		"SELECT status, return_message FROM cron.job_run_details WHERE runid = $n{$mode}{runs}{$sc}");
	is($r->{status}, $status, "$mode: cron.job_run_details: $sc $status") or diag($r->{return_message});
	like($r->{return_message}, $msg, "$mode: ... return_message of $sc says why") if $msg;
}

for my $mode (sort keys %n)
{
	$n{$mode}{a}->close;
	no_crash_ok($n{$mode}{node}, $mode);
	$n{$mode}{node}->stop;
}

done_testing();
