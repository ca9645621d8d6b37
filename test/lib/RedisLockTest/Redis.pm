# RedisLockTest/Redis.pm — RedisLockTest::Redis, one redis-server owned by a
# test (own port, directory and log; stopped when the object goes away or the
# test exits).  Loaded by test/lib/RedisLockTest.pm; its POD is below.

package RedisLockTest::Redis;

use strict;
use warnings;

# for RedisLockTest::free_port (loads the whole harness)
use RedisLockTest ();

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

TLS (see RedisLockTest::TLS for the certificates):

  tls => $tls           a RedisLockTest::TLS: serve TLS on port (tls-port),
                        and no plain port (port 0) unless tls_plain_port;
                        tls-replication yes, so that replicas connect to
                        their master, and sentinels to what they monitor,
                        over TLS.  A cluster also wants 'tls-cluster yes'
                        (RedisLockTest::Cluster adds it).
  tls_server => 'server'  which certificate it presents: 'server' (signed by
                        the CA, SAN localhost and 127.0.0.1), 'wrongname'
                        (signed by the CA, SAN wrong.example only) or
                        'untrusted' (signed by the untrusted CA)
  tls_auth_clients => 'no'  tls-auth-clients: 'no', 'yes' (a client
                        certificate signed by the CA is required) or
                        'optional' (checked if one is presented)
  tls_plain_port => 0   1: also a plain port (plain_port)

tls-ca-cert-file is always the CA (ca_file): it checks client certificates
and, on outgoing connections (replication, sentinel, cluster bus), the
server's; so a server with the 'untrusted' certificate cannot be
replicated from or monitored by a sentinel.  The harness itself (cli, tls_opts, redis_cmd)
trusts the server it started whatever its certificate: it verifies it with
the CA that signed it, presents the client certificate, and does not check
the host name of a 'wrongname' server.

=cut

use Carp qw(croak);
use File::Path qw(mkpath rmtree);
use File::Basename qw(basename);
use POSIX qw(WNOHANG);
use Time::HiRes qw(time sleep);
use IPC::Run ();
use File::Spec ();

=pod

=item $RedisLockTest::Redis::SERVER, $RedisLockTest::Redis::CLI

The server binary every test starts and its client: REDISLOCK_REDIS_SERVER
(redis-server, valkey-server or a path) and REDISLOCK_REDIS_CLI, which
test/run-all.sh sets; default redis-server and redis-cli.

=cut

our $SERVER = $ENV{REDISLOCK_REDIS_SERVER} || 'redis-server';
our $CLI    = $ENV{REDISLOCK_REDIS_CLI}    || 'redis-cli';

my %live;    # pid => dir, for the END sweep
my %dirs;    # every server directory, removed at exit if all tests passed

sub new
{
	my ($class, %opt) = @_;
	my $port = $opt{port} // RedisLockTest::free_port();
	# absolute: the server runs in its own directory ("dir"), and
	# PostgreSQL 16+ makes these relative when TESTDATADIR is not set
	my $base = File::Spec->rel2abs($PostgreSQL::Test::Utils::tmp_check);
	my $test = basename($0);
	$test =~ s/\.[^.]+$//;
	my $dir = "$base/redis_${test}_$port";
	rmtree($dir);
	mkpath($dir);
	$dirs{$dir} = 1;
	my $logdir = File::Spec->rel2abs($PostgreSQL::Test::Utils::log_path // $dir);

	my $self = bless {
		port          => $port,
		dir           => $dir,
		logfile       => "$logdir/redis_${test}_$port.log",
		password      => $opt{requirepass},
		owner         => $$,
		pid           => undef,
		start_timeout => $opt{start_timeout} // 20,
		sentinel      => $opt{sentinel},
		tls           => $opt{tls},
		plain_port    => $port,
	}, $class;

	my @listen = ("port $port");
	if ($opt{tls})
	{
		my ($cert, $key, $ca) = $opt{tls}->server_files($opt{tls_server});
		my $auth = $opt{tls_auth_clients} // 'no';
		croak "RedisLockTest::Redis: tls_auth_clients must be no, yes or optional"
		  unless $auth =~ /^(no|yes|optional)$/;
		$self->{plain_port} = $opt{tls_plain_port} ? RedisLockTest::free_port() : undef;
		$self->{tls_ca}          = $ca;
		$self->{tls_verify_name} = ($opt{tls_server} // 'server') ne 'wrongname';
		@listen = (
			'port ' . ($self->{plain_port} // 0),
			"tls-port $port",
			"tls-cert-file $cert",
			"tls-key-file $key",
			'tls-ca-cert-file ' . $opt{tls}->ca_file,
			"tls-auth-clients $auth",
			'tls-replication yes',
		);
	}

	my @conf = (
		@listen,
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

Accessors.  url is C<redis://127.0.0.1:PORT>, or C<rediss://127.0.0.1:PORT>
for a TLS server (no password in it; set redislock.password yourself when
using requirepass).  port is the TLS port of a TLS server.  pid is undef
while stopped.

=item $r->plain_port, $r->tls

The plain (non-TLS) port: port for a plain server, undef for a TLS server
without tls_plain_port.  The RedisLockTest::TLS it was started with, or undef.

=item $r->tls_opts

What FakeRedisson->new and FakeRedisson::Conn->new need to reach this
server as the harness does (see the TLS options above):
C<< (tls => { ca_file, cert_file, key_file, verify_hostname }) >> for a TLS
server, the empty list for a plain one.

  my $java = FakeRedisson->new(port => $r->port, $r->tls_opts);

=cut

sub port       { $_[0]{port} }
sub plain_port { $_[0]{plain_port} }
sub tls        { $_[0]{tls} }
sub url        { ($_[0]{tls} ? 'rediss' : 'redis') . '://127.0.0.1:' . $_[0]{port} }
sub pid        { $_[0]{pid} }
sub dir        { $_[0]{dir} }
sub logfile    { $_[0]{logfile} }
sub password   { $_[0]{password} }

sub tls_opts
{
	my ($self) = @_;
	return () unless $self->{tls};
	return (tls => {
		ca_file         => $self->{tls_ca},
		cert_file       => $self->{tls}->client_cert,
		key_file        => $self->{tls}->client_key,
		verify_hostname => $self->{tls_verify_name},
	});
}

=pod

=item $r->cli(@args)

Runs C<redis-cli -h 127.0.0.1 -p PORT [-a pw --no-auth-warning] @args>
(for a TLS server with C<--tls --cacert CA --cert client.crt --key
client.key>, the CA being the one that signed its certificate) and
returns its stdout chomped: in list context one element per line, in scalar
context the whole text.  Redis error replies come back as text (e.g.
"ERR unknown command ..."), as redis-cli prints them.  Bounded by 60 s.
$r->last_cli_status / $r->last_cli_stderr tell how the last call ended
(non-zero e.g. when the server is down).

=cut

sub cli
{
	my ($self, @args) = @_;
	my @cmd = ($CLI, '-h', '127.0.0.1', '-p', $self->{port});
	push @cmd, '-a', $self->{password}, '--no-auth-warning'
	  if defined $self->{password};
	push @cmd, '--tls', '--cacert', $self->{tls_ca},
	  '--cert', $self->{tls}->client_cert, '--key', $self->{tls}->client_key
	  if $self->{tls};
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
		exec($SERVER, "$self->{dir}/redis.conf",
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

1;
