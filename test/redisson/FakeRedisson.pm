# FakeRedisson.pm — a test-side stand-in for a Java service using Redisson.
#
# It speaks to Redis over its own RESP connection and runs, with EVAL, the
# Redisson Lua scripts transcribed in this directory (see README.md), with
# the key names and arguments Redisson computes.  Owner ids are
# "<client uuid>:<thread id>", as Redisson's getLockName(threadId).
#
# Used only by the multi-session tests in test/t/.  Nothing here is part of
# the extension.
#
#   my $java = FakeRedisson->new(port => $redis->port);
#   my $java = FakeRedisson->new(port => $tls_redis->port, $tls_redis->tls_opts);
#   $java->try_lock('order:42', 1, 30000);     # undef = acquired, else ttl
#   $java->unlock('order:42', 1);              # undef / 0 / 1 as Redisson
#   my $sub = FakeRedisson::Conn->new(port => ...);
#   $sub->subscribe(FakeRedisson::channel('order:42'));
#   my $msg = $sub->next_message(10);          # [channel, payload] or undef
#
# Against a Redis Cluster, as Redisson's cluster mode with Redis 7 runs:
#   my $java = FakeRedisson->new(port => $any_node_port, cluster => 1);
#   my $sub  = $java->subscriber(FakeRedisson::channel('order:42'));  # SSUBSCRIBE

use strict;
use warnings;

package FakeRedisson::Conn;

use IO::Socket::INET;
use IO::Socket::UNIX;
use IO::Select;
use Time::HiRes ();
use Carp;

# A minimal, binary-safe RESP2 client with bounded reads.
# Options: host (127.0.0.1), port | path, password, timeout (seconds per
# reply, 30), and for TLS (rediss)
#   tls => { ca_file => ..., cert_file => ..., key_file => ...,
#            verify_hostname => 1 }
# (RedisLockTest::Redis->tls_opts gives it): the server's certificate is
# checked against ca_file and, unless verify_hostname => 0, against host; a
# client certificate is presented if cert_file is given.  IO::Socket::SSL
# (Debian: libio-socket-ssl-perl) is loaded only then.
sub new
{
	my ($class, %o) = @_;
	my $sock;
	if ($o{path})
	{
		$sock = IO::Socket::UNIX->new(Peer => $o{path}, Type => SOCK_STREAM)
		  or croak "connect $o{path}: $!";
	}
	elsif ($o{tls})
	{
		$sock = _tls_connect($o{host} // '127.0.0.1', $o{port}, $o{tls});
	}
	else
	{
		$sock = IO::Socket::INET->new(
			PeerAddr => $o{host} // '127.0.0.1',
			PeerPort => $o{port},
			Proto    => 'tcp',
			Timeout  => 5) or croak "connect port $o{port}: $@";
	}
	binmode $sock;
	my $self = bless {
		sock    => $sock,
		buf     => '',
		timeout => $o{timeout} // 30,
		tls     => $o{tls} ? 1 : 0,
	}, $class;
	$self->cmd('AUTH', $o{password}) if defined $o{password};
	return $self;
}

# A TLS connection, handshake done (bounded by 5 s, as the plain connect),
# then non-blocking: reads and writes wait in select with the reply
# deadline, as on a plain socket.
sub _tls_connect
{
	my ($host, $port, $t) = @_;
	require IO::Socket::SSL;
	my $verify_name = $t->{verify_hostname} // 1;
	my $sock = IO::Socket::SSL->new(
		PeerAddr        => $host,
		PeerPort        => $port,
		Timeout         => 5,
		SSL_verify_mode => IO::Socket::SSL::SSL_VERIFY_PEER(),
		SSL_ca_file     => $t->{ca_file},
		($t->{cert_file} ? (SSL_cert_file => $t->{cert_file}, SSL_key_file => $t->{key_file}) : ()),
		SSL_verifycn_scheme => $verify_name ? 'default' : 'none',
		SSL_verifycn_name   => $host,
		# no SNI for an address (RFC 6066)
		($host =~ /^[\d.]+$|:/ ? (SSL_hostname => '') : (SSL_hostname => $host)),
	) or croak "TLS connect $host:$port: " . ($IO::Socket::SSL::SSL_ERROR || $@ || $!);
	$sock->blocking(0);
	return $sock;
}

# Waits (until $deadline) for the TLS socket to be ready for what the last
# TLS call wants (read or write).  Returns 0 on timeout.
sub _tls_wait
{
	my ($self, $deadline) = @_;
	my $left = $deadline - Time::HiRes::time();
	return 0 if $left <= 0;
	my $sel = IO::Select->new($self->{sock});
	my $want_write = $IO::Socket::SSL::SSL_ERROR == IO::Socket::SSL::SSL_WANT_WRITE();
	return scalar($want_write ? $sel->can_write($left) : $sel->can_read($left));
}

sub _fill
{
	my ($self, $deadline) = @_;
	return $self->_tls_fill($deadline) if $self->{tls};
	my $left = $deadline - Time::HiRes::time();
	return 0 if $left <= 0;
	my $sel = IO::Select->new($self->{sock});
	return 0 unless $sel->can_read($left);
	my $n = sysread($self->{sock}, my $chunk, 65536);
	croak "redis connection closed" unless $n;
	$self->{buf} .= $chunk;
	return 1;
}

# TLS: data already decrypted (pending) is read first; a record that held
# no data (e.g. a session ticket) is not the end of the connection.
sub _tls_fill
{
	my ($self, $deadline) = @_;
	my $sock = $self->{sock};
	while (1)
	{
		if (!$sock->pending)
		{
			my $left = $deadline - Time::HiRes::time();
			return 0 if $left <= 0;
			return 0 unless IO::Select->new($sock)->can_read($left);
		}
		my $n = sysread($sock, my $chunk, 65536);
		if ($n)
		{
			$self->{buf} .= $chunk;
			return 1;
		}
		croak "redis connection closed" if defined $n;
		croak "read from redis: " . ($IO::Socket::SSL::SSL_ERROR || $!)
		  unless $!{EAGAIN} || $!{EWOULDBLOCK};
		$self->_tls_wait($deadline) or return 0;
	}
}

sub _line
{
	my ($self, $deadline) = @_;
	while (1)
	{
		my $i = index($self->{buf}, "\r\n");
		if ($i >= 0)
		{
			my $l = substr($self->{buf}, 0, $i);
			substr($self->{buf}, 0, $i + 2, '');
			return $l;
		}
		$self->_fill($deadline) or return undef;
	}
}

sub _bytes
{
	my ($self, $n, $deadline) = @_;
	while (length($self->{buf}) < $n + 2)
	{
		$self->_fill($deadline) or croak "timeout reading redis reply";
	}
	my $s = substr($self->{buf}, 0, $n);
	substr($self->{buf}, 0, $n + 2, '');
	return $s;
}

# Reads one reply.  Returns (1, value) or () on timeout.  Errors come back as
# FakeRedisson::Error objects; nil as undef; arrays as array refs.
sub _reply
{
	my ($self, $deadline) = @_;
	my $l = $self->_line($deadline);
	return () unless defined $l;
	my ($t, $rest) = (substr($l, 0, 1), substr($l, 1));
	return (1, $rest) if $t eq '+';
	return (1, bless { msg => $rest }, 'FakeRedisson::Error') if $t eq '-';
	return (1, 0 + $rest) if $t eq ':';
	if ($t eq '$')
	{
		return (1, undef) if $rest < 0;
		return (1, $self->_bytes($rest, $deadline));
	}
	if ($t eq '*')
	{
		return (1, undef) if $rest < 0;
		my @a;
		for (1 .. $rest)
		{
			my ($ok, $v) = $self->_reply($deadline);
			croak "timeout reading redis array" unless $ok;
			push @a, $v;
		}
		return (1, \@a);
	}
	croak "bad RESP type '$t'";
}

sub send_cmd
{
	my ($self, @args) = @_;
	my $out = '*' . scalar(@args) . "\r\n";
	for my $a (@args)
	{
		my $b = $a;
		utf8::encode($b) if utf8::is_utf8($b);
		$out .= '$' . length($b) . "\r\n" . $b . "\r\n";
	}
	my $off = 0;
	my $deadline = Time::HiRes::time() + $self->{timeout};
	while ($off < length $out)
	{
		my $n = syswrite($self->{sock}, $out, length($out) - $off, $off);
		if (!defined $n && $self->{tls} && ($!{EAGAIN} || $!{EWOULDBLOCK}))
		{
			$self->_tls_wait($deadline) or croak "timeout writing to redis";
			next;
		}
		croak "write to redis: " . ($self->{tls} ? ($IO::Socket::SSL::SSL_ERROR || $!) : $!)
		  unless defined $n;
		$off += $n;
	}
}

# Runs a command, returns its reply; dies on a Redis error reply unless
# called as cmd_raw.
sub cmd_raw
{
	my ($self, @args) = @_;
	$self->send_cmd(@args);
	my ($ok, $v) = $self->_reply(Time::HiRes::time() + $self->{timeout});
	croak "timeout waiting for reply to $args[0]" unless $ok;
	return $v;
}

sub cmd
{
	my ($self, @args) = @_;
	my $v = $self->cmd_raw(@args);
	croak "redis error for $args[0]: $v->{msg}"
	  if ref $v eq 'FakeRedisson::Error';
	return $v;
}

# SUBSCRIBE, or SSUBSCRIBE (sharded pub/sub: served by the master of the
# channel's slot, which answers MOVED otherwise).  Dies on an error reply,
# with Redis's text in the message.
sub subscribe  { my ($self, @chans) = @_; $self->_subscribe('SUBSCRIBE',  @chans); }
sub ssubscribe { my ($self, @chans) = @_; $self->_subscribe('SSUBSCRIBE', @chans); }

sub _subscribe
{
	my ($self, $verb, @chans) = @_;
	$self->send_cmd($verb, @chans);
	for (@chans)
	{
		my ($ok, $v) = $self->_reply(Time::HiRes::time() + $self->{timeout});
		croak "no $verb confirmation" unless $ok;
		croak "redis error for $verb: $v->{msg}" if ref $v eq 'FakeRedisson::Error';
		croak "unexpected reply to $verb" unless ref $v eq 'ARRAY';
	}
}

# Next pub/sub push within $timeout seconds, as Redis sends it, or undef:
# e.g. ['message', channel, payload], ['smessage', channel, payload], or
# ['sunsubscribe', channel, count] (Redis unsubscribes sharded subscribers
# of a slot that moves to another node).
sub next_event
{
	my ($self, $timeout) = @_;
	my ($ok, $v) = $self->_reply(Time::HiRes::time() + $timeout);
	return $ok ? $v : undef;
}

# Next pub/sub message (plain or sharded) within $timeout seconds:
# [channel, payload] or undef.
sub next_message
{
	my ($self, $timeout) = @_;
	my $deadline = Time::HiRes::time() + $timeout;
	while (1)
	{
		my $v = $self->next_event($deadline - Time::HiRes::time()) // return undef;
		return [ $v->[1], $v->[2] ]
		  if ref $v eq 'ARRAY' && ($v->[0] eq 'message' || $v->[0] eq 'smessage');
	}
}

sub close { my $self = shift; close $self->{sock} if $self->{sock}; delete $self->{sock}; }

package FakeRedisson::Error;
sub msg { $_[0]{msg} }

package FakeRedisson;

use File::Basename ();
use Time::HiRes ();
use Carp;

my $DIR = File::Basename::dirname(__FILE__);
my %SCRIPT;

sub script
{
	my ($name) = @_;
	return $SCRIPT{$name} //= do
	{
		my $f = "$DIR/$name.lua";
		open my $fh, '<', $f or croak "$f: $!";
		local $/;
		<$fh>;
	};
}

sub script_path { return "$DIR/$_[0].lua"; }

# A direct connection to host:port, kept per address and opened again when
# the server went away (restarts are what these tests do to it).
# %opt: more FakeRedisson::Conn->new options, e.g. tls (used when the
# connection is opened).
my %conn;
sub conn_to
{
	my ($port, $host, %opt) = @_;
	$host //= '127.0.0.1';
	my $k = "$host:$port";
	my $c = $conn{$k};
	if ($c && !eval { $c->cmd('PING'); 1 }) { $c->close; undef $c; }
	$conn{$k} = $c //= FakeRedisson::Conn->new(%opt, host => $host, port => $port, timeout => 10);
	return $c;
}

# RedissonObject.prefixName: "prefix:{name}", or "prefix:name" when the
# name already contains "{".
sub prefix_name
{
	my ($prefix, $name) = @_;
	return "$prefix:$name" if index($name, '{') >= 0;
	return "$prefix:{$name}";
}
sub channel     { prefix_name('redisson_lock__channel', $_[0]) }
sub queue_key   { prefix_name('redisson_lock_queue',    $_[0]) }
sub timeout_key { prefix_name('redisson_lock_timeout',  $_[0]) }
sub token_key   { prefix_name('redisson_lock_token',    $_[0]) }
sub latch_key   { prefix_name('redisson_unlock_latch', $_[0]) . ':' . $_[1] }
# the channel a fair waiter of $owner subscribes to
sub fair_channel { channel($_[0]) . ':' . $_[1] }

sub now_ms { int(Time::HiRes::time() * 1000) }

my $req_seq = 0;

# Options: host, port | path, password, timeout (seconds per reply, 30), tls
# (see FakeRedisson::Conn->new; also used for the cluster nodes); uuid;
# lease (lockWatchdogTimeout) and fair_wait (fairLockWaitTimeout), in ms;
#   cluster => 1  port is a Redis Cluster node: follow redirects (see cmd)
#   sharded => 1  sharded pub/sub: SPUBLISH in the scripts, SSUBSCRIBE in
#                 subscriber.  Defaults to cluster, as Redisson's
#                 PublishSubscribeService.getPublishCommand() gives SPUBLISH
#                 once it finds sharded pub/sub supported (cluster mode,
#                 Redis 7+, shardedSubscriptionMode AUTO by default).
sub new
{
	my ($class, %o) = @_;
	my $uuid = $o{uuid} // sprintf('%08x-%04x-4%03x-a%03x-%012x',
		int(rand(2**32)), int(rand(2**16)), int(rand(2**12)),
		int(rand(2**12)), int(rand(2**48)));
	my %c = map { $_ => $o{$_} } grep { exists $o{$_} } qw(host port path password timeout tls);
	return bless {
		uuid  => $uuid,
		conn  => FakeRedisson::Conn->new(%c),
		copts => \%c,
		lease => $o{lease} // 30000,          # lockWatchdogTimeout
		fair_wait => $o{fair_wait} // 300000, # fairLockWaitTimeout
		cluster => $o{cluster},
		# RedisCommands.SPUBLISH / PUBLISH .getName(), the scripts' ARGV
		publish => ($o{sharded} // $o{cluster}) ? 'SPUBLISH' : 'PUBLISH',
	}, $class;
}

sub uuid  { $_[0]{uuid} }
sub conn  { $_[0]{conn} }
sub owner { my ($self, $thread) = @_; return "$self->{uuid}:$thread"; }

# A new connection to the server this client was created for (e.g. for SUBSCRIBE).
sub new_conn { my $self = shift; FakeRedisson::Conn->new(%{ $self->{copts} }); }

# A new connection to cluster node host:port, with this client's password.
sub _conn_at
{
	my ($self, $host, $port) = @_;
	my %c = (%{ $self->{copts} }, host => $host, port => $port);
	delete $c{path};
	return FakeRedisson::Conn->new(%c);
}

# The client's connection to host:port, kept for later redirects there.
sub _node_conn
{
	my ($self, $host, $port) = @_;
	return $self->{node_conns}{"$host:$port"} //= $self->_conn_at($host, $port);
}

# Runs a command as this client sends it; dies on an error reply.  With
# cluster => 1 it follows redirects as Redisson does: MOVED re-targets the
# client (the slot has a new master), ASK sends ASKING + the command to the
# importing node for this command only, TRYAGAIN (a multi-key command whose
# keys a migration split) retries.  Bounded by the connection timeout.
sub cmd
{
	my ($self, @args) = @_;
	my $deadline = Time::HiRes::time() + $self->{conn}{timeout};
	my ($conn, $asking) = ($self->{conn}, 0);
	while (1)
	{
		$conn->cmd('ASKING') if $asking;
		my $v = $conn->cmd_raw(@args);
		return $v unless ref $v eq 'FakeRedisson::Error';
		my $msg = $v->msg;
		croak "redis error for $args[0]: $msg"
		  unless $self->{cluster} && Time::HiRes::time() < $deadline;
		if ($msg =~ /^(MOVED|ASK) \d+ (\S+):(\d+)$/)
		{
			$conn   = $self->_node_conn($2, $3);
			$asking = $1 eq 'ASK';
			$self->{conn} = $conn unless $asking;
		}
		elsif ($msg =~ /^TRYAGAIN/)
		{
			($conn, $asking) = ($self->{conn}, 0);
			Time::HiRes::sleep(0.05);
		}
		else
		{
			croak "redis error for $args[0]: $msg";
		}
	}
}

# A new connection subscribed to @chans the way this client subscribes: with
# sharded pub/sub SSUBSCRIBE on the master of their slot (all must share one),
# found by following MOVED; else SUBSCRIBE.
sub subscriber
{
	my ($self, @chans) = @_;
	my $c = $self->new_conn;
	if ($self->{publish} ne 'SPUBLISH')
	{
		$c->subscribe(@chans);
		return $c;
	}
	for (1 .. 5)
	{
		return $c if eval { $c->ssubscribe(@chans); 1 };
		my $err = $@;
		$c->close;
		my ($host, $port) = $err =~ /MOVED \d+ (\S+):(\d+)/ or croak $err;
		$c = $self->_conn_at($host, $port);
	}
	croak "subscriber: too many MOVED redirects for @chans";
}

sub eval_script
{
	my ($self, $name, $keys, $args) = @_;
	return $self->cmd('EVAL', script($name), scalar(@$keys), @$keys, @$args);
}

# RLock.tryLock one attempt (tryLockInnerAsync EVAL_LONG):
# undef = acquired, else the lock's pttl.
sub try_lock
{
	my ($self, $name, $thread, $lease) = @_;
	return $self->eval_script('lock_try', [$name],
		[ $lease // $self->{lease}, $self->owner($thread) ]);
}

# RLock.unlock: undef = not held by this thread, 0 = still held, 1 = released.
sub unlock
{
	my ($self, $name, $thread, $lease) = @_;
	my $req = 'req' . $$ . '-' . (++$req_seq);
	my $latch = latch_key($name, $req);
	my $r = $self->eval_script('lock_unlock',
		[ $name, channel($name), $latch ],
		[ 0, $lease // $self->{lease}, $self->owner($thread), $self->{publish}, 10000 ]);
	$self->cmd('DEL', $latch);
	return $r;
}

sub force_unlock
{
	my ($self, $name) = @_;
	return $self->eval_script('lock_force_unlock', [ $name, channel($name) ],
		[ 0, $self->{publish} ]);
}

# Watchdog renewal for ([name, thread], ...): array ref of 1/0.
sub renew
{
	my ($self, $lease, @pairs) = @_;
	return $self->eval_script('lock_renew', [ map { $_->[0] } @pairs ],
		[ $lease // $self->{lease}, map { $self->owner($_->[1]) } @pairs ]);
}

# RFencedLock one attempt: (ttl, token): ttl -1 = acquired.
sub fenced_try_lock
{
	my ($self, $name, $thread, $lease) = @_;
	my $r = $self->eval_script('fenced_try', [ $name, token_key($name) ],
		[ $lease // $self->{lease}, $self->owner($thread) ]);
	return @$r;
}

# Fair RLock one attempt: undef = acquired, else ttl (and queued).
sub fair_try_lock
{
	my ($self, $name, $thread, $lease, $wait) = @_;
	return $self->eval_script('fair_try',
		[ $name, queue_key($name), timeout_key($name) ],
		[ $lease // $self->{lease}, $self->owner($thread),
		  $wait // $self->{fair_wait}, now_ms() ]);
}

sub fair_unlock
{
	my ($self, $name, $thread, $lease) = @_;
	my $req = 'req' . $$ . '-' . (++$req_seq);
	my $latch = latch_key($name, $req);
	my $r = $self->eval_script('fair_unlock',
		[ $name, queue_key($name), timeout_key($name), channel($name), $latch ],
		[ 0, $lease // $self->{lease}, $self->owner($thread), now_ms(),
		  $self->{publish}, 10000 ]);
	$self->cmd('DEL', $latch);
	return $r;
}

sub fair_acquire_failed
{
	my ($self, $name, $thread, $wait) = @_;
	return $self->eval_script('fair_acquire_failed',
		[ queue_key($name), timeout_key($name) ],
		[ $self->owner($thread), $wait // $self->{fair_wait} ]);
}

sub fair_force_unlock
{
	my ($self, $name) = @_;
	return $self->eval_script('fair_force_unlock',
		[ $name, queue_key($name), timeout_key($name), channel($name) ],
		[ 0, now_ms(), $self->{publish} ]);
}

1;
