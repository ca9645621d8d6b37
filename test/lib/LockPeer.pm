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
use Digest::SHA ();
use File::Basename qw(dirname);
use File::Spec;
use IO::Handle;
use IO::Select;
use IPC::Open3 ();
use POSIX ();
use Time::HiRes qw(time);

our @CLIENTS = qw(redsync redlock redispy shedlock spring);
our %REDLOCK = (redsync => 1, redlock => 1);
my %JAVA = (shedlock => 1, spring => 1);

my $SRC = File::Spec->rel2abs(dirname(__FILE__) . '/../peers');
my $seq = 0;

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

# build.sh's stamp: the sha256 of every file's path (relative to the
# client's directory) and text, in byte order of the paths.
sub source_stamp
{
	my ($client) = @_;
	my $root = "$SRC/$client";
	my @files;
	my @dirs = ($root);
	while (my $d = shift @dirs)
	{
		opendir(my $dh, $d) or croak "LockPeer: $d: $!";
		for my $e (readdir $dh)
		{
			next if $e =~ /^\.\.?$/;
			my $p = "$d/$e";
			if (-d $p) { push @dirs, $p unless $e eq 'node_modules' || $e eq '__pycache__'; }
			elsif (-f $p) { push @files, substr($p, length($root) + 1); }
		}
		closedir $dh;
	}
	my $sha = Digest::SHA->new(256);
	for my $f (sort @files)
	{
		open my $fh, '<:raw', "$root/$f" or croak "LockPeer: $root/$f: $!";
		local $/;
		my $text = <$fh>;
		$sha->add("$f\n", $text);
	}
	return $sha->hexdigest;
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
	  unless -f "$dir/stamp" && (!$JAVA{$client} || -s "$dir/classpath");
	open my $fh, '<', "$dir/stamp" or return "$dir/stamp: $!";
	my $stamp = <$fh>;
	chomp $stamp;
	return "the $client driver in $dir is built from other sources (" . _how($client) . ')'
	  unless $stamp eq source_stamp($src);
	return undef;
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
	my @cmd = (_command($client), (map { "url=$_" } @urls), @{ $opt{options} // [] });

	my $logdir = $PostgreSQL::Test::Utils::log_path // File::Spec->tmpdir;
	my $log = sprintf('%s/peer_%s_%d_%d.log', $logdir, $client, $$, ++$seq);
	open my $err, '>>', $log or croak "LockPeer: $log: $!";
	my ($in, $out) = (IO::Handle->new, IO::Handle->new);
	my $pid = IPC::Open3::open3($in, $out, '>&' . fileno($err), @cmd);
	close $err;
	$in->autoflush(1);
	my $self = bless {
		client => $client, pid => $pid, in => $in, out => $out, buf => '',
		results => {}, log => $log, timeout => $opt{timeout} // 60, n => 0,
	}, $class;
	my $line = $self->_line($self->{timeout});
	croak "LockPeer $client: no ready line in $self->{timeout} s (see $log)" unless defined $line;
	croak "LockPeer $client: bad ready line '$line' (see $log)" unless $line =~ /^ready \Q$client\E (\S+)/;
	$self->{version} = $1;
	return $self;
}

sub client  { $_[0]{client} }
sub version { $_[0]{version} }
sub pid     { $_[0]{pid} }
sub logfile { $_[0]{log} }

sub _log_tail
{
	my ($self) = @_;
	open my $fh, '<', $self->{log} or return '';
	my @l = <$fh>;
	my $tail = join('', @l > 5 ? @l[-5 .. -1] : @l);
	return $tail eq '' ? '' : ": $tail";
}

# The next line that is not an op's answer, within $t seconds (undef on
# timeout); answers are kept for poll/result.  With $want_answer, returns 1
# after the first answer read.
sub _line
{
	my ($self, $t, $want_answer) = @_;
	my $deadline = time() + $t;
	while (1)
	{
		while ((my $nl = index($self->{buf}, "\n")) >= 0)
		{
			my $line = substr($self->{buf}, 0, $nl);
			substr($self->{buf}, 0, $nl + 1) = '';
			if ($line =~ /^(\S+) (ok|err)(?: (.*))?$/ && $1 ne 'ready')
			{
				$self->{results}{$1} = [ $2, $3 // '' ];
				return 1 if $want_answer;
				next;
			}
			return $line;
		}
		my $left = $deadline - time();
		my $sel = IO::Select->new($self->{out});
		if (!$sel->can_read($left > 0 ? $left : 0))
		{
			return undef if $left <= 0;
			next;
		}
		my $n = sysread($self->{out}, $self->{buf}, 65536, length $self->{buf});
		croak "LockPeer $self->{client}: the driver ended (see $self->{log})" . $self->_log_tail
		  unless $n;
	}
}

sub start
{
	my ($self, $tag, $op, @args) = @_;
	croak 'LockPeer: the driver is gone' unless $self->{pid};
	croak "LockPeer: bad tag or argument in '$tag $op @args'" if grep { !defined || /\s/ || $_ eq '' } $tag, $op, @args;
	delete $self->{results}{$tag};
	# a driver that died is reported by the write's error, not by SIGPIPE
	# ending the test
	local $SIG{PIPE} = 'IGNORE';
	print { $self->{in} } join(' ', $tag, $op, @args), "\n"
	  or croak "LockPeer $self->{client}: write to the driver: $!" . $self->_log_tail;
	return;
}

sub poll
{
	my ($self, $tag) = @_;
	while (!exists $self->{results}{$tag})
	{
		last unless defined $self->_line(0, 1);
	}
	return $self->{results}{$tag};
}

sub result
{
	my ($self, $tag, $t) = @_;
	my $deadline = time() + $t;
	while (!exists $self->{results}{$tag})
	{
		my $left = $deadline - time();
		last if $left <= 0;
		$self->_line($left, 1);
	}
	my $r = delete $self->{results}{$tag} or return ();
	return @$r;
}

sub next_result
{
	my ($self, $tags, $t) = @_;
	my $deadline = time() + $t;
	while (1)
	{
		for my $tag (@$tags)
		{
			return $tag if exists $self->{results}{$tag};
		}
		my $left = $deadline - time();
		return undef if $left <= 0;
		$self->_line($left, 1);
	}
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

sub kill
{
	my ($self) = @_;
	return unless $self->{pid};
	CORE::kill('KILL', $self->{pid});
	waitpid($self->{pid}, 0);
	$self->{pid} = undef;
}

sub quit
{
	my ($self) = @_;
	return unless $self->{pid};
	local $SIG{PIPE} = 'IGNORE';
	eval {
		print { $self->{in} } "_q quit\n";
		close $self->{in};
	};
	my $deadline = time() + 10;
	while (time() < $deadline)
	{
		if (waitpid($self->{pid}, POSIX::WNOHANG()) != 0) { $self->{pid} = undef; return; }
		select(undef, undef, undef, 0.05);
	}
	$self->kill;
}

sub DESTROY
{
	my ($self) = @_;
	local ($@, $?);
	$self->quit if $self->{pid};
}

1;
