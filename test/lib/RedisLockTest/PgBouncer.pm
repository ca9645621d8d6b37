# RedisLockTest/PgBouncer.pm — RedisLockTest::PgBouncer, a PgBouncer (Debian's
# pgbouncer package) of a test's own, on a free loopback port in front of a
# PostgreSQL::Test::Cluster node.  Loaded by test/lib/RedisLockTest.pm; its
# POD is below.

package RedisLockTest::PgBouncer;

use strict;
use warnings;

=pod

=head1 RedisLockTest::PgBouncer

=over

=item RedisLockTest::PgBouncer->new($node, %opt)

Writes a configuration and starts C<pgbouncer> in the foreground as a child
of the test, listening on 127.0.0.1 only (no Unix socket), with
C<auth_type = trust> for the OS user (the node's bootstrap superuser, whom
the node trusts on its socket), and waits (bounded) until it accepts
connections.  Dies with the log tail if it exits or does not listen.

Options:

  pool_mode  => 'transaction'   the [pgbouncer] pool_mode
  databases  => { alias => 'key=value ...' }
      [databases] entries: each alias reaches database postgres of $node,
      followed by the given PgBouncer options (pool_size=1,
      connect_query='SET ...').  Default: { postgres => 'pool_size=2' }.

The pgbouncer binary is C<$ENV{PGBOUNCER}>, else the first C<pgbouncer> on
PATH, /usr/sbin or /usr/bin.  Stopped (SIGTERM: PgBouncer's immediate
shutdown, then SIGKILL after a bound) when the object goes away or the test
exits.

  my $pgb = RedisLockTest::PgBouncer->new($node,
      databases => { one => 'pool_size=1' });
  my $s = RedisLockTest::Session->new($node, $pgb->session_opts('one'));

=item $pgb->port, $pgb->pid, $pgb->logfile

Accessors.

=item $pgb->session_opts($alias)

The options that make a RedisLockTest::Session connect through this
PgBouncer to $alias: C<< (host => '127.0.0.1', port => ..., dbname => $alias) >>.

=back

=cut

use File::Spec ();
use Carp qw(croak);
use File::Basename qw(basename);
use File::Path qw(mkpath);
use IO::Socket::INET;
use POSIX qw(WNOHANG);
use Time::HiRes qw(time sleep);

my %live;    # pid => 1, for the END sweep
my $owner = $$;    # forked children must not stop the test's poolers

sub _binary
{
	return $ENV{PGBOUNCER} if $ENV{PGBOUNCER};
	for my $dir (split(/:/, $ENV{PATH} // ''), '/usr/sbin', '/usr/bin')
	{
		return "$dir/pgbouncer" if $dir ne '' && -x "$dir/pgbouncer";
	}
	croak "RedisLockTest::PgBouncer: no pgbouncer binary (Debian package pgbouncer; test/setup-deps.sh installs it)";
}

sub new
{
	my ($class, $node, %opt) = @_;
	my $port = RedisLockTest::free_port();
	my $test = basename($0);
	$test =~ s/\.[^.]+$//;
	my $dir = File::Spec->rel2abs("$PostgreSQL::Test::Utils::tmp_check/pgbouncer_${test}_$port");
	mkpath($dir);
	# named like the node logs, so that run-all.sh shows its tail on failure
	my $logdir = File::Spec->rel2abs($PostgreSQL::Test::Utils::log_path // $dir);
	my $user = getpwuid($<);
	my $dbs = $opt{databases} // { postgres => 'pool_size=2' };

	my $self = bless {
		port    => $port,
		dir     => $dir,
		logfile => "$logdir/${test}_pgbouncer_$port.log",
		owner   => $$,
		pid     => undef,
	}, $class;

	open my $ul, '>', "$dir/userlist.txt" or croak "cannot write $dir/userlist.txt: $!";
	print $ul qq{"$user" ""\n};
	close $ul;

	my $conf = "[databases]\n";
	for my $alias (sort keys %$dbs)
	{
		$conf .= "$alias = host=" . $node->host . ' port=' . $node->port
		  . " dbname=postgres $dbs->{$alias}\n";
	}
	$conf .= <<"EOF";
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = @{[ $opt{pool_mode} // 'transaction' ]}
max_client_conn = 100
logfile = $self->{logfile}
pidfile = $dir/pgbouncer.pid
admin_users = $user
EOF
	open my $fh, '>', "$dir/pgbouncer.ini" or croak "cannot write $dir/pgbouncer.ini: $!";
	print $fh $conf;
	close $fh;

	my $bin = _binary();
	my $pid = fork();
	croak "fork failed: $!" unless defined $pid;
	if ($pid == 0)
	{
		open STDIN, '<', '/dev/null';
		open STDOUT, '>>', $self->{logfile};
		open STDERR, '>&', \*STDOUT;
		exec($bin, "$dir/pgbouncer.ini") or POSIX::_exit(127);
	}
	$self->{pid} = $pid;
	$live{$pid} = 1;

	my $deadline = time() + 20;
	while (1)
	{
		if (waitpid($pid, WNOHANG) == $pid)
		{
			my $rc = $?;
			delete $live{$pid};
			$self->{pid} = undef;
			croak "pgbouncer exited (status $rc) during startup:\n" . $self->_log_tail;
		}
		my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp');
		if ($sock) { close $sock; last; }
		if (time() > $deadline)
		{
			$self->stop;
			croak "pgbouncer did not listen on 127.0.0.1:$port within 20s:\n" . $self->_log_tail;
		}
		sleep(0.05);
	}
	return $self;
}

sub port    { $_[0]{port} }
sub pid     { $_[0]{pid} }
sub logfile { $_[0]{logfile} }

sub session_opts
{
	my ($self, $alias) = @_;
	return (host => '127.0.0.1', port => $self->{port}, dbname => $alias);
}

sub _log_tail
{
	my ($self) = @_;
	my @l = split /\n/, RedisLockTest::slurp($self->{logfile});
	splice(@l, 0, @l - 30) if @l > 30;
	return join("\n", @l) . "\n";
}

sub stop
{
	my ($self) = @_;
	my $pid = $self->{pid} or return $self;
	_stop_pid($pid);
	$self->{pid} = undef;
	return $self;
}

sub _stop_pid
{
	my ($pid) = @_;
	kill 'TERM', $pid;
	my $deadline = time() + 10;
	while (waitpid($pid, WNOHANG) == 0 && time() < $deadline) { sleep(0.02); }
	if (kill 0, $pid) { kill 'KILL', $pid; waitpid($pid, 0); }
	delete $live{$pid};
}

sub DESTROY
{
	my ($self) = @_;
	# Forked children must not stop the parent's pooler.
	return unless $self->{owner} && $self->{owner} == $$;
	local ($?, $@);
	$self->stop;
}

END
{
	my $exit = $?;
	if ($$ == $owner) { _stop_pid($_) for keys %live; }
	$? = $exit;
}

1;
