# LockPeer.pm — the real lock clients other than Redisson (redsync, node
# redlock, redis-py, ShedLock, Spring Integration) for redislock's TAP tests:
# starts a client's driver (test/peers/) and talks the line protocol of
# test/peers/README.md.

=pod

=head1 NAME

LockPeer - drive a real Redis lock client (Go, Node, Python, Java) from a TAP test

=head1 SYNOPSIS

  use LockPeer;
  my $p = LockPeer->new(client => 'redsync', urls => [ $redis->url ]);
  is($p->run('lock', 'job:42', 30000, 0), 'true', 'redsync holds job:42');
  is($p->key('job:42'), 'job:42', 'its key is the name');
  $p->start('w', 'lock', 'job:42', 30000, 10000);      # a second lock waits
  ok(!defined $p->poll('w'), 'still waiting');
  $p->run('unlock', 'job:42');
  my ($status, $value) = $p->result('w', 30);          # ('ok', 'true')
  my ($v, $err) = $p->try_run('unlock', 'nope');       # (undef, 'no lock held ...')

=head1 DESCRIPTION

Each object is one driver process: C<< <driver> <client> url=... <options> >>,
which prints C<< ready <client> <version> >> once connected and then answers
C<< <tag> <op> <args> >> lines with C<< <tag> ok <value> >> or
C<< <tag> err <message> >>, every op running concurrently in the driver.  The
ops (C<lock>, C<unlock>, C<extend>, C<key>, C<counter>, C<versions>, C<quit>)
and what each client does for them are in test/peers/README.md.

The drivers are built outside the tree by C<bash test/peers/build.sh> into
C<$REDISLOCK_PEERS_CACHE> (default C</var/cache/redislock/peers>), one
directory per client and source stamp.  A missing or stale build (its stamp
is not the digest of the current test/peers/E<lt>clientE<gt>/) is an error
naming C<bash test/peers/build.sh E<lt>clientE<gt>>: a test never runs a
driver built from other sources.  The Java clients (C<shedlock>, C<spring>)
are one Maven project, test/peers/java/, whose build.sh writes
C<$REDISLOCK_PEERS_CACHE/java/classpath> and a C<stamp> of the same digest
(of test/peers/java/); they are started as
C<< java -cp <classpath> redislock.peers.Driver <client> ... >>.

=over

=item @LockPeer::CLIENTS

Every client LockPeer can start: C<redsync redlock redispy shedlock spring>.
C<%LockPeer::REDLOCK> is the set of those that take several C<url>s
(Redlock over those masters): redsync and redlock.

=item LockPeer::cache_dir(), LockPeer::check_build($client)

The cache directory; undef if $client's driver is built from the current
sources, else the reason it cannot be used.
C<LockPeer::source_stamp($dir)> is the digest of test/peers/$dir/ (a
client's directory, or C<java>), C<LockPeer::driver_dir($client)> where its
build goes.

=item LockPeer->new(client => $c, urls => [...], options => [...], timeout => $s)

Starts the driver and waits (up to C<timeout> seconds, default 60) for its
ready line; dies naming the driver's log if it ends or stays silent.
C<urls> are C<redis://127.0.0.1:PORT> URLs (several: Redlock, for the
clients in C<%REDLOCK>); C<options> are the client's own C<name=value>
options (test/peers/README.md).  The driver's stderr goes to
C<$PostgreSQL::Test::Utils::log_path/peer_E<lt>clientE<gt>_E<lt>pidE<gt>_E<lt>nE<gt>.log>.

=item $p->run($op, @args), $p->try_run($op, @args)

Runs one op and returns its value (C<true>, C<false>, a number, a key);
C<run> dies with the driver's message on C<err>, C<try_run> returns
C<($value, undef)> or C<(undef, $message)>.  Both wait up to the object's
timeout.

=item $p->start($tag, $op, @args), $p->poll($tag), $p->result($tag, $timeout_s)

Starts an op without waiting for it.  C<poll> returns undef while it runs,
else C<[$status, $value]> (status C<ok> or C<err>); C<result> waits up to
$timeout_s seconds and returns C<($status, $value)> (and forgets the tag),
or C<()> on timeout.  C<< $p->next_result(\@tags, $timeout_s) >> returns the
first of @tags whose result is in (undef on timeout), leaving it for
C<result>.

=item $p->key($name), $p->version, $p->versions, $p->client

The Redis key the library uses for lock $name; the library version from
the ready line; the driver's C<versions> op (library, its Redis client and
runtime versions, e.g. C<redsync=v4.18.1 go-redis=v9.23.0 go=go1.26.8>), or
the ready line's version if the driver has no such op; the client's name.

=item $p->pid, $p->logfile, $p->kill, $p->quit

The driver's process id and log; SIGKILL (the client dies holding what it
holds) or C<quit>.  An object going away quits.

=back

=cut

package LockPeer;

use strict;
use warnings;

use Carp qw(croak);
use File::Basename qw(dirname);
use File::Spec;
use RedisLockTest::Driver;

our @ISA = ('RedisLockTest::Driver');

our @CLIENTS = qw(redsync redlock redispy shedlock spring);
our %REDLOCK = (redsync => 1, redlock => 1);
my %JAVA = (shedlock => 1, spring => 1);

my $SRC = File::Spec->rel2abs(dirname(__FILE__) . '/../peers');

sub cache_dir
{
	return $ENV{REDISLOCK_PEERS_CACHE} // '/var/cache/redislock/peers';
}

sub _how
{
	my ($client) = @_;
	my $c = $JAVA{$client} ? 'java' : $client;
	return "run: bash test/peers/build.sh $c"
	  . (defined $ENV{REDISLOCK_PEERS_CACHE} ? " (REDISLOCK_PEERS_CACHE=$ENV{REDISLOCK_PEERS_CACHE})" : '');
}

# build.sh's stamp: every file of the client's directory but installed
# packages and caches.
sub source_stamp
{
	my ($client) = @_;
	return RedisLockTest::Driver::source_stamp("$SRC/$client", undef,
		{ node_modules => 1, __pycache__ => 1 });
}

sub driver_dir
{
	my ($client) = @_;
	return cache_dir() . '/java' if $JAVA{$client};
	return cache_dir() . "/$client-" . substr(source_stamp($client), 0, 12);
}

sub check_build
{
	my ($client) = @_;
	return "unknown client '$client' (one of @CLIENTS)" unless grep { $_ eq $client } @CLIENTS;
	my $dir = driver_dir($client);
	my $src = $JAVA{$client} ? 'java' : $client;
	return "no test/peers/$src in this tree" unless -d "$SRC/$src";
	return "no $client driver built in $dir (" . _how($client) . ')'
	  if $JAVA{$client} && !-s "$dir/classpath";
	return RedisLockTest::Driver::stale_build($dir, source_stamp($src), "$client driver",
		_how($client));
}

# The command line that starts $client's driver.
sub _command
{
	my ($client) = @_;
	my $dir = driver_dir($client);
	return ("$dir/redsync-driver", 'redsync') if $client eq 'redsync';
	return ($ENV{REDISLOCK_NODE} // 'node', "$dir/driver.js", 'redlock') if $client eq 'redlock';
	return ("$dir/venv/bin/python", "$dir/driver.py", 'redispy') if $client eq 'redispy';
	open my $fh, '<', "$dir/classpath" or croak "LockPeer: $dir/classpath: $!";
	my $cp = <$fh>;
	chomp $cp;
	# a JVM per driver on a 2-core machine: start fast, stay small
	return ($ENV{REDISLOCK_JAVA} // 'java', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1',
		'-cp', $cp, 'redislock.peers.Driver', $client);
}

sub new
{
	my ($class, %opt) = @_;
	my $client = $opt{client} or croak 'LockPeer->new: client';
	my $why = check_build($client);
	croak "LockPeer: $why" if $why;
	my @urls = @{ $opt{urls} // croak 'LockPeer->new: urls' };
	croak "LockPeer: $client takes one url" if @urls > 1 && !$REDLOCK{$client};
	my $self = $class->spawn("LockPeer $client", "peer_$client", $opt{timeout} // 60,
		_command($client), (map { "url=$_" } @urls), @{ $opt{options} // [] });
	$self->{client} = $client;
	$self->{n} = 0;
	my $line = $self->_line($self->{timeout});
	croak "LockPeer $client: no ready line in $self->{timeout} s (see $self->{log})" unless defined $line;
	croak "LockPeer $client: bad ready line '$line' (see $self->{log})" unless $line =~ /^ready \Q$client\E (\S+)/;
	$self->{version} = $1;
	return $self;
}

sub client  { $_[0]{client} }
sub version { $_[0]{version} }

# An op's answer: "<tag> ok|err [<value>]".
sub _result_line
{
	my ($self, $line) = @_;
	return () unless $line =~ /^(\S+) (ok|err)(?: (.*))?$/ && $1 ne 'ready';
	return ($1, $2, $3 // '');
}

sub start
{
	my ($self, $tag, $op, @args) = @_;
	croak "LockPeer: bad tag or argument in '$tag $op @args'" if grep { !defined || /\s/ || $_ eq '' } $tag, $op, @args;
	delete $self->{results}{$tag};
	$self->send_line(join(' ', $tag, $op, @args));
	return;
}

sub try_run
{
	my ($self, $op, @args) = @_;
	my $tag = '_r' . ++$self->{n};
	$self->start($tag, $op, @args);
	my ($status, $value) = $self->result($tag, $self->{timeout});
	croak "LockPeer $self->{client}: no answer to '$op @args' in $self->{timeout} s (see $self->{log})"
	  unless defined $status;
	return $status eq 'ok' ? ($value, undef) : (undef, $value);
}

sub run
{
	my ($self, $op, @args) = @_;
	my ($v, $err) = $self->try_run($op, @args);
	croak "LockPeer $self->{client}: '$op @args': $err\n" if defined $err;
	return $v;
}

sub key { $_[0]->run('key', $_[1]) }

sub versions
{
	my ($self) = @_;
	my ($v, $err) = $self->try_run('versions');
	return defined $v ? $v : "$self->{client}=$self->{version}";
}

sub quit { $_[0]->quit_with('_q quit', 10) }

1;
