# RedisLockTest/Session.pm — RedisLockTest::Session, one DBD::Pg connection
# (one backend) with blocking and asynchronous statements, cancel and
# terminate.  Loaded by test/lib/RedisLockTest.pm; its POD is below.

package RedisLockTest::Session;

use strict;
use warnings;

# for RedisLockTest::observer, wait_until (loads the whole harness)
use RedisLockTest ();

=pod

=head1 RedisLockTest::Session

One DBD::Pg connection (one backend) to database postgres of a node.
AutoCommit on, RaiseError off, PrintError off, no server-side prepare (so a
string may hold several statements; the last one's result is returned).
NOTICE/WARNING messages are collected, see notices().

=over

=item RedisLockTest::Session->new($node, %opt)

Connects.  Options: dbname (default postgres), user (default: the OS user,
who is the bootstrap superuser of Cluster.pm nodes), application_name, host
and port (default the node's: another address, such as a pooler's in front
of the node).  Dies if the connection fails.

=cut

use Carp qw(croak);
use DBI;
use DBD::Pg qw(:async);
use Time::HiRes qw(time);

sub new
{
	my ($class, $node, %opt) = @_;
	my $dbname = $opt{dbname} // 'postgres';
	my $dsn = "dbi:Pg:dbname=$dbname;host=" . ($opt{host} // $node->host)
	  . ';port=' . ($opt{port} // $node->port);
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
		# DBD::Pg 3.19 and later return a statement that failed (a cancel,
		# say) as a result ("0E0"), with no err or errstr but its SQLSTATE:
		# the SQLSTATE decides (classes 00, 01, 02 are no errors)
		my $st = $dbh->state // '';
		return (undef, $dbh->errstr // "the statement failed with SQLSTATE $st", $st)
		  if $dbh->err || ($st ne '' && $st !~ /^0[012]/);
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
