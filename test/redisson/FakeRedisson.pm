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
# RReadWriteLock (see the READ-WRITE LOCKS POD below):
#   $java->try_read_lock('doc:1', 1);          # undef = acquired, else ttl
#   my $w = $java->write_waiter('doc:1', 2);   # waits as Java does, stepped
#   $java->unlock_read('doc:1', 1);            # undef / 0 / 1; last reader publishes 0
#   $w->wait(10);                              # 1 = acquired
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
# RedissonObject.suffixName: "name:suffix" when the name contains "{",
# else "{name}:suffix".
sub suffix_name
{
	my ($name, $suffix) = @_;
	return "$name:$suffix" if index($name, '{') >= 0;
	return "{$name}:$suffix";
}
sub channel     { prefix_name('redisson_lock__channel', $_[0]) }
sub queue_key   { prefix_name('redisson_lock_queue',    $_[0]) }
sub timeout_key { prefix_name('redisson_lock_timeout',  $_[0]) }
sub token_key   { prefix_name('redisson_lock_token',    $_[0]) }
sub latch_key   { prefix_name('redisson_unlock_latch', $_[0]) . ':' . $_[1] }
# the channel a fair waiter of $owner subscribes to
sub fair_channel { channel($_[0]) . ':' . $_[1] }

# RReadWriteLock names (RedissonReadLock / RedissonWriteLock; see the
# READ-WRITE LOCKS POD below).
sub rw_channel  { prefix_name('redisson_rwlock', $_[0]) }
# getReadWriteTimeoutNamePrefix: "{name}:<owner>:rwlock_timeout"
sub rw_timeout_prefix { suffix_name($_[0], $_[1]) . ':rwlock_timeout' }
# the timeout key of the $n-th nested read hold of $owner
sub rw_timeout_key { rw_timeout_prefix($_[0], $_[1]) . ':' . $_[2] }
# getKeyPrefix: the timeout prefix cut before ":<owner>" ("{name}", or the
# name itself if it contains "{")
sub rw_key_prefix
{
	my ($name, $owner) = @_;
	my $tp = rw_timeout_prefix($name, $owner);
	return substr($tp, 0, index($tp, ":$owner"));
}

# LockPubSub's messages (decoded with LongCodec on the Java side)
use constant UNLOCK_MESSAGE      => '0';   # wakes one waiter per JVM
use constant READ_UNLOCK_MESSAGE => '1';   # wakes every waiter

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

# Another client of the same "JVM": the same uuid and options on a
# connection of its own (e.g. for a forked child, which must not share the
# parent's socket).
sub clone
{
	my ($self) = @_;
	return FakeRedisson->new(%{ $self->{copts} }, uuid => $self->{uuid},
		lease => $self->{lease}, fair_wait => $self->{fair_wait},
		cluster => $self->{cluster},
		sharded => $self->{publish} eq 'SPUBLISH' ? 1 : 0);
}

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


=pod

=head1 READ-WRITE LOCKS (RReadWriteLock)

A FakeRedisson client also plays a Java service holding
C<redisson.getReadWriteLock(name).readLock()> / C<.writeLock()>: the methods
below run the scripts of RedissonReadLock, RedissonWriteLock and
renewal/ReadLockTask (C<rw_*.lua>, see README.md) with the keys and arguments
Redisson computes.  A "thread" is Redisson's thread id; two clients with
different uuids are two JVMs.

Layout (all in the slot of C<{name}>):

  name                                   HASH  mode = "read" | "write"
                                               <uuid>:<tid>       = read count
                                               <uuid>:<tid>:write = write count
                                         PTTL: the lock's lease
  {name}:<uuid>:<tid>:rwlock_timeout:<n> STRING "1", PX = the lease of that
                                         thread's n-th nested read hold
  redisson_rwlock:{name}                 channel of both locks

(with C<name:...> instead of C<{name}:...> when the name contains C<{>.)

Messages on the channel: C<0> (UNLOCK_MESSAGE, wakes one waiter per JVM) when
the last reader leaves (the hash is deleted), on a read forceUnlock, and on a
read unlock of a lock that is gone; C<1> (READ_UNLOCK_MESSAGE, wakes every
waiter) when a writer leaves and no read hold remains, on a write forceUnlock,
and on a write unlock of a lock that is gone.  Nothing is published when a
reader leaves and others remain, when a writer leaves while its thread still
holds reads (downgrade: mode becomes C<read>), or when leases run out.

Return conventions follow the RLock methods above: an acquisition attempt
gives undef when acquired, else the lock's pttl (ms; -1 if it has no
expiry); an unlock gives undef (not held by this thread: Java throws
IllegalMonitorStateException), 0 (still held) or 1 (released).

=over

=item FakeRedisson::rw_channel($name)

C<redisson_rwlock:{name}>.

=item FakeRedisson::rw_timeout_key($name, $owner, $n), rw_timeout_prefix($name, $owner), rw_key_prefix($name, $owner)

C<{name}:$owner:rwlock_timeout:$n>, the prefix without C<:$n>, and the key
prefix C<{name}> as the unlock and renewal scripts get them.  C<$owner> is
C<< $java->owner($thread) >>.

=item $java->write_owner($thread)

The write lock's field: C<< "<uuid>:<thread>:write" >>.

=cut

sub write_owner { my ($self, $thread) = @_; return $self->owner($thread) . ':write'; }

=pod

=item $java->try_read_lock($name, $thread [, $lease_ms])

One C<readLock().tryLock()> attempt (tryLockInnerAsync): undef = acquired
(a new reader, a nested read, or a read under this thread's own write lock),
else the pttl of the lock (another thread's write lock).  $lease_ms defaults
to the client's lease (lockWatchdogTimeout): what Java passes when the
watchdog is to renew the hold (see renew_read).

=cut

sub try_read_lock
{
	my ($self, $name, $thread, $lease) = @_;
	my $owner = $self->owner($thread);
	return $self->eval_script('rw_read_try',
		[ $name, rw_timeout_prefix($name, $owner) ],
		[ $lease // $self->{lease}, $owner, $self->write_owner($thread) ]);
}

=pod

=item $java->unlock_read($name, $thread)

C<readLock().unlock()>: undef = this thread holds no read (or the lock is
gone: then C<0> is published anyway), 0 = still held (a nested read of ours,
another reader whose rwlock_timeout keys live, or the write lock), 1 =
released: the hash deleted and C<0> published, also when other readers'
fields remain but all their rwlock_timeout keys have expired.  Uses a fresh
unlock latch and deletes it afterwards, as Redisson does.

=cut

sub unlock_read
{
	my ($self, $name, $thread) = @_;
	my $owner = $self->owner($thread);
	my $req = 'req' . $$ . '-' . (++$req_seq);
	my $latch = latch_key($name, $req);
	my $r = $self->eval_script('rw_read_unlock',
		[ $name, rw_channel($name), rw_timeout_prefix($name, $owner),
		  rw_key_prefix($name, $owner), $latch ],
		[ UNLOCK_MESSAGE, $owner, $self->{publish}, 10000 ]);
	$self->cmd('DEL', $latch);
	return $r;
}

=pod

=item $java->try_write_lock($name, $thread [, $lease_ms])

One C<writeLock().tryLock()> attempt: undef = acquired (a reentry adds
$lease_ms to the remaining pttl), else the pttl (read mode, the caller's
own read holds included: Redisson has no read-to-write upgrade; or another
thread's write lock).

=cut

sub try_write_lock
{
	my ($self, $name, $thread, $lease) = @_;
	return $self->eval_script('rw_write_try', [$name],
		[ $lease // $self->{lease}, $self->write_owner($thread) ]);
}

=pod

=item $java->unlock_write($name, $thread [, $lease_ms])

C<writeLock().unlock()>: undef = not write-held by this thread (or the lock
is gone: C<1> is published then), 0 = the write count stays above 0 (the
hash is PEXPIREd to $lease_ms, Java's internalLockLeaseTime: the last
explicit lease, else lockWatchdogTimeout), 1 = released: the hash deleted
and C<1> published, or, when this thread still holds reads, mode set to
C<read> and nothing published.

=cut

sub unlock_write
{
	my ($self, $name, $thread, $lease) = @_;
	my $req = 'req' . $$ . '-' . (++$req_seq);
	my $latch = latch_key($name, $req);
	my $r = $self->eval_script('rw_write_unlock',
		[ $name, rw_channel($name), $latch ],
		[ READ_UNLOCK_MESSAGE, $lease // $self->{lease}, $self->write_owner($thread),
		  $self->{publish}, 10000 ]);
	$self->cmd('DEL', $latch);
	return $r;
}

=pod

=item $java->force_unlock_read($name), $java->force_unlock_write($name)

C<readLock().forceUnlock()>: if the mode is C<read>, deletes the hash
(the rwlock_timeout keys are left to expire), publishes C<0>, returns 1;
else 0.  C<writeLock().forceUnlock()>: the same for mode C<write>,
publishing C<1>.

=cut

sub force_unlock_read
{
	my ($self, $name) = @_;
	return $self->eval_script('rw_read_force_unlock', [ $name, rw_channel($name) ],
		[ UNLOCK_MESSAGE, $self->{publish} ]);
}

sub force_unlock_write
{
	my ($self, $name) = @_;
	return $self->eval_script('rw_write_force_unlock', [ $name, rw_channel($name) ],
		[ READ_UNLOCK_MESSAGE, $self->{publish} ]);
}

=pod

=item $java->renew_read($name, @threads)

One read-lock watchdog round for one lock (renewal/ReadLockTask, with the
client's lease as lockWatchdogTimeout): for each of @threads (this JVM's
threads holding the read lock) still in the hash, every one of its
rwlock_timeout keys (count .. 1) is PEXPIREd to the lease, and, if any was
there, the hash too.  Other JVMs' readers are not touched (Redisson 4.4+).
Returns 1 = renewed, 0 = none of @threads holds it (Java stops renewing).
Java's watchdog runs every lease/3 ms, for holds taken without a lease.

=item $java->renew_reads([$name, @threads], ...)

The same for several locks in one EVAL (a chunk of lockWatchdogBatchSize):
an array ref of 1/0 in order.

=cut

sub renew_reads
{
	my ($self, @locks) = @_;
	my (@keys, @args);
	for my $l (@locks)
	{
		my ($name, @threads) = @$l;
		croak "renew_reads: no thread for $name" unless @threads;
		push @keys, $name, rw_key_prefix($name, $self->owner($threads[0]));
		push @args, scalar(@threads), map { $self->owner($_) } @threads;
	}
	return $self->eval_script('rw_read_renew', \@keys, [ $self->{lease}, @args ]);
}

sub renew_read
{
	my ($self, $name, @threads) = @_;
	return $self->renew_reads([ $name, @threads ])->[0];
}

=pod

=item $java->renew_write($name, $thread)

The write lock's watchdog round: the plain LockTask (lock_renew.lua) with
the field C<< <uuid>:<thread>:write >>: PEXPIREs the hash to the client's
lease if that field is there.  Returns 1 / 0.

=cut

sub renew_write
{
	my ($self, $name, $thread) = @_;
	return $self->renew(undef, [ $name, $thread . ':write' ])->[0];
}

=pod

=item $java->read_hold_count($name, $thread), $java->write_hold_count($name, $thread)

C<getHoldCount()> of the read / write lock: the thread's field, 0 if absent.

=item $java->is_read_locked($name), $java->is_write_locked($name)

C<readLock().isLocked()> (mode C<read>, or C<write> with read holds besides
the writer's field) and C<writeLock().isLocked()> (mode C<write>): 1 / 0.

=cut

sub read_hold_count
{
	my ($self, $name, $thread) = @_;
	return $self->cmd('HGET', $name, $self->owner($thread)) // 0;
}

sub write_hold_count
{
	my ($self, $name, $thread) = @_;
	return $self->cmd('HGET', $name, $self->write_owner($thread)) // 0;
}

sub is_read_locked { my ($self, $name) = @_; $self->eval_script('rw_read_is_locked', [$name], []); }

sub is_write_locked
{
	my ($self, $name) = @_;
	return (($self->cmd('HGET', $name, 'mode') // '') eq 'write') ? 1 : 0;
}

=pod

=item $java->rw_state($name)

A snapshot of the lock, taken in one EVAL (a helper, not a Redisson
script): undef if the hash does not exist, else

  { mode    => 'read' | 'write',
    pttl    => the hash's PTTL (-1: no expiry),
    readers => { '<uuid>:<tid>' => read count, ... },
    writers => { '<uuid>:<tid>' => write count, ... },   # field minus ":write"
    timeouts => { '<uuid>:<tid>' => [ PTTL of rwlock_timeout:1, :2, ... ], ... } }

C<timeouts> has one entry per reader, one PTTL per nested hold up to its
count; -2 marks an expired (missing) key, as the unlock script sees it.
C<< $java->rw_state($name)->{readers} >> lists every JVM's readers.

=cut

my $RW_STATE_LUA = <<'LUA';
local h = redis.call('hgetall', KEYS[1]);
if #h == 0 then return nil; end;
local out = { redis.call('pttl', KEYS[1]), h, {} };
for i = 1, #h, 2 do
    local n = tonumber(h[i + 1]);
    if h[i] ~= 'mode' and n ~= nil and string.sub(h[i], -6) ~= ':write' then
        local t = {};
        for c = 1, n do
            table.insert(t, redis.call('pttl', KEYS[2] .. ':' .. h[i] .. ':rwlock_timeout:' .. c));
        end;
        table.insert(out[3], h[i]);
        table.insert(out[3], t);
    end;
end;
return out;
LUA

sub rw_state
{
	my ($self, $name) = @_;
	my $r = $self->cmd('EVAL', $RW_STATE_LUA, 2, $name,
		rw_key_prefix($name, $self->owner(0))) // return undef;
	my ($pttl, $h, $t) = @$r;
	my %f = @$h;
	my %st = (mode => delete $f{mode}, pttl => $pttl, readers => {}, writers => {},
		timeouts => { @$t });
	for my $k (keys %f)
	{
		if ($k =~ /^(.*):write$/) { $st{writers}{$1} = $f{$k}; }
		else                      { $st{readers}{$k} = $f{$k}; }
	}
	return \%st;
}

=pod

=item $java->read_waiter($name, $thread [, $lease_ms]), $java->write_waiter(...)

A wait for the read / write lock as Java's C<lock()> / C<tryLock(wait, ...)>
does it (RedissonLock.lock / tryLock), as a non-blocking object the test
drives: one attempt; if refused, subscribe to C<redisson_rwlock:{name}>
(SSUBSCRIBE with sharded pub/sub) on a connection of the waiter's own, and
attempt again; then each C<step> waits for a message or for the TTL the last
attempt returned, whichever comes first, and attempts again.  See
FakeRedisson::Waiter below.  Each waiter has its own subscription, as a
waiter alone in its JVM would: the per-JVM sharing of one latch (where C<0>
wakes one local waiter, C<1> all) is not modelled.

=item $java->read_lock($name, $thread [, $lease_ms [, $wait_s]]), $java->write_lock(...)

The same wait, blocking, bounded by $wait_s seconds (default: the client's
reply timeout, 30): C<tryLock(wait, lease)>.  Returns undef = acquired, else
the last pttl seen (the wait ran out).  To block in a forked child, use
C<< $java->clone >> there (a connection of its own, the same uuid).

=cut

sub read_waiter
{
	my ($self, $name, $thread, $lease) = @_;
	return FakeRedisson::Waiter->new($self, rw_channel($name),
		sub { $self->try_read_lock($name, $thread, $lease) });
}

sub write_waiter
{
	my ($self, $name, $thread, $lease) = @_;
	return FakeRedisson::Waiter->new($self, rw_channel($name),
		sub { $self->try_write_lock($name, $thread, $lease) });
}

sub read_lock
{
	my ($self, $name, $thread, $lease, $wait) = @_;
	my $w = $self->read_waiter($name, $thread, $lease);
	$w->wait($wait // $self->{conn}{timeout});
	$w->cancel;
	return $w->ttl;
}

sub write_lock
{
	my ($self, $name, $thread, $lease, $wait) = @_;
	my $w = $self->write_waiter($name, $thread, $lease);
	$w->wait($wait // $self->{conn}{timeout});
	$w->cancel;
	return $w->ttl;
}

=pod

=back

=head2 FakeRedisson::Waiter

  my $w = $java->write_waiter('doc:1', 7);   # attempt, subscribe, attempt
  ...                                        # another client unlocks
  ok($w->wait(10), 'got it');                # bounded
  is_deeply($w->events, [ [ message => '0' ] ], 'woken by the last reader');

=over

=item FakeRedisson::Waiter->new($client, $channel, $try [, wakes => $code])

$try is a code ref making one attempt (undef = acquired, else a TTL in ms;
a negative TTL: wait for a message only).  In list context it may return a
second value, kept as C<< $w->value >> (e.g. the permit ids a semaphore
attempt got).  Attempts once; if refused, subscribes to $channel with
C<< $client->subscriber >> and attempts again.  C<wakes>, given a message's
payload, tells whether it wakes the waiter as Java's pub/sub listener would
(default: every message; the semaphore waiters: a permit count above 0, as
SemaphorePubSub releases min(waiters, count) latch permits; the latch
awaiter: C<0> only, as C<1> closes the latch).

=item $w->acquired, $w->ttl, $w->value, $w->attempts, $w->subscribed

Whether the lock is held, the last attempt's result (undef once acquired),
the second value the last attempt returned (see new),
how many attempts were made, and whether the waiter is subscribed (it
unsubscribes, by closing its connection, once acquired or cancelled).

=item $w->step($max_s [, $marker])

Unless acquired: waits for one message on the channel for at most
min(ttl, $max_s) seconds (just $max_s if the TTL is negative: the lock has
no expiry), records what ended the wait, and attempts again.  Returns 1 if
the lock is now held, else 0.

With $marker, a message whose payload is $marker also ends the wait,
recorded as C<< [marker => $marker] >>.  That shows without any timing
that nothing woke the waiter before some point: the test publishes the
marker on the waiter's own channel after the point, steps with a long
bound, and checks the marker is what ended the wait (messages that came
before it and did not wake are C<ignored> events before it).

=item $w->wait($timeout_s)

Steps until acquired or $timeout_s seconds have passed.  Returns 1 / 0.

=item $w->events

Array ref of what ended each wait, in order: C<< [message => $payload] >> or
C<< [timeout => $seconds_waited] >>, or C<< [marker => $marker] >> (see
step); a message that does not wake the waiter
(see C<wakes>) is recorded as C<< [ignored => $payload] >> and the wait
goes on.  Messages that came while nobody was
waiting are kept (Java's latch keeps released permits too).

=item $w->cancel

Gives up the wait: unsubscribes (the lock, if it was acquired, stays held).

=back

=cut

package FakeRedisson::Waiter;

use Time::HiRes ();

sub new
{
	my ($class, $client, $channel, $try, %opt) = @_;
	my $self = bless { client => $client, channel => $channel, try => $try,
		wakes => $opt{wakes} // sub { 1 }, attempts => 0, events => [] }, $class;
	return $self unless defined $self->_attempt;
	$self->{sub} = $client->subscriber($channel);
	$self->_attempt;
	return $self;
}

sub _attempt
{
	my ($self) = @_;
	$self->{attempts}++;
	my ($ttl, $value) = $self->{try}->();
	$self->{ttl} = $ttl;
	$self->{value} = $value;
	$self->cancel unless defined $self->{ttl};
	return $self->{ttl};
}

sub acquired   { !defined $_[0]{ttl} }
sub ttl        { $_[0]{ttl} }
sub value      { $_[0]{value} }
sub attempts   { $_[0]{attempts} }
sub events     { $_[0]{events} }
sub subscribed { $_[0]{sub} ? 1 : 0 }

sub step
{
	my ($self, $max, $marker) = @_;
	return 1 if $self->acquired;
	my $ttl  = $self->{ttl};
	my $wait = ($ttl >= 0 && $ttl / 1000 < $max) ? $ttl / 1000 : $max;
	my $deadline = Time::HiRes::time() + $wait;
	while (1)
	{
		my $left = $deadline - Time::HiRes::time();
		my $m = $self->{sub}->next_message($left > 0 ? $left : 0);
		if (!defined $m)
		{
			push @{ $self->{events} }, [ timeout => $wait ];
			last;
		}
		if (defined $marker && $m->[1] eq $marker)
		{
			push @{ $self->{events} }, [ marker => $m->[1] ];
			last;
		}
		if ($self->{wakes}->($m->[1]))
		{
			push @{ $self->{events} }, [ message => $m->[1] ];
			last;
		}
		push @{ $self->{events} }, [ ignored => $m->[1] ];
	}
	$self->_attempt;
	return $self->acquired ? 1 : 0;
}

sub wait
{
	my ($self, $timeout) = @_;
	my $deadline = Time::HiRes::time() + $timeout;
	until ($self->acquired)
	{
		my $left = $deadline - Time::HiRes::time();
		return 0 if $left <= 0;
		$self->step($left);
	}
	return 1;
}

sub cancel
{
	my ($self) = @_;
	$self->{sub}->close if $self->{sub};
	delete $self->{sub};
}

package FakeRedisson;

=pod

=head1 SEMAPHORES AND COUNT-DOWN LATCHES (RSemaphore, RPermitExpirableSemaphore, RCountDownLatch)

A FakeRedisson client also plays a Java service using
C<redisson.getSemaphore(name)>, C<getPermitExpirableSemaphore(name)> and
C<getCountDownLatch(name)>: the methods below run the scripts of
RedissonSemaphore (C<sem_*.lua>), RedissonPermitExpirableSemaphore
(C<permit_*.lua>) and RedissonCountDownLatch (C<latch_*.lua>), see
README.md, with the keys and arguments Redisson computes.  None of them has
an owner: the thread id plays no part.

Layout:

  RSemaphore
    name                   STRING  available permits (absent = 0); TTL only
                                   from trySetPermits(p, ttl) (SET drops it)
    redisson_sc:{name}     channel; messages: the new total (release,
                                   trySetPermits, addPermits: may be <= 0)
  RPermitExpirableSemaphore
    name                   STRING  available (unacquired) permits
    {name}:timeout         ZSET    member = an acquired permit id, 16 raw
                                   bytes (the API shows 32 lowercase hex
                                   chars); score = its expiry, epoch ms of
                                   the acquiring client's clock, or
                                   922337203685477 for no lease; PTTL copied
                                   from name's (if any) at each acquisition
    redisson_sc:{name}     channel (the same as RSemaphore's); messages:
                                   the new total (release of one id,
                                   reclaimed expired permits if the total is
                                   > 0, trySetPermits, setPermits: the new
                                   maximum), the delta (addPermits if > 0,
                                   release of several ids: the number released)
  RCountDownLatch
    name                   STRING  the count; absent when 0 or never set
    redisson_countdownlatch__channel__{name}
                           channel (built by concatenation: braces even if
                                   name has some); messages 0 = ZERO_COUNT
                                   (opens the waiters), 1 = NEW_COUNT (closes)

(C<{name}:timeout> is C<name:timeout> and C<redisson_sc:{name}> is
C<redisson_sc:name> when the name contains C<{>.)

Expired PES permits are reclaimed lazily, by the next PES script that runs
(an acquisition reclaims at most as many as it asks for); nothing is
published when a lease merely runs out.  Nothing publishes when a semaphore
key expires or is drained, or when a latch key is deleted by C<delete()>
(that publishes C<1>) or counted down from nothing.

With sharded pub/sub (C<cluster =E<gt> 1>, see new) the scripts SPUBLISH and
the waiters SSUBSCRIBE.

=over

=item FakeRedisson::sem_channel($name), permit_timeout_key($name), latch_channel($name)

C<redisson_sc:{name}> (both semaphores), C<{name}:timeout> (the PES zset),
C<redisson_countdownlatch__channel__{name}>.

=item FakeRedisson::NON_EXPIRABLE

922337203685477, the PES score of a permit without a lease.

=item FakeRedisson::new_permit_id(), permit_id_bytes($hex), permit_id_hex($bytes)

A fresh permit id as Redisson's ServiceManager.generateId makes it (16
random bytes, as 32 lowercase hex chars), and the conversions between the
hex form (the API's) and the raw 16 bytes (the zset member).

=cut

sub sem_channel        { prefix_name('redisson_sc', $_[0]) }
sub permit_timeout_key { suffix_name($_[0], 'timeout') }
sub latch_channel      { 'redisson_countdownlatch__channel__{' . $_[0] . '}' }

use constant NON_EXPIRABLE => '922337203685477';   # Long.MAX_VALUE / 10000
# CountDownLatchPubSub's messages
use constant ZERO_COUNT_MESSAGE => '0';
use constant NEW_COUNT_MESSAGE  => '1';

sub new_permit_id   { join '', map { sprintf '%02x', int(rand(256)) } 1 .. 16 }
sub permit_id_bytes { my ($hex) = @_; croak "bad permit id '$hex'" unless $hex =~ /^[0-9a-f]{32}$/i; return pack('H*', $hex); }
sub permit_id_hex   { return unpack('H*', $_[0]); }

=pod

=back

=head2 RSemaphore

=over

=item $java->try_set_permits($name, $permits [, $ttl_ms])

C<trySetPermits(permits)> / C<trySetPermits(permits, ttl)>: 1 = the key was
absent, it is set (with PX $ttl_ms if given) and C<$permits> published; 0 =
it exists, nothing done.

=item $java->add_permits($name, $delta)

C<addPermits(delta)>: SETs value + $delta (a missing key counts as 0; the
TTL is dropped; $delta may be negative) and publishes the new value.

=item $java->try_acquire($name [, $permits])

One C<tryAcquire(permits)> attempt ($permits defaults to 1): 1 = acquired
(the value decremented), 0 = not enough permits.  0 permits: 1 without a
round trip, as Java; negative: dies (Java's IllegalArgumentException).

=item $java->release($name [, $permits]), $java->release_if_exists($name [, $permits])

C<release(permits)>: INCRBY (creating the key; no maximum) and publishes
the new total; returns undef.  0 permits: nothing sent.
C<releaseIfExists(permits)> (4.0.0+): 0 if the key is absent (nothing
done), else as release and 1.

=item $java->drain_permits($name)

C<drainPermits()>: the permits taken (the key SET to 0, dropping its TTL),
0 if it is absent.  Publishes nothing.

=item $java->available_permits($name)

C<availablePermits()>: C<GET name>, 0 if absent.

=cut

sub try_set_permits
{
	my ($self, $name, $permits, $ttl) = @_;
	return $self->eval_script('sem_try_set_permits_ttl', [ $name, sem_channel($name) ],
		[ $permits, $self->{publish}, $ttl ]) if defined $ttl;
	return $self->eval_script('sem_try_set_permits', [ $name, sem_channel($name) ],
		[ $permits, $self->{publish} ]);
}

sub add_permits
{
	my ($self, $name, $delta) = @_;
	return $self->eval_script('sem_add_permits', [ $name, sem_channel($name) ],
		[ $delta, $self->{publish} ]);
}

sub try_acquire
{
	my ($self, $name, $permits) = @_;
	$permits //= 1;
	croak "Permits amount can't be negative" if $permits < 0;
	return 1 if $permits == 0;
	return $self->eval_script('sem_try_acquire', [$name], [$permits]);
}

sub release
{
	my ($self, $name, $permits) = @_;
	$permits //= 1;
	croak "Permits amount can't be negative" if $permits < 0;
	return undef if $permits == 0;
	return $self->eval_script('sem_release', [ $name, sem_channel($name) ],
		[ $permits, $self->{publish} ]);
}

sub release_if_exists
{
	my ($self, $name, $permits) = @_;
	$permits //= 1;
	croak "Permits amount can't be negative" if $permits < 0;
	return 0 if $permits == 0;
	return $self->eval_script('sem_release_if_exists', [ $name, sem_channel($name) ],
		[ $permits, $self->{publish} ]);
}

sub drain_permits
{
	my ($self, $name) = @_;
	return $self->eval_script('sem_drain_permits', [$name], []);
}

sub available_permits
{
	my ($self, $name) = @_;
	return $self->cmd('GET', $name) // 0;
}

=pod

=item $java->semaphore_waiter($name [, $permits])

A wait as Java's C<acquire(permits)> / C<tryAcquire(permits, wait)>, as a
FakeRedisson::Waiter the test steps: one attempt; if refused, subscribe to
C<redisson_sc:{name}> and attempt again; each C<step> then waits for a
message whose payload is above 0 (SemaphorePubSub releases min(waiters,
payload) latch permits, so 0 or a negative total wakes nobody: recorded as
C<ignored>) or for the step's bound, and attempts again.  There is no TTL:
C<ttl> is -1 while refused.

=item $java->semaphore_acquire($name [, $permits [, $wait_s]])

The same, blocking for at most $wait_s seconds (default: the client's reply
timeout): 1 = acquired, 0 = the wait ran out (C<tryAcquire(permits, wait)>).

=cut

sub _wakes_on_permits { my ($p) = @_; return $p =~ /^-?\d+$/ && $p > 0; }

sub semaphore_waiter
{
	my ($self, $name, $permits) = @_;
	return FakeRedisson::Waiter->new($self, sem_channel($name),
		sub { $self->try_acquire($name, $permits) ? undef : -1 },
		wakes => \&_wakes_on_permits);
}

sub semaphore_acquire
{
	my ($self, $name, $permits, $wait) = @_;
	my $w = $self->semaphore_waiter($name, $permits);
	my $r = $w->wait($wait // $self->{conn}{timeout});
	$w->cancel;
	return $r;
}

=pod

=back

=head2 RPermitExpirableSemaphore

Permit ids are given and returned in their hex form (32 lowercase hex
characters, as Java's API); the scripts get the raw 16 bytes.  Every script
passes the client's clock (C<now_ms>) as Java passes System.currentTimeMillis.

=over

=item $java->permit_try_set_permits($name, $permits), $java->permit_set_permits($name, $permits), $java->permit_add_permits($name, $delta)

C<trySetPermits(p)>: 1 = the key was absent: set, C<p> published; else 0.
C<setPermits(p)>: sets the total (available + ids in the zset, expired ones
included: they are not reclaimed first) to p by INCRBY p - total and
publishes C<p>, or nothing if the total already is p; an absent key is SET
to p (C<p> published).  C<addPermits(d)>: SETs value + d (TTL dropped) and
publishes C<d> if d > 0.

=cut

sub permit_try_set_permits
{
	my ($self, $name, $permits) = @_;
	return $self->eval_script('permit_try_set_permits', [ $name, sem_channel($name) ],
		[ $permits, $self->{publish} ]);
}

sub permit_set_permits
{
	my ($self, $name, $permits) = @_;
	return $self->eval_script('permit_set_permits',
		[ $name, sem_channel($name), permit_timeout_key($name) ],
		[ $permits, $self->{publish} ]);
}

sub permit_add_permits
{
	my ($self, $name, $delta) = @_;
	return $self->eval_script('permit_add_permits', [ $name, sem_channel($name) ],
		[ $delta, $self->{publish} ]);
}

=pod

=item $java->try_acquire_permit($name [, $lease_ms]), $java->try_acquire_permits($name, $n [, $lease_ms])

One C<tryAcquire(...)> attempt (the script of every PES acquisition), with
fresh ids, the score now + $lease_ms (no $lease_ms or -1: no lease, the score
922337203685477) and now.  First at most $n expired permits are reclaimed
(their number added to the value, which is published if > 0).  Returns the
hex id (try_acquire_permits: an array ref of $n ids) = acquired; or the
script's hint: C<":<epoch ms>">, the nearest expiry of an acquired permit
(Java retries then), or undef (none expires: wait for a message).

=cut

sub try_acquire_permits
{
	my ($self, $name, $n, $lease) = @_;
	croak "Permits amount can't be negative" if $n < 0;
	my @ids = map { new_permit_id() } 1 .. $n;
	my $now = now_ms();
	my $score = (!defined $lease || $lease == -1) ? NON_EXPIRABLE : $now + $lease;
	my $r = $self->eval_script('permit_try_acquire',
		[ $name, permit_timeout_key($name), sem_channel($name) ],
		[ $n, $score, $now, NON_EXPIRABLE, $self->{publish}, map { permit_id_bytes($_) } @ids ]);
	return \@ids if defined $r && $r eq 'OK';
	return $r;
}

sub try_acquire_permit
{
	my ($self, $name, $lease) = @_;
	my $r = $self->try_acquire_permits($name, 1, $lease);
	return ref $r ? $r->[0] : $r;
}

=pod

=item $java->release_permit($name, $id), $java->release_permits($name, @ids)

C<tryRelease(id)>: 1 = released (the id removed, the value INCRBY 1, the new
value published); 0 = the id is not there (nothing done), or it had
expired (still removed, counted back and published: the permit returns to
the pool, but Java reports it as not released).  C<tryRelease(ids)>: 0 and
no change if any id is missing or expired; else reclaims every expired
permit, removes the ids and returns, adds and publishes their number.

=cut

sub release_permit
{
	my ($self, $name, $id) = @_;
	return $self->eval_script('permit_release',
		[ $name, sem_channel($name), permit_timeout_key($name) ],
		[ permit_id_bytes($id), 1, now_ms(), $self->{publish} ]);
}

sub release_permits
{
	my ($self, $name, @ids) = @_;
	croak "permitIds can't be null or empty" unless @ids;
	return $self->eval_script('permit_release_many',
		[ $name, sem_channel($name), permit_timeout_key($name) ],
		[ scalar(@ids), now_ms(), $self->{publish}, map { permit_id_bytes($_) } @ids ]);
}

=pod

=item $java->update_lease_time($name, $id, $lease_ms)

C<updateLeaseTime(id, lease, MILLISECONDS)>: reclaims every expired permit,
then 1 = the id is there: its score set to now + $lease_ms (-1: no lease);
0 = it is not (released, or expired and just reclaimed).

=item $java->permit_available($name), $java->permit_get_permits($name), $java->permit_acquired($name), $java->permit_lease_time($name, $id)

C<availablePermits()>, C<getPermits()> (available + acquired; 0 if the key
is absent), C<acquiredPermits()>, C<getLeaseTime(id)> (ms left, -1 = no
lease, 0 = no such id: Java throws): each reclaims every expired permit
first, publishing the new value if it is > 0.

=cut

sub update_lease_time
{
	my ($self, $name, $id, $lease) = @_;
	my $now = now_ms();
	return $self->eval_script('permit_update_lease',
		[ $name, permit_timeout_key($name), sem_channel($name) ],
		[ permit_id_bytes($id), $lease == -1 ? NON_EXPIRABLE : $now + $lease, $now,
		  $self->{publish} ]);
}

sub _permit_query
{
	my ($self, $script, $name) = @_;
	return $self->eval_script($script, [ $name, permit_timeout_key($name), sem_channel($name) ],
		[ now_ms(), $self->{publish} ]);
}

sub permit_available   { $_[0]->_permit_query('permit_available',   $_[1]) }
sub permit_get_permits { $_[0]->_permit_query('permit_get_permits', $_[1]) }
sub permit_acquired    { $_[0]->_permit_query('permit_acquired',    $_[1]) }

sub permit_lease_time
{
	my ($self, $name, $id) = @_;
	return $self->eval_script('permit_get_lease_time',
		[ $name, permit_timeout_key($name), sem_channel($name) ],
		[ permit_id_bytes($id), NON_EXPIRABLE, now_ms(), $self->{publish} ]);
}

=pod

=item $java->permit_state($name)

A snapshot in one EVAL (a helper, not a Redisson script, reclaiming
nothing):

  { value  => GET name (undef if absent),
    pttl   => PTTL name,
    zpttl  => PTTL {name}:timeout,
    members => { <hex id> => score, ... },   # every zset member
    raw_lengths => [ byte length of each member ] }

=cut

my $PERMIT_STATE_LUA = <<'LUA';
return { redis.call('get', KEYS[1]), redis.call('pttl', KEYS[1]), redis.call('pttl', KEYS[2]),
         redis.call('zrange', KEYS[2], 0, -1, 'WITHSCORES') };
LUA

sub permit_state
{
	my ($self, $name) = @_;
	my ($v, $pttl, $zpttl, $z) = @{ $self->cmd('EVAL', $PERMIT_STATE_LUA, 2, $name,
			permit_timeout_key($name)) };
	my %m;
	my @len;
	for (my $i = 0; $i < @$z; $i += 2)
	{
		$m{ permit_id_hex($z->[$i]) } = $z->[ $i + 1 ];
		push @len, length($z->[$i]);
	}
	return { value => $v, pttl => $pttl, zpttl => $zpttl, members => \%m, raw_lengths => \@len };
}

=pod

=item $java->permit_waiter($name [, $lease_ms [, $n]])

A wait as Java's C<acquire(...)> / C<tryAcquire(wait, lease, ...)>, stepped:
attempt, subscribe to C<redisson_sc:{name}>, attempt; each C<step> then
waits for a message above 0 (see semaphore_waiter) or, after a
C<":<epoch ms>"> hint, at most until that expiry (C<ttl> is then the ms
left from the client's clock, at least 0; -1 after a nil hint: only a
message), and attempts again.  Once acquired, C<< $w->value >> is the hex
id ($n given: an array ref of ids).

=item $java->permit_acquire($name [, $lease_ms [, $n [, $wait_s]]])

The same, blocking at most $wait_s seconds: the id(s), or undef.

=cut

sub permit_waiter
{
	my ($self, $name, $lease, $n) = @_;
	return FakeRedisson::Waiter->new($self, sem_channel($name), sub {
			my $r = $self->try_acquire_permits($name, $n // 1, $lease);
			return (undef, defined $n ? $r : $r->[0]) if ref $r;
			return -1 unless defined $r;
			my ($at) = $r =~ /^:(\d+)$/ or croak "unexpected PES reply '$r'";
			my $left = $at - now_ms();
			return $left > 0 ? $left : 0;
		}, wakes => \&_wakes_on_permits);
}

sub permit_acquire
{
	my ($self, $name, $lease, $n, $wait) = @_;
	my $w = $self->permit_waiter($name, $lease, $n);
	$w->wait($wait // $self->{conn}{timeout});
	$w->cancel;
	return $w->value;
}

=pod

=back

=head2 RCountDownLatch

=over

=item $java->try_set_count($name, $count)

C<trySetCount(count)>: 1 = the key was absent: SET to $count (no TTL) and
C<1> (NEW_COUNT) published; 0 = it exists, nothing done.

=item $java->count_down($name)

C<countDown()>: DECR; at 0 or below the key is deleted, and C<0>
(ZERO_COUNT) is published only when it reached exactly 0.  Returns undef.

=item $java->get_count($name)

C<getCount()>: C<GET name>, 0 if absent.

=item $java->latch_delete($name)

C<delete()>: 1 = deleted, C<1> (NEW_COUNT) published; 0 = there was none.

=cut

sub try_set_count
{
	my ($self, $name, $count) = @_;
	return $self->eval_script('latch_try_set_count', [ $name, latch_channel($name) ],
		[ NEW_COUNT_MESSAGE, $count, $self->{publish} ]);
}

sub count_down
{
	my ($self, $name) = @_;
	return $self->eval_script('latch_count_down', [ $name, latch_channel($name) ],
		[ ZERO_COUNT_MESSAGE, $self->{publish} ]);
}

sub get_count { my ($self, $name) = @_; return $self->cmd('GET', $name) // 0; }

sub latch_delete
{
	my ($self, $name) = @_;
	return $self->eval_script('latch_delete', [ $name, latch_channel($name) ],
		[ NEW_COUNT_MESSAGE, $self->{publish} ]);
}

=pod

=item $java->latch_awaiter($name)

A wait as Java's C<await()> / C<await(time)>, stepped: C<getCount()>; if
above 0, subscribe to C<redisson_countdownlatch__channel__{name}> and read
the count again; each C<step> then waits for a C<0> message (a C<1> closes
Java's latch and wakes nobody: recorded as C<ignored>) or for the step's
bound, and reads the count again.  "Acquired" means the count was 0; C<ttl>
is -1 while it is not, and C<value> the last count read.

=item $java->latch_await($name [, $wait_s])

The same, blocking at most $wait_s seconds: 1 = the count reached 0, else 0.

=back

=cut

sub latch_awaiter
{
	my ($self, $name) = @_;
	return FakeRedisson::Waiter->new($self, latch_channel($name), sub {
			my $c = $self->get_count($name);
			return ($c > 0 ? -1 : undef, $c);
		}, wakes => sub { $_[0] eq ZERO_COUNT_MESSAGE });
}

sub latch_await
{
	my ($self, $name, $wait) = @_;
	my $w = $self->latch_awaiter($name);
	my $r = $w->wait($wait // $self->{conn}{timeout});
	$w->cancel;
	return $r;
}

1;
