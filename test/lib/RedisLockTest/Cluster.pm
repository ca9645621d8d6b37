# RedisLockTest/Cluster.pm — RedisLockTest::Cluster, a Redis Cluster of
# RedisLockTest::Redis servers (create, slot ownership, migrations,
# failovers).  Loaded by test/lib/RedisLockTest.pm; its POD is below.

package RedisLockTest::Cluster;

use strict;
use warnings;

# for RedisLockTest::Redis, free_port, wait_until, $WAIT (the whole harness)
use RedisLockTest ();

=pod

=head1 RedisLockTest::Cluster

A Redis Cluster of RedisLockTest::Redis servers on 127.0.0.1, created with
C<redis-cli --cluster create>.  Every server has C<cluster-enabled yes>, its
nodes.conf in its own directory, and its cluster bus on a second free port
(C<cluster-port>: the default port + 10000 would be above 65535 for the
ports free_port hands out).  Servers are stopped and cleaned up like any
RedisLockTest::Redis when the object goes away.

Who serves what is never cached: it is read from C<CLUSTER NODES> of a
running server (the slot table C<CLUSTER SLOTS> prints too) each time, so the
answers stay right across migrations and failovers.  A server counts as
running unless this test stopped or killed it (RedisLockTest::Redis->pid).
Keys moved by a migration go through redis-cli, so their names must not
contain newlines.

  my $c    = RedisLockTest::Cluster->new(masters => 3, replicas => 1);
  my $slot = $c->slot_of('order:42');
  $c->cli_for_key('order:42', 'SET', 'order:42', 'x');
  my ($to) = grep { $_ != $c->owner_of_slot($slot) } $c->masters;
  $c->migrate_slot($slot, $to);
  my $new = $c->kill9_master($to);    # its replica, now serving $slot

=over

=item RedisLockTest::Cluster->new(%opt)

Starts masters * (1 + replicas) servers, creates the cluster and waits
(bounded, 60 s) until wait_stable holds; dies with the redis-cli output or
the servers' log tails otherwise.  Options:

  masters      => 3     at least 3 (redis-cli's minimum)
  replicas     => 0     replicas per master
  node_timeout => 1000  cluster-node-timeout, ms (failure detection)
  extra        => [...] more redis.conf lines for every server

Any other option goes to every RedisLockTest::Redis->new (appendonly,
requirepass, start_timeout, tls ...).  With requirepass, replicas authenticate to
their masters with it (masterauth) and migrations pass it to MIGRATE.
With tls, every server also has C<tls-cluster yes>: the cluster bus,
replication and MIGRATE run over TLS, and CLUSTER NODES / CLUSTER SLOTS and
MOVED / ASK redirects name the TLS ports (port of each server):

  my $c = RedisLockTest::Cluster->new(masters => 3, tls => RedisLockTest::TLS->new);
  my $java = FakeRedisson->new(port => ($c->masters)[0]->port, cluster => 1,
                               ($c->nodes)[0]->tls_opts);

=cut

use Carp qw(croak);
use List::Util qw(first);
use Time::HiRes qw(time);

my $SLOTS = 16384;

sub new
{
	my ($class, %opt) = @_;
	my $masters  = delete $opt{masters}      // 3;
	my $replicas = delete $opt{replicas}     // 0;
	my $timeout  = delete $opt{node_timeout} // 1000;
	my $extra    = delete $opt{extra}        // [];
	croak "RedisLockTest::Cluster: at least 3 masters" if $masters < 3;

	my $self = bless { nodes => [], by_port => {}, ids => {} }, $class;
	for (1 .. $masters * (1 + $replicas))
	{
		my $r = RedisLockTest::Redis->new(
			%opt,
			extra => [
				'cluster-enabled yes',
				'cluster-config-file nodes.conf',    # relative to the server's dir
				"cluster-node-timeout $timeout",
				'cluster-port ' . RedisLockTest::free_port(),
				(defined $opt{requirepass} ? ("masterauth $opt{requirepass}") : ()),
				($opt{tls} ? ('tls-cluster yes') : ()),
				@$extra,
			]);
		push @{ $self->{nodes} }, $r;
		$self->{by_port}{ $r->port } = $r;
		# Kept in nodes.conf, so stable across restarts of the server.
		$self->{ids}{ $r->port } = scalar $r->cli('CLUSTER', 'MYID');
	}

	my $first = $self->{nodes}[0];
	my $out = $first->cli('--cluster', 'create',
		(map { '127.0.0.1:' . $_->port } @{ $self->{nodes} }),
		'--cluster-replicas', $replicas, '--cluster-yes');
	croak "redis-cli --cluster create failed (status " . $first->last_cli_status . "):\n"
	  . $out . "\n" . $first->last_cli_stderr
	  if $first->last_cli_status != 0;
	$self->wait_stable(60)
	  or croak "RedisLockTest::Cluster: not ok within 60s:\n"
	  . join('', map { "--- port " . $_->port . "\n" . $_->log_tail(15) } @{ $self->{nodes} });
	return $self;
}

=pod

=item $c->nodes

All servers (RedisLockTest::Redis), masters and replicas, in creation order.

=item $c->seeds

"127.0.0.1:P1,127.0.0.1:P2,..." of all servers.

=item $c->node_id($r)

Cluster node id of server $r.

=item $c->masters

The masters now: master flag, not failing, process running; by port (their
number in scalar context).

=item $c->replicas_of($master)

The running, non-failing replicas of $master, by port (their number in
scalar context).

=cut

sub nodes   { @{ $_[0]{nodes} } }
sub seeds   { join(',', map { '127.0.0.1:' . $_->port } @{ $_[0]{nodes} }) }
sub node_id { my ($self, $r) = @_; return $self->{ids}{ $r->port }; }

sub masters
{
	my ($self) = @_;
	return _by_port(grep { $_->{flags}{master} && _healthy($_) } $self->_live_view);
}

# Subscribers of $chan over every master: (classic, sharded).
sub subscribers
{
	my ($self, $chan) = @_;
	my ($classic, $sharded) = (0, 0);
	for my $m ($self->masters)
	{
		$classic += ($m->cli('PUBSUB', 'NUMSUB', $chan))[1];
		$sharded += ($m->cli('PUBSUB', 'SHARDNUMSUB', $chan))[1];
	}
	return ($classic, $sharded);
}

sub replicas_of
{
	my ($self, $master) = @_;
	my $id = $self->node_id($master);
	return _by_port(
		grep { $_->{flags}{slave} && $_->{master_id} eq $id && _healthy($_) }
		  $self->_live_view);
}

=pod

=item $c->slot_of($key)

The hash slot of $key, computed here: CRC16 (XMODEM) mod 16384 of the hash
tag if there is one, else of the whole key.  The tag is what lies between
the first "{" and the first "}" after it, if that is not empty; an empty
"{}" means the whole key is hashed (a later tag is not looked for).
A string with Perl's utf8 flag on is hashed as its UTF-8 bytes, the bytes
redis-cli (exec) and FakeRedisson send for it.  Also callable as
RedisLockTest::Cluster->slot_of($key).

=cut

sub slot_of
{
	my (undef, $key) = @_;
	utf8::encode($key) if utf8::is_utf8($key);
	my $open = index($key, '{');
	if ($open >= 0)
	{
		my $close = index($key, '}', $open + 1);
		$key = substr($key, $open + 1, $close - $open - 1) if $close > $open + 1;
	}
	my $crc = 0;
	for my $byte (unpack('C*', $key))
	{
		$crc ^= $byte << 8;
		for (1 .. 8)
		{
			$crc = $crc & 0x8000 ? (($crc << 1) ^ 0x1021) & 0xFFFF : ($crc << 1) & 0xFFFF;
		}
	}
	return $crc % $SLOTS;
}

=pod

=item $c->owner_of_slot($slot)

The server serving $slot now (dies if no master has it).

=item $c->node_for_key($key)

owner_of_slot(slot_of($key)).

=item $c->cli_for_key($key, @args)

$r->cli(@args) on the master serving $key.

=cut

sub owner_of_slot
{
	my ($self, $slot) = @_;
	my $n = _owner_in($slot, $self->_live_view)
	  or croak "RedisLockTest::Cluster: slot $slot is not assigned";
	return $n->{redis};
}

sub node_for_key { my ($self, $key) = @_; return $self->owner_of_slot($self->slot_of($key)); }

sub cli_for_key
{
	my ($self, $key, @args) = @_;
	return $self->node_for_key($key)->cli(@args);
}

=pod

=item $c->wait_stable([$timeout_s])

Waits (bounded, default $RedisLockTest::WAIT) until every running server says
cluster_state:ok with all 16384 slots assigned and every server known
(cluster_known_nodes = all servers, failed ones included), all of them map
the slots to the same masters, and every running replica's link to its
master is up.  Returns 1/0 like wait_until.  For use after restarting
servers.

=cut

sub wait_stable
{
	my ($self, $timeout) = @_;
	return RedisLockTest::wait_until($timeout // $RedisLockTest::WAIT,
		'cluster ok and in agreement on every running node', sub { $self->_stable });
}

=pod

=item $c->migrate_slot($slot, $to)

Moves $slot from its master to master $to the documented way: begin_migration
then finish_migration.  Returns the former owner.

=item $c->begin_migration($slot, $to)

C<CLUSTER SETSLOT $slot IMPORTING> on $to, then C<MIGRATING> on the owner; no
key moves.  From here the owner answers ASK for keys of $slot it no longer
has.  Returns the owner.

=item $c->finish_migration($slot, $to)

Moves every key of $slot to $to (C<CLUSTER GETKEYSINSLOT> + C<MIGRATE ... KEYS>
until none is left), then C<CLUSTER SETSLOT $slot NODE> on $to, on the owner
and on every other master, and waits (bounded, $RedisLockTest::WAIT) until
every running server's slot table shows $to.  Returns the former owner.
Dies on any error.

=cut

sub migrate_slot
{
	my ($self, $slot, $to) = @_;
	$self->begin_migration($slot, $to);
	return $self->finish_migration($slot, $to);
}

sub begin_migration
{
	my ($self, $slot, $to) = @_;
	my $from = $self->_other_owner($slot, $to);
	# Target first, so that the ASK redirects the source starts to give land on
	# a node that already accepts ASKING for the slot.
	_ok($to,   'CLUSTER', 'SETSLOT', $slot, 'IMPORTING', $self->node_id($from));
	_ok($from, 'CLUSTER', 'SETSLOT', $slot, 'MIGRATING', $self->node_id($to));
	return $from;
}

sub finish_migration
{
	my ($self, $slot, $to) = @_;
	my $from     = $self->_other_owner($slot, $to);
	my @auth     = defined $to->password ? ('AUTH', $to->password) : ();
	my $deadline = time() + $RedisLockTest::WAIT;
	while (my @keys = $from->cli('CLUSTER', 'GETKEYSINSLOT', $slot, 100))
	{
		my $out = $from->cli('MIGRATE', '127.0.0.1', $to->port, '', 0, 5000, @auth, 'KEYS', @keys);
		# NOKEY: the keys expired or were deleted since GETKEYSINSLOT
		croak "MIGRATE (slot $slot to port " . $to->port . "): $out"
		  unless $out eq 'OK' || $out eq 'NOKEY';
		croak "finish_migration: slot $slot still has keys after ${RedisLockTest::WAIT}s"
		  if time() > $deadline;
	}
	# Target first: assigning itself the slot it imports bumps its config
	# epoch, so its claim also wins on the nodes only gossip tells (replicas).
	my $to_id = $self->node_id($to);
	_ok($_, 'CLUSTER', 'SETSLOT', $slot, 'NODE', $to_id)
	  for $to, $from, grep { $_ != $to && $_ != $from } $self->masters;
	RedisLockTest::wait_until($RedisLockTest::WAIT,
		"every running node has slot $slot on port " . $to->port, sub {
			for my $r ($self->_running)
			{
				my $n = _owner_in($slot, $self->_view($r));
				return 0 unless $n && $n->{redis} == $to;
			}
			return 1;
		}) or croak "finish_migration: slot $slot not on port " . $to->port . " everywhere";
	return $from;
}

=pod

=item $c->failover($replica [, 'FORCE' | 'TAKEOVER'])

C<CLUSTER FAILOVER> on $replica, then waits (bounded, $RedisLockTest::WAIT)
until every running server sees it as the master of its former master's
slots and wait_stable's conditions hold.  Returns $replica, the new master.

=item $c->kill9_master($master)

kill9 on $master (which must serve slots and have a running replica), then
waits (bounded, $RedisLockTest::WAIT) until one of its replicas is promoted
as failover describes.  Returns that replica.  Restarted, the old master
rejoins as a replica of the new one.

=cut

sub failover
{
	my ($self, $replica, $how) = @_;
	my ($me) = grep { $_->{flags}{myself} } $self->_view($replica);
	croak "failover: port " . $replica->port . " is not a replica"
	  unless $me && $me->{flags}{slave};
	_ok($replica, 'CLUSTER', 'FAILOVER', (defined $how ? $how : ()));
	RedisLockTest::wait_until($RedisLockTest::WAIT,
		"port " . $replica->port . " promoted, cluster ok",
		sub { $self->_serves_everywhere($replica) && $self->_stable })
	  or croak "failover: port " . $replica->port . " not promoted";
	return $replica;
}

sub kill9_master
{
	my ($self, $master) = @_;
	my @replicas = $self->replicas_of($master)
	  or croak "kill9_master: port " . $master->port . " has no running replica";
	$master->kill9;
	my $new;
	RedisLockTest::wait_until($RedisLockTest::WAIT,
		"a replica of port " . $master->port . " promoted, cluster ok", sub {
			$new = first { $self->_serves_everywhere($_) } @replicas;
			return $new && $self->_stable;
		}) or croak "kill9_master: no replica of port " . $master->port . " took over";
	return $new;
}

# Servers this test has not stopped or killed.
sub _running { grep { defined $_->pid } @{ $_[0]{nodes} } }

# The servers of view entries, by port; a count in scalar context.
sub _by_port
{
	my @r = sort { $a->port <=> $b->port } map { $_->{redis} } @_;
	return @r;
}

sub _healthy
{
	my ($n) = @_;
	return !$n->{flags}{fail} && !$n->{flags}{'fail?'} && defined $n->{redis}->pid;
}

# CLUSTER NODES as server $r sees it: one hash per node with id, redis (our
# object), flags (hash), master_id and slots ([first, last] ranges it serves).
sub _view
{
	my ($self, $r) = @_;
	my @view;
	for my $line ($r->cli('CLUSTER', 'NODES'))
	{
		my ($id, $addr, $flags, $master_id, undef, undef, undef, undef, @slots) =
		  split ' ', $line;
		my ($port) = ($addr // '') =~ /:(\d+)@/
		  or croak "CLUSTER NODES on port " . $r->port . ": unexpected line '$line'";
		push @view, {
			id        => $id,
			redis     => $self->{by_port}{$port},
			flags     => { map { $_ => 1 } split /,/, $flags },
			master_id => $master_id,
			# "[slot->-id]" / "[slot-<-id]" entries mark a migration, not ownership
			slots => [ map { /^(\d+)(?:-(\d+))?$/ ? [ $1, $2 // $1 ] : () } @slots ],
		};
	}
	return @view;
}

# The view of the first running server that answers.
sub _live_view
{
	my ($self) = @_;
	for my $r ($self->_running)
	{
		my @view = eval { $self->_view($r) };
		return @view if @view;
	}
	croak "RedisLockTest::Cluster: no running server answers CLUSTER NODES";
}

sub _owner_in
{
	my ($slot, @view) = @_;
	for my $n (@view)
	{
		return $n if first { $slot >= $_->[0] && $slot <= $_->[1] } @{ $n->{slots} };
	}
	return undef;
}

sub _other_owner
{
	my ($self, $slot, $to) = @_;
	my $from = $self->owner_of_slot($slot);
	croak "RedisLockTest::Cluster: slot $slot is already on port " . $to->port if $from == $to;
	return $from;
}

# Every running server sees $r as a master serving slots.
sub _serves_everywhere
{
	my ($self, $r) = @_;
	for my $s ($self->_running)
	{
		my $n = first { $_->{redis} == $r } $self->_view($s);
		return 0 unless $n && $n->{flags}{master} && @{ $n->{slots} };
	}
	return 1;
}

sub _stable
{
	my ($self) = @_;
	my $total = @{ $self->{nodes} };
	my $agreed;
	for my $r ($self->_running)
	{
		my %info = map { /^(\w+):(.*?)\r?$/ ? ($1, $2) : () } $r->cli('CLUSTER', 'INFO');
		return 0
		  unless ($info{cluster_state} // '') eq 'ok'
		  && ($info{cluster_slots_assigned} // 0) == $SLOTS
		  && ($info{cluster_known_nodes} // 0) == $total;
		my @view = $self->_view($r);
		my $map = join(' ', sort map {
			my $n = $_;
			map { "$_->[0]-$_->[1]=$n->{id}" } @{ $n->{slots} }
		} @view);
		$agreed //= $map;
		return 0 unless $map eq $agreed;
		my ($me) = grep { $_->{flags}{myself} } @view;
		return 0
		  if $me->{flags}{slave}
		  && scalar($r->cli('INFO', 'replication')) !~ /^master_link_status:up\r?$/m;
	}
	return 1;
}

sub _ok
{
	my ($r, @cmd) = @_;
	my $out = $r->cli(@cmd);
	croak "@cmd on port " . $r->port . ": $out" unless $out eq 'OK';
}

=pod

=back

=cut

1;
