
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
our @EXPORT = qw(until_ok waits_ok slurp no_crash_ok lock_stats sql_literal counter_run);

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

=cut

sub node
{
	my ($name, $redis, %conf) = @_;
	my $preload   = exists $conf{preload}          ? delete $conf{preload}          : 1;
	my $create    = exists $conf{create_extension} ? delete $conf{create_extension} : 1;
	my $init_args = exists $conf{init}             ? delete $conf{init}             : {};
	my $start     = exists $conf{start}            ? delete $conf{start}            : 1;

	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%$init_args);

	my $lines = "\n# Added by RedisLockTest::node\n";
	$lines .= "shared_preload_libraries = 'redislock'\n" if $preload;
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

=back

=cut

# ---------------------------------------------------------------------------

=pod

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

sub lock_stats
{
	my ($s) = @_;
	return $s->dbh->selectrow_hashref('SELECT * FROM redis_lock_stats')
	  || die "redis_lock_stats: " . $s->dbh->errstr;
}

package RedisLockTest::Redis;

=pod

=head1 RedisLockTest::Redis

A redis-server owned by the test: runs as the current user, bound to
127.0.0.1 on a free port, in its own directory under tmp_check, with no RDB
snapshots (C<save "">).  Its log goes to tmp_check/log/redis_<test>_<port>.log
so that test/run-all.sh shows it on failure.

=over

=item RedisLockTest::Redis->new(%opt)

Starts it and waits (bounded) until it answers PING.  Options:

  appendonly  => 1      AOF on, appendfsync always (survives kill9)
  requirepass => 'pw'   password; cli() then authenticates
  extra       => [...]  extra redis.conf lines, e.g. ['maxmemory 1mb']
  port        => N      use this port instead of a free one
  start_timeout => 20   seconds to wait for PING (default 20)
  sentinel    => 1      run it as a Redis Sentinel (extra holds its
                        'sentinel monitor ...' lines)

=cut

use Carp qw(croak);
use File::Path qw(mkpath rmtree);
use File::Basename qw(basename);
use POSIX qw(WNOHANG);
use Time::HiRes qw(time sleep);
use IPC::Run ();

my %live;    # pid => dir, for the END sweep
my %dirs;    # every server directory, removed at exit if all tests passed

sub new
{
	my ($class, %opt) = @_;
	my $port = $opt{port} // RedisLockTest::free_port();
	my $base = $PostgreSQL::Test::Utils::tmp_check;
	my $test = basename($0);
	$test =~ s/\.[^.]+$//;
	my $dir = "$base/redis_${test}_$port";
	rmtree($dir);
	mkpath($dir);
	$dirs{$dir} = 1;
	my $logdir = $PostgreSQL::Test::Utils::log_path // $dir;

	my $self = bless {
		port          => $port,
		dir           => $dir,
		logfile       => "$logdir/redis_${test}_$port.log",
		password      => $opt{requirepass},
		owner         => $$,
		pid           => undef,
		start_timeout => $opt{start_timeout} // 20,
		sentinel      => $opt{sentinel},
	}, $class;

	my @conf = (
		"port $port",
		"bind 127.0.0.1",
		"dir $dir",
		"daemonize no",
		"save \"\"",
		"pidfile $dir/redis.pid",
		"logfile $self->{logfile}",
		"appendonly " . ($opt{appendonly} ? 'yes' : 'no'),
		($opt{appendonly} ? ("appendfsync always") : ()),
	);
	push @conf, "requirepass $opt{requirepass}" if defined $opt{requirepass};
	push @conf, @{ $opt{extra} } if $opt{extra};
	open my $fh, '>', "$dir/redis.conf" or croak "cannot write $dir/redis.conf: $!";
	print $fh "$_\n" for @conf;
	close $fh;

	$self->start;
	return $self;
}

=pod

=item $r->port, $r->url, $r->pid, $r->dir, $r->logfile, $r->password

Accessors.  url is C<redis://127.0.0.1:PORT> (no password in it; set
redislock.password yourself when using requirepass).  pid is undef while
stopped.

=cut

sub port     { $_[0]{port} }
sub url      { 'redis://127.0.0.1:' . $_[0]{port} }
sub pid      { $_[0]{pid} }
sub dir      { $_[0]{dir} }
sub logfile  { $_[0]{logfile} }
sub password { $_[0]{password} }

=pod

=item $r->cli(@args)

Runs C<redis-cli -h 127.0.0.1 -p PORT [-a pw --no-auth-warning] @args> and
returns its stdout chomped: in list context one element per line, in scalar
context the whole text.  Redis error replies come back as text (e.g.
"ERR unknown command ..."), as redis-cli prints them.  Bounded by 60 s.
$r->last_cli_status / $r->last_cli_stderr tell how the last call ended
(non-zero e.g. when the server is down).

=cut

sub cli
{
	my ($self, @args) = @_;
	my @cmd = ('redis-cli', '-h', '127.0.0.1', '-p', $self->{port});
	push @cmd, '-a', $self->{password}, '--no-auth-warning'
	  if defined $self->{password};
	my ($in, $out, $err) = ('', '', '');
	IPC::Run::run([ @cmd, @args ], \$in, \$out, \$err, IPC::Run::timeout(60));
	$self->{last_status} = $? >> 8;
	$self->{last_stderr} = $err;
	chomp $out;
	return wantarray ? split(/\n/, $out) : $out;
}

sub last_cli_status { $_[0]{last_status} }
sub last_cli_stderr { $_[0]{last_stderr} }

=pod

=item $r->ping

True if the server answers PONG right now.

=cut

sub ping
{
	my ($self) = @_;
	my $out = eval { scalar $self->cli('PING') };
	return defined $out && $out eq 'PONG';
}

=pod

=item $r->start

Starts redis-server (same port, directory and config as before) and waits
until it answers PING (bounded by start_timeout).  Dies with the log tail if
it exits or does not answer.  No-op if already running.

=cut

sub start
{
	my ($self) = @_;
	return $self if $self->{pid};
	my $pid = fork();
	croak "fork failed: $!" unless defined $pid;
	if ($pid == 0)
	{
		# stdout/stderr to the log too, for startup errors before logfile opens
		open STDIN, '<', '/dev/null';
		open STDOUT, '>>', $self->{logfile};
		open STDERR, '>&', \*STDOUT;
		exec('redis-server', "$self->{dir}/redis.conf",
			($self->{sentinel} ? ('--sentinel') : ()))
		  or POSIX::_exit(127);
	}
	$self->{pid} = $pid;
	$live{$pid} = $self->{dir};

	my $deadline = time() + $self->{start_timeout};
	while (1)
	{
		if (waitpid($pid, WNOHANG) == $pid)
		{
			my $rc = $?;
			delete $live{$pid};
			$self->{pid} = undef;
			croak "redis-server on port $self->{port} exited (status $rc) during startup:\n"
			  . $self->log_tail;
		}
		return $self if $self->ping;
		if (time() > $deadline)
		{
			$self->kill9;
			croak "redis-server on port $self->{port} did not answer PING within "
			  . "$self->{start_timeout}s:\n" . $self->log_tail;
		}
		sleep(0.05);
	}
}

=pod

=item $r->stop([$timeout_s])

SIGTERM, then waits until the process is gone (bounded, default 20 s; then
SIGKILL with a diag).  With appendonly the AOF is flushed by Redis on SIGTERM.

=item $r->kill9

SIGKILL and reap: a crash, nothing flushed beyond what appendfsync wrote.

=item $r->restart

stop then start (same port, dir, data files).

=item $r->restart_empty

kill9, remove the data files (dump.rdb, the AOF of either layout), start: a
server that lost everything, e.g. a Redlock node replaced after a crash.
Cluster state (nodes.conf) is kept.

=cut

sub _signal_and_reap
{
	my ($self, $sig, $timeout) = @_;
	my $pid = $self->{pid} or return;
	# Already reaped (e.g. by the END sweep): never signal a recycled pid.
	if (!$live{$pid}) { $self->{pid} = undef; return; }
	kill $sig, $pid;
	my $deadline = time() + $timeout;
	while (waitpid($pid, WNOHANG) == 0)
	{
		if (time() > $deadline)
		{
			Test::More::diag("redis-server $pid ignored SIG$sig for ${timeout}s; killing");
			kill 'KILL', $pid;
			waitpid($pid, 0);
			last;
		}
		sleep(0.02);
	}
	delete $live{$pid};
	$self->{pid} = undef;
}

sub stop   { my ($self, $t) = @_; $self->_signal_and_reap('TERM', $t // 20); return $self; }
sub kill9  { my ($self) = @_; $self->_signal_and_reap('KILL', 20); return $self; }
sub restart { my ($self) = @_; $self->stop; $self->start; return $self; }

sub restart_empty
{
	my ($self) = @_;
	$self->kill9;
	# appendonly.aof is Redis 6's AOF, appendonlydir/ Redis 7's (base + incr files)
	unlink("$self->{dir}/dump.rdb", "$self->{dir}/appendonly.aof");
	rmtree("$self->{dir}/appendonlydir");
	return $self->start;
}

=pod

=item $r->pause / $r->resume

SIGSTOP / SIGCONT the server: it keeps its socket but stops answering
(for command_timeout tests).

=cut

sub pause  { my ($self) = @_; kill 'STOP', $self->{pid} if $self->{pid}; return $self; }
sub resume { my ($self) = @_; kill 'CONT', $self->{pid} if $self->{pid}; return $self; }

=pod

=item $r->log_tail([$lines])

Last lines (default 30) of the server log, for diagnostics.

=back

=cut

sub log_tail
{
	my ($self, $n) = @_;
	$n //= 30;
	open my $fh, '<', $self->{logfile} or return "(no log $self->{logfile})\n";
	my @l = <$fh>;
	close $fh;
	splice(@l, 0, @l - $n) if @l > $n;
	return join('', @l);
}

sub DESTROY
{
	my ($self) = @_;
	# Forked children (IPC::Run etc.) must not stop the parent's server.
	return unless $self->{owner} && $self->{owner} == $$;
	local ($?, $@);
	if ($self->{pid})
	{
		kill 'CONT', $self->{pid};
		$self->stop(10);
	}
}

END
{
	# Objects kept in globals may outlive global destruction order: sweep.
	my $exit = $?;
	for my $pid (keys %live)
	{
		kill 'CONT', $pid;
		kill 'TERM', $pid;
		my $deadline = time() + 10;
		while (waitpid($pid, WNOHANG) == 0 && time() < $deadline) { sleep(0.02); }
		if (kill 0, $pid) { kill 'KILL', $pid; waitpid($pid, 0); }
		delete $live{$pid};
	}
	# Keep data directories for post-mortems unless everything passed (as
	# Cluster.pm does for its nodes).
	if ($exit == 0 && !defined $ENV{PG_TEST_NOCLEAN}
		&& PostgreSQL::Test::Utils::all_tests_passing())
	{
		rmtree($_) for keys %dirs;
	}
	$? = $exit;
}

# ---------------------------------------------------------------------------

package RedisLockTest::Cluster;

=pod

=head1 RedisLockTest::Cluster

A Redis Cluster of RedisLockTest::Redis servers on 127.0.0.1, created with
C<redis-cli --cluster create>.  Every server has C<cluster-enabled yes>, its
nodes.conf in its own directory, and its cluster bus on a second free port
(C<cluster-port>: the default port + 10000 would be above 65535 for the
ports free_port hands out).  Servers are stopped and cleaned up like any
RedisLockTest::Redis when the object goes away.

Who serves what is never cached: it is read from C<CLUSTER NODES> of a
running server (the slot table C<CLUSTER SLOTS> prints too) each time, so the
answers stay right across migrations and failovers.  A server counts as
running unless this test stopped or killed it (RedisLockTest::Redis->pid).
Keys moved by a migration go through redis-cli, so their names must not
contain newlines.

  my $c    = RedisLockTest::Cluster->new(masters => 3, replicas => 1);
  my $slot = $c->slot_of('order:42');
  $c->cli_for_key('order:42', 'SET', 'order:42', 'x');
  my ($to) = grep { $_ != $c->owner_of_slot($slot) } $c->masters;
  $c->migrate_slot($slot, $to);
  my $new = $c->kill9_master($to);    # its replica, now serving $slot

=over

=item RedisLockTest::Cluster->new(%opt)

Starts masters * (1 + replicas) servers, creates the cluster and waits
(bounded, 60 s) until wait_stable holds; dies with the redis-cli output or
the servers' log tails otherwise.  Options:

  masters      => 3     at least 3 (redis-cli's minimum)
  replicas     => 0     replicas per master
  node_timeout => 1000  cluster-node-timeout, ms (failure detection)
  extra        => [...] more redis.conf lines for every server

Any other option goes to every RedisLockTest::Redis->new (appendonly,
requirepass, start_timeout).  With requirepass, replicas authenticate to
their masters with it (masterauth) and migrations pass it to MIGRATE.

=cut

use Carp qw(croak);
use List::Util qw(first);
use Time::HiRes qw(time);

my $SLOTS = 16384;

sub new
{
	my ($class, %opt) = @_;
	my $masters  = delete $opt{masters}      // 3;
	my $replicas = delete $opt{replicas}     // 0;
	my $timeout  = delete $opt{node_timeout} // 1000;
	my $extra    = delete $opt{extra}        // [];
	croak "RedisLockTest::Cluster: at least 3 masters" if $masters < 3;

	my $self = bless { nodes => [], by_port => {}, ids => {} }, $class;
	for (1 .. $masters * (1 + $replicas))
	{
		my $r = RedisLockTest::Redis->new(
			%opt,
			extra => [
				'cluster-enabled yes',
				'cluster-config-file nodes.conf',    # relative to the server's dir
				"cluster-node-timeout $timeout",
				'cluster-port ' . RedisLockTest::free_port(),
				(defined $opt{requirepass} ? ("masterauth $opt{requirepass}") : ()),
				@$extra,
			]);
		push @{ $self->{nodes} }, $r;
		$self->{by_port}{ $r->port } = $r;
		# Kept in nodes.conf, so stable across restarts of the server.
		$self->{ids}{ $r->port } = scalar $r->cli('CLUSTER', 'MYID');
	}

	my $first = $self->{nodes}[0];
	my $out = $first->cli('--cluster', 'create',
		(map { '127.0.0.1:' . $_->port } @{ $self->{nodes} }),
		'--cluster-replicas', $replicas, '--cluster-yes');
	croak "redis-cli --cluster create failed (status " . $first->last_cli_status . "):\n"
	  . $out . "\n" . $first->last_cli_stderr
	  if $first->last_cli_status != 0;
	$self->wait_stable(60)
	  or croak "RedisLockTest::Cluster: not ok within 60s:\n"
	  . join('', map { "--- port " . $_->port . "\n" . $_->log_tail(15) } @{ $self->{nodes} });
	return $self;
}

=pod

=item $c->nodes

All servers (RedisLockTest::Redis), masters and replicas, in creation order.

=item $c->seeds

"127.0.0.1:P1,127.0.0.1:P2,..." of all servers.

=item $c->node_id($r)

Cluster node id of server $r.

=item $c->masters

The masters now: master flag, not failing, process running; by port (their
number in scalar context).

=item $c->replicas_of($master)

The running, non-failing replicas of $master, by port (their number in
scalar context).

=cut

sub nodes   { @{ $_[0]{nodes} } }
sub seeds   { join(',', map { '127.0.0.1:' . $_->port } @{ $_[0]{nodes} }) }
sub node_id { my ($self, $r) = @_; return $self->{ids}{ $r->port }; }

sub masters
{
	my ($self) = @_;
	return _by_port(grep { $_->{flags}{master} && _healthy($_) } $self->_live_view);
}

sub replicas_of
{
	my ($self, $master) = @_;
	my $id = $self->node_id($master);
	return _by_port(
		grep { $_->{flags}{slave} && $_->{master_id} eq $id && _healthy($_) }
		  $self->_live_view);
}

=pod

=item $c->slot_of($key)

The hash slot of $key, computed here: CRC16 (XMODEM) mod 16384 of the hash
tag if there is one, else of the whole key.  The tag is what lies between
the first "{" and the first "}" after it, if that is not empty; an empty
"{}" means the whole key is hashed (a later tag is not looked for).
A string with Perl's utf8 flag on is hashed as its UTF-8 bytes, the bytes
redis-cli (exec) and FakeRedisson send for it.  Also callable as
RedisLockTest::Cluster->slot_of($key).

=cut

sub slot_of
{
	my (undef, $key) = @_;
	utf8::encode($key) if utf8::is_utf8($key);
	my $open = index($key, '{');
	if ($open >= 0)
	{
		my $close = index($key, '}', $open + 1);
		$key = substr($key, $open + 1, $close - $open - 1) if $close > $open + 1;
	}
	my $crc = 0;
	for my $byte (unpack('C*', $key))
	{
		$crc ^= $byte << 8;
		for (1 .. 8)
		{
			$crc = $crc & 0x8000 ? (($crc << 1) ^ 0x1021) & 0xFFFF : ($crc << 1) & 0xFFFF;
		}
	}
	return $crc % $SLOTS;
}

=pod

=item $c->owner_of_slot($slot)

The server serving $slot now (dies if no master has it).

=item $c->node_for_key($key)

owner_of_slot(slot_of($key)).

=item $c->cli_for_key($key, @args)

$r->cli(@args) on the master serving $key.

=cut

sub owner_of_slot
{
	my ($self, $slot) = @_;
	my $n = _owner_in($slot, $self->_live_view)
	  or croak "RedisLockTest::Cluster: slot $slot is not assigned";
	return $n->{redis};
}

sub node_for_key { my ($self, $key) = @_; return $self->owner_of_slot($self->slot_of($key)); }

sub cli_for_key
{
	my ($self, $key, @args) = @_;
	return $self->node_for_key($key)->cli(@args);
}

=pod

=item $c->wait_stable([$timeout_s])

Waits (bounded, default $RedisLockTest::WAIT) until every running server says
cluster_state:ok with all 16384 slots assigned and every server known
(cluster_known_nodes = all servers, failed ones included), all of them map
the slots to the same masters, and every running replica's link to its
master is up.  Returns 1/0 like wait_until.  For use after restarting
servers.

=cut

sub wait_stable
{
	my ($self, $timeout) = @_;
	return RedisLockTest::wait_until($timeout // $RedisLockTest::WAIT,
		'cluster ok and in agreement on every running node', sub { $self->_stable });
}

=pod

=item $c->migrate_slot($slot, $to)

Moves $slot from its master to master $to the documented way: begin_migration
then finish_migration.  Returns the former owner.

=item $c->begin_migration($slot, $to)

C<CLUSTER SETSLOT $slot IMPORTING> on $to, then C<MIGRATING> on the owner; no
key moves.  From here the owner answers ASK for keys of $slot it no longer
has.  Returns the owner.

=item $c->finish_migration($slot, $to)

Moves every key of $slot to $to (C<CLUSTER GETKEYSINSLOT> + C<MIGRATE ... KEYS>
until none is left), then C<CLUSTER SETSLOT $slot NODE> on $to, on the owner
and on every other master, and waits (bounded, $RedisLockTest::WAIT) until
every running server's slot table shows $to.  Returns the former owner.
Dies on any error.

=cut

sub migrate_slot
{
	my ($self, $slot, $to) = @_;
	$self->begin_migration($slot, $to);
	return $self->finish_migration($slot, $to);
}

sub begin_migration
{
	my ($self, $slot, $to) = @_;
	my $from = $self->_other_owner($slot, $to);
	# Target first, so that the ASK redirects the source starts to give land on
	# a node that already accepts ASKING for the slot.
	_ok($to,   'CLUSTER', 'SETSLOT', $slot, 'IMPORTING', $self->node_id($from));
	_ok($from, 'CLUSTER', 'SETSLOT', $slot, 'MIGRATING', $self->node_id($to));
	return $from;
}

sub finish_migration
{
	my ($self, $slot, $to) = @_;
	my $from     = $self->_other_owner($slot, $to);
	my @auth     = defined $to->password ? ('AUTH', $to->password) : ();
	my $deadline = time() + $RedisLockTest::WAIT;
	while (my @keys = $from->cli('CLUSTER', 'GETKEYSINSLOT', $slot, 100))
	{
		my $out = $from->cli('MIGRATE', '127.0.0.1', $to->port, '', 0, 5000, @auth, 'KEYS', @keys);
		# NOKEY: the keys expired or were deleted since GETKEYSINSLOT
		croak "MIGRATE (slot $slot to port " . $to->port . "): $out"
		  unless $out eq 'OK' || $out eq 'NOKEY';
		croak "finish_migration: slot $slot still has keys after ${RedisLockTest::WAIT}s"
		  if time() > $deadline;
	}
	# Target first: assigning itself the slot it imports bumps its config
	# epoch, so its claim also wins on the nodes only gossip tells (replicas).
	my $to_id = $self->node_id($to);
	_ok($_, 'CLUSTER', 'SETSLOT', $slot, 'NODE', $to_id)
	  for $to, $from, grep { $_ != $to && $_ != $from } $self->masters;
	RedisLockTest::wait_until($RedisLockTest::WAIT,
		"every running node has slot $slot on port " . $to->port, sub {
			for my $r ($self->_running)
			{
				my $n = _owner_in($slot, $self->_view($r));
				return 0 unless $n && $n->{redis} == $to;
			}
			return 1;
		}) or croak "finish_migration: slot $slot not on port " . $to->port . " everywhere";
	return $from;
}

=pod

=item $c->failover($replica [, 'FORCE' | 'TAKEOVER'])

C<CLUSTER FAILOVER> on $replica, then waits (bounded, $RedisLockTest::WAIT)
until every running server sees it as the master of its former master's
slots and wait_stable's conditions hold.  Returns $replica, the new master.

=item $c->kill9_master($master)

kill9 on $master (which must serve slots and have a running replica), then
waits (bounded, $RedisLockTest::WAIT) until one of its replicas is promoted
as failover describes.  Returns that replica.  Restarted, the old master
rejoins as a replica of the new one.

=cut

sub failover
{
	my ($self, $replica, $how) = @_;
	my ($me) = grep { $_->{flags}{myself} } $self->_view($replica);
	croak "failover: port " . $replica->port . " is not a replica"
	  unless $me && $me->{flags}{slave};
	_ok($replica, 'CLUSTER', 'FAILOVER', (defined $how ? $how : ()));
	RedisLockTest::wait_until($RedisLockTest::WAIT,
		"port " . $replica->port . " promoted, cluster ok",
		sub { $self->_serves_everywhere($replica) && $self->_stable })
	  or croak "failover: port " . $replica->port . " not promoted";
	return $replica;
}

sub kill9_master
{
	my ($self, $master) = @_;
	my @replicas = $self->replicas_of($master)
	  or croak "kill9_master: port " . $master->port . " has no running replica";
	$master->kill9;
	my $new;
	RedisLockTest::wait_until($RedisLockTest::WAIT,
		"a replica of port " . $master->port . " promoted, cluster ok", sub {
			$new = first { $self->_serves_everywhere($_) } @replicas;
			return $new && $self->_stable;
		}) or croak "kill9_master: no replica of port " . $master->port . " took over";
	return $new;
}

# Servers this test has not stopped or killed.
sub _running { grep { defined $_->pid } @{ $_[0]{nodes} } }

# The servers of view entries, by port; a count in scalar context.
sub _by_port
{
	my @r = sort { $a->port <=> $b->port } map { $_->{redis} } @_;
	return @r;
}

sub _healthy
{
	my ($n) = @_;
	return !$n->{flags}{fail} && !$n->{flags}{'fail?'} && defined $n->{redis}->pid;
}

# CLUSTER NODES as server $r sees it: one hash per node with id, redis (our
# object), flags (hash), master_id and slots ([first, last] ranges it serves).
sub _view
{
	my ($self, $r) = @_;
	my @view;
	for my $line ($r->cli('CLUSTER', 'NODES'))
	{
		my ($id, $addr, $flags, $master_id, undef, undef, undef, undef, @slots) =
		  split ' ', $line;
		my ($port) = ($addr // '') =~ /:(\d+)@/
		  or croak "CLUSTER NODES on port " . $r->port . ": unexpected line '$line'";
		push @view, {
			id        => $id,
			redis     => $self->{by_port}{$port},
			flags     => { map { $_ => 1 } split /,/, $flags },
			master_id => $master_id,
			# "[slot->-id]" / "[slot-<-id]" entries mark a migration, not ownership
			slots => [ map { /^(\d+)(?:-(\d+))?$/ ? [ $1, $2 // $1 ] : () } @slots ],
		};
	}
	return @view;
}

# The view of the first running server that answers.
sub _live_view
{
	my ($self) = @_;
	for my $r ($self->_running)
	{
		my @view = eval { $self->_view($r) };
		return @view if @view;
	}
	croak "RedisLockTest::Cluster: no running server answers CLUSTER NODES";
}

sub _owner_in
{
	my ($slot, @view) = @_;
	for my $n (@view)
	{
		return $n if first { $slot >= $_->[0] && $slot <= $_->[1] } @{ $n->{slots} };
	}
	return undef;
}

sub _other_owner
{
	my ($self, $slot, $to) = @_;
	my $from = $self->owner_of_slot($slot);
	croak "RedisLockTest::Cluster: slot $slot is already on port " . $to->port if $from == $to;
	return $from;
}

# Every running server sees $r as a master serving slots.
sub _serves_everywhere
{
	my ($self, $r) = @_;
	for my $s ($self->_running)
	{
		my $n = first { $_->{redis} == $r } $self->_view($s);
		return 0 unless $n && $n->{flags}{master} && @{ $n->{slots} };
	}
	return 1;
}

sub _stable
{
	my ($self) = @_;
	my $total = @{ $self->{nodes} };
	my $agreed;
	for my $r ($self->_running)
	{
		my %info = map { /^(\w+):(.*?)\r?$/ ? ($1, $2) : () } $r->cli('CLUSTER', 'INFO');
		return 0
		  unless ($info{cluster_state} // '') eq 'ok'
		  && ($info{cluster_slots_assigned} // 0) == $SLOTS
		  && ($info{cluster_known_nodes} // 0) == $total;
		my @view = $self->_view($r);
		my $map = join(' ', sort map {
			my $n = $_;
			map { "$_->[0]-$_->[1]=$n->{id}" } @{ $n->{slots} }
		} @view);
		$agreed //= $map;
		return 0 unless $map eq $agreed;
		my ($me) = grep { $_->{flags}{myself} } @view;
		return 0
		  if $me->{flags}{slave}
		  && scalar($r->cli('INFO', 'replication')) !~ /^master_link_status:up\r?$/m;
	}
	return 1;
}

sub _ok
{
	my ($r, @cmd) = @_;
	my $out = $r->cli(@cmd);
	croak "@cmd on port " . $r->port . ": $out" unless $out eq 'OK';
}

=pod

=back

=cut

# ---------------------------------------------------------------------------

package RedisLockTest::Redlock;

=pod

=head1 RedisLockTest::Redlock

N independent Redis masters (no replication, no cluster): the deployment of
the Redlock algorithm.

=over

=item RedisLockTest::Redlock->new(n => 5, %opt)

Starts n servers (default 5); %opt goes to every RedisLockTest::Redis->new.

=item $rl->nodes, $rl->node($i)

All servers (RedisLockTest::Redis) / server $i, counted from 0.

=item $rl->list

"127.0.0.1:P1,127.0.0.1:P2,..." in node order.

=item $rl->kill9($i), $rl->restart_empty($i)

Crash server $i; crash it and start it again without its data (a node that
lost its locks).  Return the server.

=item $rl->holders($key)

On how many running servers $key exists.

=back

=cut

sub new
{
	my ($class, %opt) = @_;
	my $n = delete $opt{n} // 5;
	return bless { nodes => [ map { RedisLockTest::Redis->new(%opt) } 1 .. $n ] }, $class;
}

sub nodes         { @{ $_[0]{nodes} } }
sub node          { $_[0]{nodes}[ $_[1] ] }
sub list          { join(',', map { '127.0.0.1:' . $_->port } @{ $_[0]{nodes} }) }
sub kill9         { $_[0]->node($_[1])->kill9 }
sub restart_empty { $_[0]->node($_[1])->restart_empty }

sub holders
{
	my ($self, $key) = @_;
	return scalar grep { defined $_->pid && scalar($_->cli('EXISTS', $key)) eq '1' } $self->nodes;
}

# ---------------------------------------------------------------------------

package RedisLockTest::Session;

=pod

=head1 RedisLockTest::Session

One DBD::Pg connection (one backend) to database postgres of a node.
AutoCommit on, RaiseError off, PrintError off, no server-side prepare (so a
string may hold several statements; the last one's result is returned).
NOTICE/WARNING messages are collected, see notices().

=over

=item RedisLockTest::Session->new($node, %opt)

Connects.  Options: dbname (default postgres), user (default: the OS user,
who is the bootstrap superuser of Cluster.pm nodes), application_name.
Dies if the connection fails.

=cut

use Carp qw(croak);
use DBI;
use DBD::Pg qw(:async);
use Time::HiRes qw(time);

sub new
{
	my ($class, $node, %opt) = @_;
	my $dbname = $opt{dbname} // 'postgres';
	my $dsn = "dbi:Pg:dbname=$dbname;host=" . $node->host . ';port=' . $node->port;
	$dsn .= ";application_name=$opt{application_name}" if defined $opt{application_name};
	my $self = bless { node => $node, notices => [], owner => $$ }, $class;
	my $dbh = DBI->connect(
		$dsn,
		$opt{user} // '',
		$opt{password} // '',
		{
			AutoCommit        => 1,
			RaiseError        => 0,
			PrintError        => 0,
			PrintWarn         => 0,
			pg_server_prepare => 0,
			pg_bool_tf        => 1,    # booleans as t/f, like psql and safe_psql
		}) or croak "RedisLockTest::Session: cannot connect to $dsn: $DBI::errstr";
	$self->{dbh} = $dbh;
	$self->{pid} = $dbh->{pg_pid};
	return $self;
}

# DBD::Pg reports notices through warn(); capture them per call.
sub _capture
{
	my ($self, $code) = @_;
	my $notices = $self->{notices};
	local $SIG{__WARN__} = sub { my $m = shift; chomp $m; push @$notices, $m; };
	local $self->{dbh}{PrintWarn} = 1;
	return $code->();
}

=pod

=item $s->pid

Backend pid of this connection.

=item $s->dbh

The DBI handle, for anything not covered here.

=cut

sub pid { $_[0]{pid} }
sub dbh { $_[0]{dbh} }

=pod

=item $s->query($sql)

Synchronous.  Returns the first column of the first row (undef for NULL or
when there is no row / no result set).  Dies with the error text on error.

=item $s->try($sql)

Synchronous.  Returns (value, error_message, sqlstate): error_message and
sqlstate are undef on success; value is undef on error.  In scalar context
returns just the value.

=cut

sub _run
{
	my ($self, $sql) = @_;
	croak "RedisLockTest::Session: an async query is still running (call finish first)"
	  if $self->{sth_async};
	my $dbh = $self->{dbh};
	return $self->_capture(sub {
		my $sth = $dbh->prepare($sql)
		  or return (undef, $dbh->errstr, $dbh->state);
		$sth->execute
		  or return (undef, $sth->errstr // $dbh->errstr, $sth->state // $dbh->state);
		return (_first_value($sth), undef, undef);
	});
}

sub _first_value
{
	my ($sth) = @_;
	return undef unless $sth->{NUM_OF_FIELDS};
	my $row = $sth->fetchrow_arrayref;
	$sth->finish;
	return $row ? $row->[0] : undef;
}

sub query
{
	my ($self, $sql) = @_;
	my ($v, $err, $state) = $self->_run($sql);
	die "query failed [$state]: $err\n  query: $sql\n" if defined $err;
	return $v;
}

sub try
{
	my ($self, $sql) = @_;
	my ($v, $err, $state) = $self->_run($sql);
	chomp $err if defined $err;
	return wantarray ? ($v, $err, $state) : $v;
}

=pod

=item $s->rows($sql)

Synchronous; returns all rows as a list of array refs.  Dies on error.

=cut

sub rows
{
	my ($self, $sql) = @_;
	my $dbh = $self->{dbh};
	my $r = $self->_capture(sub { $dbh->selectall_arrayref($sql) });
	die "query failed [" . ($dbh->state // '') . "]: " . ($dbh->errstr // '') . "\n  query: $sql\n"
	  unless $r;
	return @$r;
}

=pod

=item $s->start($sql)

Sends $sql asynchronously (DBD::Pg pg_async => PG_ASYNC) and returns at once.
Only one async query per session at a time.

=item $s->is_done

Non-blocking: true when the async query has finished (its result is ready
for finish()), false while it still runs (DBD::Pg pg_ready).

=item $s->finish([$timeout_s])

Waits, bounded (default 30 s), for the async query and returns
(value, error_message, sqlstate) like try.  On timeout returns
(undef, "timeout ...", 'TIMEOUT') and the query is still running: call
cancel (or finish again).

=cut

sub start
{
	my ($self, $sql) = @_;
	croak "RedisLockTest::Session: an async query is already running" if $self->{sth_async};
	my $dbh = $self->{dbh};
	my $sth = $dbh->prepare($sql, { pg_async => PG_ASYNC });
	if (!$sth || !$sth->execute)
	{
		# Report the failure from finish() to keep one code path for callers.
		$self->{async_error} = [ $dbh->errstr, $dbh->state ];
		$self->{sth_async} = 'failed';
		return 0;
	}
	$self->{sth_async} = $sth;
	$self->{async_sql} = $sql;
	return 1;
}

sub is_done
{
	my ($self) = @_;
	my $sth = $self->{sth_async};
	return 1 if !$sth || !ref $sth;
	my $r = $self->_capture(sub { $self->{dbh}->pg_ready });
	return $r != 0;    # -1 means "no async query": nothing to wait for
}

sub finish
{
	my ($self, $timeout) = @_;
	$timeout //= 30;
	my $sth = $self->{sth_async};
	croak "RedisLockTest::Session: finish without start" unless $sth;
	if (!ref $sth)
	{
		delete $self->{sth_async};
		my ($err, $state) = @{ delete $self->{async_error} };
		return wantarray ? (undef, $err, $state) : undef;
	}
	my $dbh      = $self->{dbh};
	my $deadline = time() + $timeout;
	# Wait on the libpq socket by fd number (a Perl handle on it would close
	# the fd when it goes out of scope).
	my $rin = q{};
	vec($rin, $dbh->{pg_socket}, 1) = 1;
	while (!$self->is_done)
	{
		my $left = $deadline - time();
		if ($left <= 0)
		{
			return wantarray
			  ? (undef, "timeout after ${timeout}s waiting for: $self->{async_sql}", 'TIMEOUT')
			  : undef;
		}
		select(my $rout = $rin, undef, undef, $left < 0.2 ? $left : 0.2);
	}
	delete $self->{sth_async};
	my ($v, $err, $state) = $self->_capture(sub {
		my $rv = $sth->pg_result;
		return (undef, $dbh->errstr, $dbh->state) unless defined $rv;
		return (_first_value($sth), undef, undef);
	});
	chomp $err if defined $err;
	return wantarray ? ($v, $err, $state) : $v;
}

=pod

=item $s->cancel([$timeout_s])

Cancels the running async query and waits for it to end (bounded, default
30 s).  Returns (value, error_message, sqlstate) like finish: normally
sqlstate 57014 "canceling statement due to user request"; a query that
finished before the cancel arrived returns its value.

The cancel is sent as pg_cancel_backend(pid) from a separate connection: the
same SIGINT that libpq's PQcancel causes, but DBD::Pg's own pg_cancel then
blocks without a bound until the backend reacts, and a backend that ignores
cancel is exactly what the tests must catch rather than hang on.

=item $s->cancel_blocking

DBD::Pg's pg_cancel (unbounded wait, see above).  Returns its boolean.

=item $s->terminate([$timeout_s])

pg_terminate_backend on this session's backend, waits (bounded) until the pid
is gone from pg_stat_activity; returns 1/0.  The session is unusable after.

=cut

sub cancel
{
	my ($self, $timeout) = @_;
	$timeout //= 30;
	croak "RedisLockTest::Session: cancel without start" unless $self->{sth_async};
	RedisLockTest::observer($self->{node})->query("SELECT pg_cancel_backend($self->{pid})")
	  if ref $self->{sth_async};
	return $self->finish($timeout);
}

sub cancel_blocking
{
	my ($self) = @_;
	my $r = $self->{dbh}->pg_cancel;
	delete $self->{sth_async};
	return $r;
}

sub terminate
{
	my ($self, $timeout) = @_;
	$timeout //= 30;
	my $obs = RedisLockTest::observer($self->{node});
	$obs->query("SELECT pg_terminate_backend($self->{pid})");
	return RedisLockTest::wait_until($timeout, "backend $self->{pid} gone", sub {
		!defined $obs->query("SELECT 1 FROM pg_stat_activity WHERE pid = $self->{pid}");
	});
}

=pod

=item $s->notices

Returns (and forgets) the NOTICE/WARNING messages received so far, one
string each, e.g. "WARNING:  ...".

=item $s->close

Disconnects, without waiting for a running async query: the connection is
shut down under it.  The backend only notices the lost client when its
query ends or it next talks to the client (a waiting acquire keeps waiting
until its own timeout), so cancel or terminate first if that matters.

=back

=cut

sub notices
{
	my ($self) = @_;
	my @n = @{ $self->{notices} };
	@{ $self->{notices} } = ();
	return @n;
}

sub close
{
	my ($self) = @_;
	my $dbh = delete $self->{dbh} or return;
	# With an async query outstanding, DBD::Pg's disconnect cancels it and
	# waits, unbounded, for the backend to answer.  Shut the socket down first
	# so the disconnect cannot hang on a backend that does not react.
	_shutdown_socket($dbh) if delete $self->{sth_async};
	$dbh->disconnect;
}

# shutdown(2) on a dup of libpq's socket: acts on the connection itself, so
# libpq sees EOF at once; the dup is closed, libpq's own fd stays valid.
sub _shutdown_socket
{
	my ($dbh) = @_;
	my $fd = $dbh->{pg_socket};
	return unless defined $fd && $fd >= 0;
	if (open(my $dup, '+<&', $fd))
	{
		shutdown($dup, 2);
		CORE::close($dup);
	}
}

sub DESTROY
{
	my ($self) = @_;
	local ($?, $@);
	return unless $self->{dbh};
	if ($self->{owner} && $self->{owner} != $$)
	{
		# Do not let a forked child close the parent's connection.
		$self->{dbh}{InactiveDestroy} = 1;
		return;
	}
	$self->close;
}

1;
