# Redis Cluster: nodes that come back at new addresses, over and over (pods
# restarting with new IPs), must not exhaust what a backend remembers of the
# cluster.  A one-node cluster announces a new loopback address each round
# (cluster-announce-ip 127.0.0.N, and listens only there and on 127.0.0.1,
# the seed); the backend's connections are killed, so it must reload the
# slot map and follow the node to its new address.  After 150 addresses,
# acquisitions still work, and the watchdog (another process, whose
# connections are killed too) still renews a lock held all along.
# The listener (its subscriber connection killed too) follows the node as
# well: in each of the first 80 rounds a session waits for a
# lock, and the only subscriber on the node is the listener (not the
# waiter falling back to a subscription of its own: the listener's table
# of node links, 64 entries, used to keep every address the node left, and
# was full after 64 rounds); at the end the listener has one connection.
use strict;
use warnings;
use Test::More;
use RedisLockTest;

my $ROUNDS = 150;
my $LISTENER_ROUNDS = 80;    # more than the listener's 64 links

my $r = RedisLockTest::Redis->new(extra => [
	'cluster-enabled yes',
	'cluster-config-file nodes.conf',
	'cluster-port ' . RedisLockTest::free_port(),
]);
$r->cli('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
until_ok('the one-node cluster is up', sub { $r->cli('CLUSTER', 'INFO') =~ /cluster_state:ok/ });

# Valkey (8.1 at least) keeps announcing the node's first address to clients
# after cluster-announce-ip changes; what it shows clients is
# cluster-announce-client-ipv4 (Valkey 8.0 and later), set along.
my $valkey = $r->cli('INFO', 'server') =~ /^server_name:valkey/m;

# The node moves to 127.0.0.$n; the seed address 127.0.0.1 stays.
sub move_to
{
	my ($n) = @_;
	my $ip = "127.0.0.$n";
	$r->cli('CONFIG', 'SET', 'cluster-announce-ip', $ip);
	$r->cli('CONFIG', 'SET', 'cluster-announce-client-ipv4', $ip) if $valkey;
	$r->cli('CONFIG', 'SET', 'bind', "127.0.0.1 $ip");
	return RedisLockTest::wait_until(10, "the node announces $ip",
		sub { scalar($r->cli('CLUSTER', 'SLOTS')) =~ /^\Q$ip\E$/m });
}
ok(move_to(2), 'the node announces 127.0.0.2');

my $node = RedisLockTest::node('cluster_churn', undef,
	'redislock.cluster_nodes' => '127.0.0.1:' . $r->port,
	'redislock.watchdog_timeout' => '3s');
my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $owner_a = $a->query('SELECT redis_lock_owner_id()');
my $w = RedisLockTest::Session->new($node);
my $obs = RedisLockTest::observer($node);
my $lpid;
until_ok('the listener runs', sub {
	$lpid = $obs->query("SELECT pid FROM pg_stat_activity WHERE backend_type = 'redislock listener'");
	defined $lpid });

# The processes subscribed on the node (CLIENT LIST: sub or ssub > 0), by
# the local port of their connection (ss).
sub subscriber_pids
{
	my @pids;
	for my $line (split /\n/, scalar $r->cli('CLIENT', 'LIST'))
	{
		next unless $line =~ /\bs?sub=[1-9]/;
		my ($port) = $line =~ /\baddr=[\d.]+:(\d+)/ or next;
		# the client's end of a connection to the node: another socket of
		# the machine may have the same local port number
		my $ss = `ss -tnpH state established '( sport = :$port and dport = :@{[ $r->port ]} )'`;
		push @pids, $ss =~ /pid=(\d+)/ ? $1 : "port $port";
	}
	return join(',', sort @pids);
}

# The listener's connections to the node.
sub listener_connections
{
	my $port = $r->port;
	my @ss = grep { /pid=$lpid,/ } split /\n/, `ss -tnpH state established '( dport = :$port )'`;
	return scalar @ss;
}

# One wait for cc:wt while B holds it; '' when the listener alone heard it,
# else what went wrong.
sub listener_wait
{
	my $v = $b->try("SELECT redis_lock_acquire('cc:wt', '0', '1 min')");
	return 'B could not take cc:wt' unless defined $v && $v eq 't';
	$w->start("SELECT redis_lock_acquire('cc:wt', '1 min')");
	my $subs = '';
	RedisLockTest::wait_until($RedisLockTest::WAIT, 'a subscriber for cc:wt',
		sub { ($subs = subscriber_pids()) ne '' });
	$b->try("SELECT redis_lock_release('cc:wt')");
	my ($got, $e) = $w->finish($RedisLockTest::WAIT);
	$w->try("SELECT redis_lock_release('cc:wt')");
	return "the waiter got " . ($got // "an error: " . ($e // '')) unless defined $got && $got eq 't';
	return $subs eq $lpid ? '' : "subscribed: '$subs', the listener is $lpid";
}

is($a->query("SELECT redis_lock_acquire('cc:w')"), 't', 'A holds cc:w (watchdog)');
is($b->query("SELECT redis_lock_acquire('cc:k', '0', '1 min') AND redis_lock_release('cc:k')"), 't',
	'B acquires and releases cc:k');

my ($done, $err) = (0, undef);
my ($served, $lerr) = (0, undef);
for my $n (3 .. $ROUNDS + 2)
{
	my $ip = "127.0.0.$n";
	move_to($n) or do { $err = "the node did not announce $ip"; last };
	$r->cli('CLIENT', 'KILL', 'TYPE', 'normal');
	$r->cli('CLIENT', 'KILL', 'TYPE', 'pubsub');
	if ($n < $LISTENER_ROUNDS + 3)
	{
		my $problem = listener_wait();
		if ($problem eq '') { $served++ } else { $lerr //= "first failure at $ip: $problem" }
	}
	my ($v, $e) = $b->try(
		"SELECT redis_lock_acquire('cc:k', '0', '1 min') AND redis_lock_release('cc:k')");
	if (defined $v && $v eq 't')
	{
		$done++;
	}
	else
	{
		$err //= "first failure at $ip: " . ($e // "returned " . ($v // 'NULL'));
	}
}
is($done, $ROUNDS, "acquire and release work at each of $ROUNDS new addresses") or diag($err);
is($served, $LISTENER_ROUNDS, "the listener alone serves a waiter at each of the first $LISTENER_ROUNDS addresses")
  or diag($lerr);
is(listener_wait(), '', '... and still does after them');
ok(listener_connections() <= 1, 'the listener has at most one connection to the node')
  or diag(listener_connections() . ' connections');

my $r0 = lock_stats($a)->{renewals};
until_ok('the watchdog still renews cc:w', sub { lock_stats($a)->{renewals} >= $r0 + 2 });
is($a->query("SELECT state FROM redis_locks WHERE name = 'cc:w'"), 'held', 'cc:w is still held');
is($r->cli('HEXISTS', 'cc:w', $owner_a), 1, '... in Redis');
is($a->query("SELECT redis_lock_release('cc:w')"), 't', 'A releases cc:w');

no_crash_ok($node, 'cluster node churn');

done_testing();
