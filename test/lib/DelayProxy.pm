# A userspace TCP delay proxy for the benchmarks (bench/modes_rtt.pl) and tests: one
# process, any number of listening ports, each forwarding to a target port on
# 127.0.0.1. Every chunk read from either side of a connection is written to
# the other side a fixed delay after it was read, so a request/reply pair
# through the proxy takes 2 × delay longer: an emulated network round trip
# (Linux netem is not available here). Chunks are queued first in, first out,
# so the order per connection (and per direction) is kept; an end of stream is
# forwarded, delayed like data, after the data before it.
#
# Only core Perl: IO::Socket::INET, Socket, Time::HiRes (CLOCK_MONOTONIC),
# one select() loop and a FIFO timer queue (the delay is the same for every
# chunk, so the queue is in due order by construction).
#
# Run as a program:
#   perl test/lib/DelayProxy.pm DELAY_MS LISTEN_PORT:TARGET_PORT ...
# It prints "ready" once all ports listen. Commands on stdin, one a line,
# each answered by one line on stdout:
#   delay MS   set the one-way delay (applies to chunks read from now on)
#   stats      "stats chunks=N late_mean_us=X late_max_us=Y port:N ..." since
#              the last stats: chunks forwarded, how late they left after
#              their due time (timer and scheduling overshoot), per port
#   stall DIR  hold back every chunk read from now on in direction DIR (up:
#              client to server, down: server to client) instead of
#              forwarding it; tests use it to choose exactly when a request
#              reaches the server, or when its reply reaches the client
#   pin DIR    while DIR is stalled: from now on hold back only the chunks
#              of the connections that have chunks held back in DIR now, and
#              forward the others' again; tests use it to hold one client
#              (the worker, say) while others go through the same port
#   go DIR     forward what stall DIR held back (in order) and stop holding
#              (DIR all: both directions; ends a pin too)
#   step DIR N forward the first N chunks held back in DIR, and go on
#              holding: lets exactly one request through, say
#   held       "held up=N down=M": chunks held back in each direction
#   quit       exit
# It also exits when stdin ends (its parent went away).
#
# Tests use it through DelayProxy->spawn (below).
package DelayProxy;

use strict;
use warnings;
use Config;
use Errno qw(EAGAIN EWOULDBLOCK EINTR);
use IO::Socket::INET;
use Socket qw(IPPROTO_TCP TCP_NODELAY);
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);

sub now { clock_gettime(CLOCK_MONOTONIC) }

sub run
{
	my ($delay_ms, @maps) = @_;
	die "usage: DelayProxy.pm DELAY_MS LISTEN_PORT:TARGET_PORT ...\n"
	  unless defined $delay_ms && $delay_ms =~ /^[\d.]+$/ && @maps;
	my $delay = $delay_ms / 1e3;
	$| = 1;
	$SIG{PIPE} = 'IGNORE';

	# Timer slack (default 50 µs) would be added to every sub-millisecond
	# wait; ask for 1 ns (prctl PR_SET_TIMERSLACK; x86_64 Linux syscall 157).
	eval { syscall(157, 29, 1, 0, 0, 0) } if $Config{archname} =~ /^x86_64-linux/;

	my %lsn;     # fileno => { sock, port, target }
	my %conn;    # fileno => { sock, peer (fileno), out, port, rdone, wdone, eof_pending }
	my @q;       # [ due, dst fileno, data or undef (end of stream), dst sock ]
	my ($rin, $ctl_buf) = ('', '');
	my %st = (n => 0, late => 0, max => 0, port => {});
	my %stalled;    # direction => 1 while held back, or { dst fileno => dst sock } pinned
	my %held = (up => [], down => []);    # direction => queue entries held back

	for my $m (@maps)
	{
		my ($lp, $tp) = $m =~ /^(\d+):(\d+)$/ or die "bad map $m\n";
		my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $lp,
			Listen => 128, ReuseAddr => 1, Proto => 'tcp') or die "listen $lp: $!\n";
		$s->blocking(0);
		$lsn{ fileno $s } = { sock => $s, port => $lp, target => $tp };
		vec($rin, fileno $s, 1) = 1;
	}
	vec($rin, 0, 1) = 1;    # stdin: commands
	print "ready\n";

	# released chunks go after what is queued already: every connection
	# keeps its order
	my $after_queued = sub { my ($t) = @_; return @q && $q[-1][0] > $t ? $q[-1][0] : $t; };

	my $close_pair = sub {
		my ($fd) = @_;
		for my $f ($fd, $conn{$fd} ? $conn{$fd}{peer} : ())
		{
			my $c = delete $conn{$f} or next;
			vec($rin, $f, 1) = 0;
			close $c->{sock};
		}
	};
	my $flush = sub {    # write what is pending to $fd; 0 if the pair was closed
		my ($fd) = @_;
		my $c = $conn{$fd} or return 0;
		while (length $c->{out})
		{
			my $w = syswrite($c->{sock}, $c->{out});
			if (!defined $w)
			{
				return 1 if $! == EAGAIN || $! == EWOULDBLOCK || $! == EINTR;
				$close_pair->($fd);
				return 0;
			}
			substr($c->{out}, 0, $w, '');
		}
		if ($c->{eof_pending} && !$c->{wdone})
		{
			shutdown($c->{sock}, 1);
			$c->{wdone} = 1;
			my $p = $conn{ $c->{peer} };
			$close_pair->($fd) if $c->{rdone} && $p && $p->{rdone} && $p->{wdone};
		}
		return 1;
	};

	while (1)
	{
		# send what is due
		my $t = now();
		while (@q && $q[0][0] <= $t)
		{
			my ($due, $fd, $data, $sock) = @{ shift @q };
			my $c = $conn{$fd};
			next unless $c && $c->{sock} == $sock;    # closed (fd maybe reused)
			my $late = $t - $due;
			$st{n}++;
			$st{late} += $late;
			$st{max} = $late if $late > $st{max};
			$st{port}{ $c->{port} }++;
			if (defined $data) { $c->{out} .= $data; }
			else { $c->{eof_pending} = 1; }
			$flush->($fd);
		}

		my $win = '';
		for my $fd (keys %conn) { vec($win, $fd, 1) = 1 if length $conn{$fd}{out}; }
		my $timeout = @q ? $q[0][0] - now() : undef;
		$timeout = 0 if defined $timeout && $timeout < 0;
		my ($rout, $wout) = ($rin, $win);
		my $n = select($rout, $wout, undef, $timeout);
		if ($n < 0)
		{
			next if $! == EINTR;
			die "select: $!\n";
		}
		next if $n == 0;
		$t = now();

		for my $fd (keys %conn)
		{
			$flush->($fd) if $conn{$fd} && vec($wout, $fd, 1);
		}

		if (vec($rout, 0, 1))    # commands
		{
			my $r = sysread(STDIN, $ctl_buf, 4096, length $ctl_buf);
			exit 0 if defined $r && $r == 0;
			while ($ctl_buf =~ s/^(.*)\n//)
			{
				my $cmd = $1;
				next unless $cmd =~ /\S/;
				if ($cmd =~ /^delay\s+([\d.]+)$/) { $delay = $1 / 1e3; print "ok delay $1\n"; }
				elsif ($cmd eq 'stats')
				{
					printf "stats chunks=%d late_mean_us=%.1f late_max_us=%.1f%s\n", $st{n},
					  $st{n} ? $st{late} / $st{n} * 1e6 : 0, $st{max} * 1e6,
					  join('', map { " $_:$st{port}{$_}" } sort keys %{ $st{port} });
					%st = (n => 0, late => 0, max => 0, port => {});
				}
				elsif ($cmd =~ /^stall (up|down)$/) { $stalled{$1} = 1; print "ok stall $1\n"; }
				elsif ($cmd =~ /^pin (up|down)$/)
				{
					$stalled{$1} = { map { $_->[1] => $_->[3] } @{ $held{$1} } } if $stalled{$1};
					print "ok pin $1\n";
				}
				elsif ($cmd =~ /^step (up|down) (\d+)$/)
				{
					my $due = $after_queued->($t);
					push @q, map { $_->[0] = $due; $_ } splice(@{ $held{$1} }, 0, $2);
					print "ok step $1 $2\n";
				}
				elsif ($cmd =~ /^go (up|down|all)$/)
				{
					my $due = $after_queued->($t);
					for my $dir ($1 eq 'all' ? qw(up down) : ($1))
					{
						delete $stalled{$dir};
						push @q, map { $_->[0] = $due; $_ } @{ $held{$dir} };
						$held{$dir} = [];
					}
					print "ok go $1\n";
				}
				elsif ($cmd eq 'held') { printf "held up=%d down=%d\n", scalar @{ $held{up} }, scalar @{ $held{down} }; }
				elsif ($cmd eq 'quit') { print "bye\n"; exit 0; }
				else { print "error unknown command\n"; }
			}
		}

		for my $lfd (keys %lsn)
		{
			next unless vec($rout, $lfd, 1);
			my $l = $lsn{$lfd};
			while (my $a = $l->{sock}->accept)
			{
				my $b = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $l->{target}, Proto => 'tcp');
				if (!$b) { close $a; next; }
				for my $s ($a, $b)
				{
					$s->blocking(0);
					setsockopt($s, IPPROTO_TCP, TCP_NODELAY, 1);
				}
				my ($fa, $fb) = (fileno $a, fileno $b);
				$conn{$fa} = { sock => $a, peer => $fb, out => '', port => $l->{port}, dir => 'up' };
				$conn{$fb} = { sock => $b, peer => $fa, out => '', port => $l->{port}, dir => 'down' };
				vec($rin, $_, 1) = 1 for $fa, $fb;
			}
		}

		for my $fd (keys %conn)
		{
			next unless vec($rout, $fd, 1);
			my $c = $conn{$fd} or next;
			next if $c->{rdone};
			my $buf;
			my $r = sysread($c->{sock}, $buf, 65536);
			if (!defined $r)
			{
				next if $! == EAGAIN || $! == EWOULDBLOCK || $! == EINTR;
				$close_pair->($fd);    # reset: drop both sides now
				next;
			}
			my $p = $conn{ $c->{peer} } or next;
			my $st = $stalled{ $c->{dir} };
			my $hold = ref $st ? ($st->{ $c->{peer} } // 0) == $p->{sock} : $st;
			my $into = $hold ? $held{ $c->{dir} } : \@q;
			if ($r == 0)
			{
				$c->{rdone} = 1;
				vec($rin, $fd, 1) = 0;
				push @$into, [ $t + $delay, $c->{peer}, undef, $p->{sock} ];
			}
			else
			{
				push @$into, [ $t + $delay, $c->{peer}, $buf, $p->{sock} ];
			}
		}
	}
}

# For tests: a proxy process with one listening port per target port.
#   my $p = DelayProxy->spawn(0, @target_ports);
#   $p->port($target)   the proxy's port in front of target
#   $p->cmd('stall up') one command, returns its answer line (bounded wait)
#   $p->held            { up => N, down => M }
#   $p->wait_held($dir, $n, $secs)  until at least n chunks are held in dir
sub spawn
{
	my ($class, $delay_ms, @targets) = @_;
	require IPC::Run;
	require RedisLockTest;
	my $self = bless { in => '', out => '', err => '', map => {} }, $class;
	$self->{map}{$_} = RedisLockTest::free_port(values %{ $self->{map} }) for @targets;
	$self->{timer} = IPC::Run::timeout(60);
	$self->{h} = IPC::Run::start(
		[ $^X, __FILE__, $delay_ms, map { "$self->{map}{$_}:$_" } @targets ],
		\$self->{in}, \$self->{out}, \$self->{err}, $self->{timer});
	$self->_answer('ready');
	return $self;
}

sub port { $_[0]{map}{ $_[1] } }

sub _answer
{
	my ($self, $re) = @_;
	$self->{timer}->start(60);
	$self->{h}->pump until $self->{out} =~ s/^($re[^\n]*)\n//m;
	return $1;
}

sub cmd
{
	my ($self, $cmd) = @_;
	my ($word) = $cmd =~ /^(\w+)/;
	$self->{in} .= "$cmd\n";
	return $self->_answer($word eq 'held' ? 'held ' : $word eq 'quit' ? 'bye' : "ok $word");
}

sub held
{
	my ($self) = @_;
	my $l = $self->cmd('held');
	my ($up, $down) = $l =~ /up=(\d+) down=(\d+)/;
	return { up => $up, down => $down };
}

sub wait_held
{
	my ($self, $dir, $n, $secs) = @_;
	return RedisLockTest::wait_until($secs, "$n chunks held back going $dir",
		sub { $self->held->{$dir} >= $n });
}

sub stop
{
	my ($self) = @_;
	return unless $self->{h};
	eval { $self->cmd('quit'); $self->{h}->finish };
	eval { $self->{h}->kill_kill };
	delete $self->{h};
}

sub DESTROY { $_[0]->stop }

run(@ARGV) unless caller;

1;
