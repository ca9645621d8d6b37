# A real client's driver process that a test talks to by lines on its stdin
# and stdout: what RealRedisson.pm (Redisson) and LockPeer.pm (redsync, node
# redlock, redis-py, ShedLock, Spring) share.  The driver's stderr goes to a
# log file in the test's log directory.  Operations started with a tag
# answer asynchronously with a line of their own, which the subclass's
# _result_line recognises; any other line is the answer to the command
# just sent.  Builds are stamped with the sha256 of their sources, so a
# stale build is found, never used.
package RedisLockTest::Driver;

use strict;
use warnings;

use Carp qw(croak);
use Digest::SHA ();
use File::Spec;
use IO::Handle;
use IO::Select;
use IPC::Open3 ();
use POSIX ();
use Time::HiRes qw(time);

my $seq = 0;

# The sha256 of every file's path (relative to $root) and text, in byte
# order of the paths: the files below $root whose relative path $keep
# accepts, in directories $skip does not name.  build.sh scripts write the
# same stamp.
sub source_stamp
{
	my ($root, $keep, $skip) = @_;
	my @files;
	my @dirs = ($root);
	while (my $d = shift @dirs)
	{
		opendir(my $dh, $d) or croak "source_stamp: $d: $!";
		for my $e (readdir $dh)
		{
			next if $e =~ /^\.\.?$/;
			my $p = "$d/$e";
			if (-d $p) { push @dirs, $p unless $skip && $skip->{$e}; }
			elsif (-f $p)
			{
				my $rel = substr($p, length($root) + 1);
				push @files, $rel if !$keep || $keep->($rel);
			}
		}
		closedir $dh;
	}
	my $sha = Digest::SHA->new(256);
	for my $f (sort @files)
	{
		open my $fh, '<:raw', "$root/$f" or croak "source_stamp: $root/$f: $!";
		local $/;
		my $text = <$fh>;
		$sha->add("$f\n", $text);
	}
	return $sha->hexdigest;
}

# Why the build in $dir cannot be used (undef: it can): no stamp, or one
# of other sources than $stamp.  $what names the build, $how says how to
# make it.
sub stale_build
{
	my ($dir, $stamp, $what, $how) = @_;
	return "no $what in $dir ($how)" unless -f "$dir/stamp";
	open my $fh, '<', "$dir/stamp" or return "$dir/stamp: $!";
	my $have = <$fh>;
	chomp $have;
	return "the $what in $dir is built from other sources ($how)" unless $have eq $stamp;
	return undef;
}

# Starts @cmd with its stderr in the log "<$log_name>_<pid>_<n>.log";
# $label names the driver in messages.
sub spawn
{
	my ($class, $label, $log_name, $timeout, @cmd) = @_;
	my $logdir = $PostgreSQL::Test::Utils::log_path // File::Spec->tmpdir;
	my $log = sprintf('%s/%s_%d_%d.log', $logdir, $log_name, $$, ++$seq);
	open my $err, '>>', $log or croak "$label: $log: $!";
	my ($in, $out) = (IO::Handle->new, IO::Handle->new);
	my $pid = IPC::Open3::open3($in, $out, '>&' . fileno($err), @cmd);
	close $err;
	$in->autoflush(1);
	return bless {
		label => $label, pid => $pid, in => $in, out => $out, buf => '',
		results => {}, log => $log, timeout => $timeout,
	}, $class;
}

sub pid     { $_[0]{pid} }
sub logfile { $_[0]{log} }

# The last lines of the driver's log, for a message.
sub log_tail
{
	my ($self) = @_;
	open my $fh, '<', $self->{log} or return '';
	my @l = <$fh>;
	my $tail = join('', @l > 5 ? @l[-5 .. -1] : @l);
	return $tail eq '' ? '' : ": $tail";
}

# Writes one line to the driver.  A driver that died is reported by the
# write's error, not by SIGPIPE ending the test.
sub send_line
{
	my ($self, $line) = @_;
	croak "$self->{label}: the driver is gone" unless $self->{pid};
	local $SIG{PIPE} = 'IGNORE';
	print { $self->{in} } $line, "\n"
	  or croak "$self->{label}: write to the driver: $!" . $self->log_tail;
	return;
}

# The next line that is not an asynchronous result, within $t seconds
# (undef on timeout); results are kept for poll/result.  With
# $want_result, returns 1 after the first result read.
sub _line
{
	my ($self, $t, $want_result) = @_;
	my $deadline = time() + $t;
	while (1)
	{
		while ((my $nl = index($self->{buf}, "\n")) >= 0)
		{
			my $line = substr($self->{buf}, 0, $nl);
			substr($self->{buf}, 0, $nl + 1) = '';
			if (my @r = $self->_result_line($line))
			{
				$self->{results}{ $r[0] } = [ $r[1], $r[2] ];
				return 1 if $want_result;
				next;
			}
			return $line;
		}
		# with no time left, still take what the driver has already written
		# (poll's zero timeout would otherwise never read anything)
		my $left = $deadline - time();
		my $sel = IO::Select->new($self->{out});
		if (!$sel->can_read($left > 0 ? $left : 0))
		{
			return undef if $left <= 0;
			next;
		}
		my $n = sysread($self->{out}, $self->{buf}, 65536, length $self->{buf});
		croak "$self->{label}: the driver ended (see $self->{log})" . $self->log_tail
		  unless $n;
	}
}

# The result of $tag if it is in ([status, value]), without waiting.
sub poll
{
	my ($self, $tag) = @_;
	while (!exists $self->{results}{$tag})
	{
		last unless defined $self->_line(0, 1);
	}
	return $self->{results}{$tag};
}

# The result of $tag (status, value), waiting up to $t seconds; () if it
# did not come.
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

# The first of the tags whose result is in, within $t seconds (undef on
# timeout); its result stays for poll/result.
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

sub kill
{
	my ($self) = @_;
	return unless $self->{pid};
	CORE::kill('KILL', $self->{pid});
	waitpid($self->{pid}, 0);
	$self->{pid} = undef;
}

# Asks the driver to end with $line, and kills it if it has not within
# $t seconds.
sub quit_with
{
	my ($self, $line, $t) = @_;
	return unless $self->{pid};
	local $SIG{PIPE} = 'IGNORE';
	eval {
		print { $self->{in} } "$line\n";
		close $self->{in};
	};
	my $deadline = time() + $t;
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
