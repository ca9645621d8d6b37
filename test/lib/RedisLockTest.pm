# RedisLockTest.pm — the harness of redislock's multi-session TAP tests
# (test/t, test/faults/t, bench): package RedisLockTest's functions; it loads
# RedisLockTest::Redis, ::Cluster, ::Redlock, ::Session, ::TLS and
# ::PgBouncer from RedisLockTest/.

=pod

=head1 NAME

RedisLockTest - helpers for redislock's multi-session TAP tests

=head1 SYNOPSIS

  use strict; use warnings;
  use Test::More;
  use RedisLockTest;

  my $redis = RedisLockTest::Redis->new(appendonly => 1);
  my $node  = RedisLockTest::node('main', $redis,
                  'redislock.watchdog_timeout' => '3s');

  my $a = RedisLockTest::Session->new($node);
  my $b = RedisLockTest::Session->new($node);
  is($a->query("SELECT redis_lock_acquire('k')"), 't', 'A holds k');
  $b->start("SELECT redis_lock_acquire('k', '30s')");
  ok(RedisLockTest::wait_for_extension_wait($node, $b->pid, 10), 'B waits');
  $a->query("SELECT redis_lock_release('k')");
  my ($v, $err) = $b->finish(10);
  is($v, 't', 'B got k after A released');
  done_testing();

Run with (see test/run-all.sh, which sets this up):

  TESTDIR=<dir> PG_REGRESS=<pgxs>/src/test/regress/pg_regress \
  PATH=/usr/lib/postgresql/15/bin:$PATH \
  prove -I test/lib -I <pgxs>/src/test/perl test/t/xxx.pl

=head1 DESCRIPTION

Everything here waits on observable state with a bounded timeout; nothing
sleeps and hopes.  Every redis-server this module starts is stopped when its
object goes away or the test script exits (END), including when the script is
killed with SIGINT/SIGTERM/SIGHUP (turned into die so END blocks run, which
also lets PostgreSQL::Test::Cluster tear its nodes down).

Session values come back as text the way psql prints them: booleans are
"t"/"f" (DBD::Pg pg_bool_tf), NULL is undef.

=cut

package RedisLockTest;

use strict;
use warnings;

use Carp qw(croak);
use File::Path qw(mkpath rmtree);
use IO::Socket::INET;
use Time::HiRes qw(time sleep);
use Test::More ();
use PostgreSQL::Test::Utils ();
use PostgreSQL::Test::Cluster;

# The harness's other packages, one per file in RedisLockTest/ (as
# PostgreSQL::Test::Cluster and ::Utils): loaded here, so that a test needs
# only "use RedisLockTest;".
use RedisLockTest::Redis;
use RedisLockTest::Cluster;
use RedisLockTest::Redlock;
use RedisLockTest::Session;
use RedisLockTest::TLS;
use RedisLockTest::PgBouncer;

our $POLL_INTERVAL = 0.05;    # seconds between polls in wait_until

# Turn fatal signals into die so that END blocks (ours and Cluster.pm's) run
# and no redis-server or postmaster is left behind.  Only if nobody else has
# claimed the signal.
for my $sig (qw(INT TERM HUP))
{
	$SIG{$sig} = sub { die "killed by SIG$sig\n" }
	  if !defined $SIG{$sig} || $SIG{$sig} eq '' || $SIG{$sig} eq 'DEFAULT';
}

use Exporter qw(import);
our @EXPORT = qw(until_ok waits_ok told_like slurp no_crash_ok lock_stats sql_literal sqlf counter_run
  first_done_ok fair_queue fair_queue_len fair_timeout_count redis_cmd);

# Bound for things that should happen "at once", in seconds; a test may raise it.
our $WAIT = 60;

=pod

=head1 FUNCTIONS

=over

=item RedisLockTest::free_port()

A TCP port on 127.0.0.1 that is free right now.  Chosen at random in
61000..64999: above Linux's default ephemeral range (32768..60999, so an
outgoing connection cannot squat on it between a Redis stop and restart) and
above PostgreSQL::Test::Cluster's range (10200..32767, so a node cannot take
it either).  Each port is handed out at most once per test process.

=cut

my %ports_given;

sub free_port
{
	for (1 .. 1000)
	{
		my $port = 61000 + int(rand(4000));
		next if $ports_given{$port};
		my $sock = IO::Socket::INET->new(
			LocalAddr => '127.0.0.1',
			LocalPort => $port,
			Proto     => 'tcp',
			Listen    => 1,
			ReuseAddr => 1);
		next unless $sock;
		close $sock;
		$ports_given{$port} = 1;
		return $port;
	}
	croak "free_port: no free port found in 61000..64999";
}

=pod

=item RedisLockTest::wait_until($timeout_s, $desc, sub { ... })

Polls the predicate every ~50 ms until it returns true or $timeout_s seconds
have passed.  Returns 1 if it became true, 0 on timeout (and emits a diag
naming $desc).  Exceptions from the predicate count as "not yet" (the last one
is shown in the diag on timeout).

=cut

sub wait_until
{
	my ($timeout, $desc, $pred) = @_;
	croak "wait_until: predicate must be a code ref" unless ref $pred eq 'CODE';
	my $deadline = time() + $timeout;
	my $last_err;
	while (1)
	{
		my $ok = eval { $pred->() };
		if ($@) { $last_err = $@; chomp $last_err; }
		return 1 if $ok;
		last if time() >= $deadline;
		sleep($POLL_INTERVAL);
	}
	Test::More::diag("wait_until: timed out after ${timeout}s waiting for: $desc"
		  . (defined $last_err ? " (last error: $last_err)" : ''));
	return 0;
}

=pod

=item RedisLockTest::observer($node)

A cached RedisLockTest::Session on $node used for looking at the server
(pg_stat_activity, redis_locks ...) without disturbing the sessions under
test.  Reconnects if the cached connection died (e.g. after a node restart).

=cut

my %observers;

sub observer
{
	my ($node) = @_;
	my $key = $node->name . ':' . $node->port;
	my $s = $observers{$key};
	if (!$s || !$s->{dbh} || !$s->{dbh}->ping)
	{
		$s->close if $s;
		$s = RedisLockTest::Session->new($node);
		$observers{$key} = $s;
	}
	return $s;
}

=pod

=item RedisLockTest::wait_for_extension_wait($node, $pid, $timeout_s)

Waits (bounded, default 30 s) until pg_stat_activity on $node shows backend
$pid with wait_event_type = 'Extension'.  Returns 1/0 like wait_until.

=cut

sub wait_for_extension_wait
{
	my ($node, $pid, $timeout) = @_;
	$timeout //= 30;
	croak "wait_for_extension_wait: bad pid" unless defined $pid && $pid =~ /^\d+$/;
	return wait_until(
		$timeout,
		"backend $pid in wait_event_type 'Extension'",
		sub {
			my $t = observer($node)->query(
				"SELECT wait_event_type FROM pg_stat_activity WHERE pid = $pid");
			return defined $t && $t eq 'Extension';
		});
}

=pod

=item RedisLockTest::watchdog_pids($session)

The pids of the node's redislock watchdog processes (backend_type
'redislock watchdog' in pg_stat_activity, as $session sees it), joined by
commas; undef while none runs.

=cut

sub watchdog_pids
{
	my ($s) = @_;
	return $s->query("SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE backend_type = 'redislock watchdog'");
}

=pod

=item RedisLockTest::node($name, $redis, %conf)

Creates, configures and starts a PostgreSQL::Test::Cluster node and returns it.
postgresql.conf gets C<shared_preload_libraries = 'redislock'>, C<redislock.url>
pointing at $redis (a RedisLockTest::Redis, or undef for no url line), then
every other key => value of %conf as C<key = 'value'> (values are quoted for
you; quoted values are valid for every GUC type).  Then
C<CREATE EXTENSION redislock> runs in database postgres.

Options (removed from %conf before writing it):

  preload          => 0   do not write shared_preload_libraries
  create_extension => 0   do not CREATE EXTENSION
  init             => {...}  extra arguments for $node->init
  start            => 0   configure only; do not start (implies no CREATE EXTENSION)

redislock.semaphore_recheck is 0 unless %conf sets it: a semaphore waiter's
wake in a test must be the message's, not its periodic re-check.

The cluster is made with C<initdb --encoding=UTF8 --locale=C>, whatever the
machine's locale: without a configured locale initdb would pick SQL_ASCII,
where the tests' UTF-8 names mean other bytes and DBD::Pg refuses wide
characters.  C<< init => { extra => [...] } >> options come after these, so
a test may still ask for another encoding or locale.

=cut

sub node
{
	my ($name, $redis, %conf) = @_;
	my $preload   = exists $conf{preload}          ? delete $conf{preload}          : 1;
	my $create    = exists $conf{create_extension} ? delete $conf{create_extension} : 1;
	my $init_args = exists $conf{init}             ? delete $conf{init}             : {};
	my $start     = exists $conf{start}            ? delete $conf{start}            : 1;

	my %init = %$init_args;
	$init{extra} = [ '--encoding=UTF8', '--locale=C', @{ $init{extra} // [] } ];
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%init);

	my $lines = "\n# Added by RedisLockTest::node\n";
	$lines .= "shared_preload_libraries = 'redislock'\n" if $preload;
	# A semaphore waiter re-checks every 5 s by default, which would explain
	# its wake within any of the tests' bounds: a wake must be the message's.
	# Tests of the re-check set it themselves.
	$conf{'redislock.semaphore_recheck'} //= '0';
	$lines .= "redislock.url = '" . $redis->url . "'\n" if defined $redis;
	for my $k (sort keys %conf)
	{
		my $v = $conf{$k};
		$v =~ s/'/''/g;
		$lines .= "$k = '$v'\n";
	}
	$node->append_conf('postgresql.conf', $lines);

	return $node unless $start;
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION redislock') if $create;
	return $node;
}

=pod

=item RedisLockTest::pg_cron_missing()

Why pg_cron cannot be used with the PostgreSQL the tests run (the first
C<pg_config> on PATH, which run-all.sh puts REDISLOCK_PGBIN's directory in
front of): its library or control file is not installed there, or its
version is older than 1.4 (the tests use cron.job_run_details and named
jobs as 1.4 has them).  undef when it can.

=item RedisLockTest::require_pg_cron()

Skips the whole test file, loudly, when pg_cron_missing gives a reason: a
diag line "SKIPPED: <reason>" and C<plan skip_all> with the reason, which
run-all.sh counts and names in its summary ("run-all: SKIPPED ...").
The reason ends with Debian's package for the major, postgresql-<major>-cron
(test/setup-deps.sh and test/chroot/make.sh install it where the suite has
it; Debian has none for PostgreSQL 19 yet).

=cut

sub pg_cron_missing
{
	my ($pkglib, $share) = map {
		my $v = `pg_config --$_ 2>/dev/null`;
		chomp $v;
		$v;
	} qw(pkglibdir sharedir);
	return "pg_config not found on PATH" if $pkglib eq '' || $share eq '';
	my $pg = 'PostgreSQL ' . (pg_major() // '');
	my $control = "$share/extension/pg_cron.control";
	return "pg_cron is not installed in this $pg ($pkglib/pg_cron.so missing)"
	  unless -f "$pkglib/pg_cron.so";
	return "pg_cron is not installed in this $pg ($control missing)"
	  unless -f $control;
	my ($version) = slurp($control) =~ /^\s*default_version\s*=\s*'([^']*)'/m;
	return "pg_cron $version is older than 1.4"
	  unless defined $version && $version =~ /^(\d+)\.(\d+)/ && ($1 > 1 || $2 >= 4);
	return undef;
}

# The major of the pg_config on PATH.
sub pg_major
{
	my ($major) = `pg_config --version 2>/dev/null` =~ /PostgreSQL (\d+)/;
	return $major;
}

sub require_pg_cron
{
	my $why = pg_cron_missing();
	return unless defined $why;
	Test::More::diag("SKIPPED: $why (Debian: apt-get install postgresql-" . (pg_major() // 'NN')
		  . "-cron, where the suite has it)");
	Test::More::plan(skip_all => $why);
}

=pod

=back

=cut

# ---------------------------------------------------------------------------

=pod

=over

=item until_ok($desc, $predicate [, $timeout])

A test that passes once $predicate returns true, polled up to $timeout
seconds ($RedisLockTest::WAIT by default).

=item waits_ok($session [, $what])

A test that passes once the session's backend waits with wait_event_type
Extension, i.e. blocks inside redislock.

=item slurp($file)

The whole file as a string ('' if it cannot be read).

=item no_crash_ok($node, $what)

A test that the node's server log shows no crashed process, TRAP or PANIC.

=item lock_stats($session)

The redis_lock_stats row as a hash reference.

=item counter_run($node, $lock, $sessions, $rounds)

The mutual-exclusion check: $sessions sessions at once each run $rounds
rounds of read, 1 ms sleep, write of one counter row, each round under
redis_xact_lock_acquire($lock) and committed. Returns the final counter
(exact only if the lock excluded) and the errors, "[SQLSTATE] message".

=item sql_literal($bytes)

An E'' SQL literal for a UTF-8 byte string (quotes, backslashes,
newlines). Names are kept as bytes for Redis; DBD::Pg wants characters and
would encode bytes >= 0x80 a second time.

=item first_done_ok($desc, @sessions)

A test that passes once one of @sessions has returned from its started
statement (is_done), polled up to $RedisLockTest::WAIT seconds.  Returns
the index in @sessions of the first one found done, looking in list order,
or undef on timeout.  Undefined entries are skipped, so a caller can leave
out sessions (e.g. those already done) and keep its own indexes:

  my $i = first_done_ok('a waiter returns', map { $done{$_} ? undef : $w[$_] } 0 .. $#w);

=item fair_queue($conn, $name)

The owner ids in the fair queue of lock $name, head first, as an array
reference: LRANGE 0 -1 of Redisson's redisson_lock_queue:{$name} (the key
FakeRedisson::queue_key gives).  $conn is a Redis connection with a cmd
method: a FakeRedisson::Conn or FakeRedisson (test/redisson/FakeRedisson.pm,
which the caller loads).

=item fair_queue_len($conn, $name)

The length of that queue (LLEN).

=item fair_timeout_count($conn, $name)

How many entries the fair lock's timeout set redisson_lock_timeout:{$name}
(FakeRedisson::timeout_key) holds (ZCARD).

=item RedisLockTest::stop_listener($node)

Stops (SIGSTOP) the node's "redislock listener" worker where it holds
nothing that others wait for: in its wait for events (wait_event_type
Extension), not during a look at the wait board, whose lock every new wait
takes. Bounded; returns its pid (SIGCONT it to resume), undef if it could
not be stopped there.

=item redis_cmd($r, @cmd)

Runs @cmd on the RedisLockTest::Redis $r over a RESP connection kept per
port and opened again after a restart (FakeRedisson::conn_to; the caller
loads FakeRedisson) and returns the reply: a string or number, an array
reference for a multi-bulk reply.  Dies on a Redis error reply.  Over TLS
for a TLS server ($r->tls_opts).

=back

=cut

sub until_ok
{
	my ($desc, $pred, $t) = @_;
	return Test::More::ok(wait_until($t // $WAIT, $desc, $pred), $desc);
}

sub waits_ok
{
	my ($s, $what) = @_;
	return Test::More::ok(wait_for_extension_wait($s->{node}, $s->pid, $WAIT),
		($what // "backend " . $s->pid) . " waits (wait_event_type Extension)");
}

# told_like($node, $err, $pid, qr/.../, $what): what the client was told
# about its failed statement matches: from the client where it has the
# message; DBD::Pg 3.19 and later (Debian's for PostgreSQL 18) give a
# statement that was cancelled only its SQLSTATE, and then the server log
# shows the ERROR or DETAIL line the backend with that pid sent.
sub told_like
{
	my ($node, $err, $pid, $re, $what) = @_;
	return Test::More::like($err // '', $re, $what)
	  unless ($err // '') =~ /^the statement failed with SQLSTATE/;
	return until_ok("$what (server log)", sub {
		slurp($node->logfile) =~ /^[^\n]*\[$pid\] [^\n]*(?:ERROR|DETAIL):  (?:[0-9A-Z]{5}: )?[^\n]*$re/m });
}

sub slurp
{
	my ($f) = @_;
	open my $fh, '<', $f or return '';
	local $/;
	my $text = <$fh>;
	close $fh;
	return $text;
}

sub no_crash_ok
{
	my ($node, $what) = @_;
	my @bad = grep { /terminated by signal|server process .* was terminated|TRAP:|PANIC:/ }
	  split /\n/, slurp($node->logfile);
	return Test::More::ok(!@bad, "$what: no crash in the server log")
	  || Test::More::diag(join("\n", @bad));
}

sub sql_literal
{
	my ($s) = @_;
	utf8::decode($s);
	$s =~ s/\\/\\\\/g;
	$s =~ s/'/\\'/g;
	$s =~ s/\n/\\n/g;
	return "E'$s'";
}

# $fmt with every %s replaced by $name: one row of a table of SQL calls
# (a multi-lock's row names its lock more than once).
sub sqlf
{
	my ($fmt, $name) = @_;
	my $n = () = $fmt =~ /%s/g;
	return sprintf($fmt, ($name) x $n);
}

sub counter_run
{
	my ($node, $lock, $sessions, $rounds) = @_;
	my $setup = RedisLockTest::Session->new($node);
	$setup->query(<<'SQL');
DROP TABLE IF EXISTS mutex_counter;
CREATE TABLE mutex_counter(v int NOT NULL);
INSERT INTO mutex_counter VALUES (0);
CREATE OR REPLACE PROCEDURE mutex_bump(lock_name text, rounds int)
LANGUAGE plpgsql AS $$
DECLARE
    cur int;
BEGIN
    FOR i IN 1 .. rounds LOOP
        PERFORM redis_xact_lock_acquire(lock_name);
        SELECT v INTO cur FROM mutex_counter;
        PERFORM pg_sleep(0.001);
        UPDATE mutex_counter SET v = cur + 1;
        COMMIT;
    END LOOP;
END $$;
SQL
	my @s = map { RedisLockTest::Session->new($node) } 1 .. $sessions;
	$_->start('CALL mutex_bump(' . sql_literal($lock) . ", $rounds)") for @s;
	my @errors;
	for my $s (@s)
	{
		my ($v, $err, $state) = $s->finish(600);
		push @errors, "[$state] $err" if defined $err;
		$s->close;
	}
	my $v = $setup->query('SELECT v FROM mutex_counter');
	$setup->close;
	return ($v, @errors);
}

sub first_done_ok
{
	my ($desc, @s) = @_;
	my $first;
	until_ok($desc, sub {
		for my $i (0 .. $#s)
		{
			next unless defined $s[$i];
			if ($s[$i]->is_done) { $first = $i; return 1; }
		}
		return 0;
	});
	return $first;
}

sub fair_queue         { $_[0]->cmd('LRANGE', FakeRedisson::queue_key($_[1]), 0, -1) }
sub fair_queue_len     { $_[0]->cmd('LLEN', FakeRedisson::queue_key($_[1])) }
sub fair_timeout_count { $_[0]->cmd('ZCARD', FakeRedisson::timeout_key($_[1])) }

sub stop_listener
{
	my ($node) = @_;
	my $obs = observer($node);
	my $pid;
	my $stopped = wait_until($WAIT, 'the listener stopped in its wait for events', sub {
		$pid = $obs->query("SELECT pid FROM pg_stat_activity WHERE backend_type = 'redislock listener'");
		return 0 unless defined $pid && kill('STOP', $pid);
		return 1 if ($obs->query("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $pid") // '') eq 'Extension';
		kill 'CONT', $pid;
		return 0;
	});
	return $stopped ? $pid : undef;
}

sub redis_cmd
{
	my ($r, @cmd) = @_;
	return FakeRedisson::conn_to($r->port, undef, $r->tls_opts)->cmd(@cmd);
}

sub lock_stats
{
	my ($s) = @_;
	return $s->dbh->selectrow_hashref('SELECT * FROM redis_lock_stats')
	  || die "redis_lock_stats: " . $s->dbh->errstr;
}

1;
