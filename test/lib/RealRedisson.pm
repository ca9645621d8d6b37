# RealRedisson.pm — the real Redisson client (test/redisson-java/Driver.java,
# one JVM per object) for redislock's TAP tests: starts the driver built for
# one Redisson version and talks its line protocol (test/redisson-java/README.md).

=pod

=head1 NAME

RealRedisson - drive a real Redisson client of a chosen version from a TAP test

=head1 SYNOPSIS

  use RealRedisson;
  for my $v (@RealRedisson::VERSIONS) {
      my $j = RealRedisson->new(version => $v, port => $redis->port);
      $j->run('t1', 'lock', 'plain', 'order:42', 600000);   # thread t1 holds it
      my $owner = $j->owner('t1');                         # "<uuid>:<thread id>"
      $j->start('w', 't2', 'lock', 'plain', 'order:42', 600000);  # t2 waits
      ok(!defined $j->poll('w'), 't2 still waits');
      $j->run('t1', 'unlock', 'plain', 'order:42');
      my ($status, $value) = $j->result('w', 60);          # ('ok', 'null')
  }

=head1 DESCRIPTION

The drivers are built outside the tree by C<bash test/redisson-java/build.sh>
into C<$REDISLOCK_REDISSON_CACHE/E<lt>versionE<gt>/> (default
C<${XDG_CACHE_HOME:-$HOME/.cache}/redislock-redisson>).  A missing or stale
build (its stamp is not the digest of the current sources) is an error naming
that command: a test never runs against a driver built from other sources.

=over

=item @RealRedisson::VERSIONS

The Redisson versions every real-client test runs against (build.sh builds
this list).  C<RealRedisson::versions()> is that list, or the versions in
C<$ENV{REDISLOCK_REDISSON_VERSIONS}> (space-separated) while working on one.

=item RealRedisson::cache_dir(), RealRedisson::check_build($version)

The cache directory; undef if the driver of $version is built from the
current sources, else the reason it cannot be used.

=item RealRedisson->new(version => $v, port => $p | url => $url | mode => [...], %opt)

Starts the JVM and connects it: C<port> is a single server on 127.0.0.1,
C<url> a single server URL, C<mode> the words of the driver's C<connect>
command (C<['sentinel', $master, $urls]>, C<['cluster', $urls]>).  C<options>
=> [ 'watchdog=5000', ... ] adds connect options; C<minIdle=2> unless given
(Redisson's 24 idle connections per node at start can time out on a busy
machine).  C<tls> => $tls (a RedisLockTest::TLS) makes the client trust that
CA for rediss:// URLs (the C<truststore> options, with
C<< $tls->java_truststore >>).  The JVM's stderr (Redisson's log) goes to
C<$PostgreSQL::Test::Utils::log_path/redisson_E<lt>vE<gt>_E<lt>nE<gt>.log>.

=item $j->run($thread, $op, @args)

Runs one operation in the named Java thread and returns its value (C<'null'>
for none, C<'true'>/C<'false'>, numbers and strings as text); dies with the
Java exception on an error.  C<< $j->try_run(...) >> returns C<($value, $error)>
instead.

=item $j->start($tag, $thread, $op, @args), $j->poll($tag), $j->result($tag, $timeout_s)

Starts an operation without waiting.  C<poll> returns undef while it runs,
else C<[$status, $value]> (status C<ok> or C<err>); C<result> waits up to
$timeout_s seconds and returns C<($status, $value)>, or C<()> on timeout.
C<< $j->next_result(\@tags, $timeout_s) >> returns the first of @tags whose
result is in (undef on timeout), leaving it for C<result>.
C<< $j->cancel($tag) >> interrupts its thread.

=item $j->owner($thread), $j->id, $j->version

The Redisson owner id of a thread (C<< <client id>:<thread id> >>), the
client id, the Redisson version the JVM runs.

=item RealRedisson::version_cmp($x, $y), RealRedisson::has_fenced($v)

Compares two versions like C<< <=> >>; whether version $v has RFencedLock.

=item RealRedisson::write_interop($test, @rows)

When C<$ENV{REDISLOCK_INTEROP_OUT}> names a directory, writes
C<$test.tsv> there: one line per [$primitive, $version, $result, $reason],
tab-separated, after a header line, where $result is C<works>, C<setting>
(works with the setting $reason names), C<fails> (for the reason $reason)
or C<n/a>.  tools/interop-table.pl renders these files as the docs' table.
Nothing is written without the variable.

=item $j->kill, $j->quit

Ends the JVM with SIGKILL (the client dies without unlocking anything), or
asks it to shut down.  Objects going away quit.

=back

=cut

package RealRedisson;

use strict;
use warnings;

use Carp qw(croak);
use File::Basename qw(dirname);
use File::Spec;
use RedisLockTest::Driver;

our @ISA = ('RedisLockTest::Driver');

our @VERSIONS = qw(3.12.5 3.16.1 3.21.3 3.31.0 3.43.0 3.52.0 4.3.1 4.7.0);

# Redisson up to 3.1x defaults to FstCodec, which reaches into java.base by
# reflection: on Java 17 that needs the packages opened (as its users do).
my @ADD_OPENS = map { "--add-opens=java.base/$_=ALL-UNNAMED" }
  qw(java.lang java.lang.reflect java.util java.util.concurrent java.math java.net java.text java.nio sun.nio.ch);

# The versions a test run covers: all, or REDISLOCK_REDISSON_VERSIONS
# (space-separated) while working on one.
sub versions
{
	return @VERSIONS unless $ENV{REDISLOCK_REDISSON_VERSIONS};
	return split ' ', $ENV{REDISLOCK_REDISSON_VERSIONS};
}

my $SRC = File::Spec->rel2abs(dirname(__FILE__) . '/../redisson-java');

sub cache_dir
{
	return $ENV{REDISLOCK_REDISSON_CACHE}
	  // (($ENV{XDG_CACHE_HOME} // "$ENV{HOME}/.cache") . '/redislock-redisson');
}

# build.sh's stamp: pom.xml and the Java sources.
sub source_stamp
{
	return RedisLockTest::Driver::source_stamp($SRC,
		sub { $_[0] eq 'pom.xml' || $_[0] =~ m{^src/.*\.java$} });
}

# A version's driver lives in a directory of its own per source stamp, so
# that checkouts with different test sources never use or overwrite each
# other's builds (build.sh).
sub driver_dir
{
	my ($v) = @_;
	return cache_dir() . "/$v-" . substr(source_stamp(), 0, 12);
}

sub check_build
{
	my ($v) = @_;
	my $dir = driver_dir($v);
	my $how = 'run: bash test/redisson-java/build.sh'
	  . (defined $ENV{REDISLOCK_REDISSON_CACHE} ? " (REDISLOCK_REDISSON_CACHE=$ENV{REDISLOCK_REDISSON_CACHE})" : '');
	return "no driver for Redisson $v in $dir ($how)" unless -f "$dir/redisson-driver.jar";
	return RedisLockTest::Driver::stale_build($dir, source_stamp(), "driver for Redisson $v", $how);
}

# The versions a test runs, each with its driver built: a version whose
# driver is missing or stale fails its "driver available" check (and
# $missing->($version) is called, for the test's own table) and is left out.
sub usable_versions
{
	my ($missing) = @_;
	Test::More::note('only Redisson ' . join(' ', versions()) . ' (REDISLOCK_REDISSON_VERSIONS)')
	  if $ENV{REDISLOCK_REDISSON_VERSIONS};
	my @usable;
	for my $v (versions())
	{
		my $why = check_build($v);
		if ($why)
		{
			Test::More::fail("Redisson $v: driver available");
			Test::More::diag($why);
			$missing->($v) if $missing;
			next;
		}
		push @usable, $v;
	}
	return @usable;
}

sub new
{
	my ($class, %opt) = @_;
	my $v = $opt{version} or croak 'RealRedisson->new: version';
	my $why = check_build($v);
	croak "RealRedisson: $why" if $why;
	my $dir = driver_dir($v);
	my @connect = $opt{mode} ? @{ $opt{mode} }
	  : ('single', $opt{url} // ('redis://127.0.0.1:' . ($opt{port} // croak 'RealRedisson->new: port or url')));
	my @options = @{ $opt{options} // [] };
	if ($opt{tls})
	{
		my ($store, $pass) = $opt{tls}->java_truststore;
		push @options, "truststore=$store", "truststorePassword=$pass";
	}
	# Redisson opens 24 (older versions 32) idle connections per node at
	# start, and gives up when they are not all up within connectTimeout:
	# on a busy test machine, with a JVM per version, keep that small.
	push @options, 'minIdle=2' unless grep { /^minIdle=/ } @options;
	push @connect, @options;

	my $self = $class->spawn("RealRedisson $v", "redisson_$v", $opt{timeout} // 120,
		$ENV{REDISLOCK_JAVA} // 'java', @ADD_OPENS, '-Xss512k', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1',
		'-Dorg.slf4j.simpleLogger.defaultLogLevel=' . ($opt{log_level} // 'warn'),
		'-Dorg.slf4j.simpleLogger.showDateTime=true',
		'-cp', "$dir/redisson-driver.jar:$dir/lib/*", 'redislock.test.Driver');
	$self->{version} = $v;
	$self->{id} = $self->_call('connect', @connect);
	return $self;
}

# version_cmp('3.16.1', '3.16.2') < 0, like <=>.
sub version_cmp
{
	my @x = split /\./, $_[0];
	my @y = split /\./, $_[1];
	for my $i (0 .. 2)
	{
		my $c = ($x[$i] // 0) <=> ($y[$i] // 0);
		return $c if $c;
	}
	return 0;
}

# RFencedLock exists from 3.19.0 on (redisson-versions.md).
sub has_fenced { version_cmp($_[0], '3.19.0') >= 0 ? 1 : 0 }

sub write_interop
{
	my ($test, @rows) = @_;
	my $dir = $ENV{REDISLOCK_INTEROP_OUT} or return;
	open(my $fh, '>', "$dir/$test.tsv") or croak "RealRedisson: $dir/$test.tsv: $!";
	print $fh join("\t", qw(primitive version result reason)), "\n";
	for my $r (@rows)
	{
		my @f = map { my $x = $_ // ''; $x =~ s/[\t\n]+/ /g; $x } @$r;
		croak "RealRedisson: bad interop result '$f[2]'" unless $f[2] =~ /^(works|setting|fails|n\/a)$/;
		print $fh join("\t", @f), "\n";
	}
	close $fh or croak "RealRedisson: $dir/$test.tsv: $!";
}

sub version    { $_[0]{version} }
sub id         { $_[0]{id} }

sub enc
{
	my ($s) = @_;
	return '%' if $s eq '';
	utf8::encode($s) if utf8::is_utf8($s);
	$s =~ s/([^\x21-\x7e]|%)/sprintf('%%%02X', ord $1)/ge;
	return $s;
}

sub dec
{
	my ($s) = @_;
	return '' if $s eq '%';
	$s =~ s/%([0-9A-Fa-f]{2})/chr(hex $1)/ge;
	return $s;
}

sub _send
{
	my ($self, @w) = @_;
	$self->send_line(join(' ', map { enc($_) } @w));
}

# An operation's asynchronous result: "result <tag> ok|err <value>".
sub _result_line
{
	my ($self, $line) = @_;
	return () unless $line =~ /^result (\S+) (ok|err) ?(.*)$/;
	return (dec($1), $2, dec($3));
}

sub _call
{
	my ($self, @w) = @_;
	$self->_send(@w);
	my $line = $self->_line($self->{timeout});
	croak "RealRedisson $self->{version}: no reply to '@w' in $self->{timeout} s (see $self->{log})"
	  unless defined $line;
	return dec($1) if $line =~ /^ok ?(.*)$/;
	if ($line =~ /^err (\S+) (.*)$/)
	{
		croak "RealRedisson $self->{version}: '@w': $1: " . dec($2) . "\n";
	}
	croak "RealRedisson $self->{version}: bad reply '$line' to '@w'";
}

sub run
{
	my ($self, $thread, @op) = @_;
	return $self->_call('run', $thread, @op);
}

sub try_run
{
	my ($self, @a) = @_;
	my $v = eval { $self->run(@a) };
	return ($v, undef) unless $@;
	my $e = $@;
	chomp $e;
	return (undef, $e);
}

sub start
{
	my ($self, $tag, $thread, @op) = @_;
	delete $self->{results}{$tag};
	$self->_call('start', $tag, $thread, @op);
	return;
}

sub cancel
{
	my ($self, $tag) = @_;
	return $self->_call('cancel', $tag);
}

sub owner
{
	my ($self, $thread) = @_;
	return $self->run($thread, 'owner');
}

sub quit { $_[0]->quit_with('quit', 20) }

1;
