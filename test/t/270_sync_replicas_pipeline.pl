# 270_sync_replicas_pipeline.pl — with redislock.sync_replicas, the WAIT that
# confirms an acquisition always follows that acquisition's write on the same
# connection (issue 9, item 3). A proxy we control between PostgreSQL and
# Redis cuts the connection at the WAIT: it forwards what comes before it
# (the acquisition) and closes the client's side, so the session reconnects
# and retries, deterministically between the write and the WAIT.
#  * Failover: at the cut the proxy sends new connections to another master
#    (with an in-sync replica of its own) that never saw the write, as after
#    a failover that lost it. Sent on its own, the retried WAIT ran there on
#    a fresh connection and returned the replica count at once: the lock was
#    reported confirmed though the master now serving it did not have it.
#    Sent in one pipeline with the acquisition, the retry takes the lock on
#    the new master and the WAIT confirms that write.
#  * Same master, replica stopped (SIGSTOP): the retried pipeline cannot be
#    confirmed: 55000, and the hold is given back.
#  * Cluster: the WAIT goes with the acquisition to the node that serves the
#    key, also when a MOVED (the slot migrated) sends both to another master;
#    that master's replica has the hold when the call returns.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use IO::Select;
use IO::Socket::INET;
use POSIX ();
use Test::More;

my $master  = RedisLockTest::Redis->new;
my $replica = RedisLockTest::Redis->new(extra => [ 'replicaof 127.0.0.1 ' . $master->port ]);
my $other   = RedisLockTest::Redis->new;
my $other_replica = RedisLockTest::Redis->new(extra => [ 'replicaof 127.0.0.1 ' . $other->port ]);

sub info_field
{
	my ($r, $field) = @_;
	my $info = join("\n", $r->cli('INFO', 'replication'));
	return $info =~ /^\Q$field\E:(\S+)/m ? $1 : '';
}
until_ok('the replicas are connected and in sync', sub {
	info_field($master, 'connected_slaves') eq '1'
	  && info_field($replica, 'master_link_status') eq 'up'
	  && info_field($other, 'connected_slaves') eq '1'
	  && info_field($other_replica, 'master_link_status') eq 'up';
});

# The proxy: forwards both ways; while the file $arm exists, the first
# client request stream that contains a WAIT is forwarded up to it, the file
# is removed and the client's side is closed (the server's side is kept
# until the server has answered what was forwarded, then closed too). A port
# written in $arm is where new connections go from then on.
my $arm = "$PostgreSQL::Test::Utils::tmp_check/cut_at_wait";
my $listen = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0,
	Listen => 16, ReuseAddr => 1) or die "listen: $!";
my $proxy_port = $listen->sockport;
my $proxy_pid = fork() // die "fork: $!";
if ($proxy_pid == 0)
{
	# The proxy: no TAP and no END blocks of its own.  Cluster.pm's TERM
	# handler dies, and on a die PostgreSQL 19's PostgreSQL::Test::Utils
	# ends the plan (done_testing) and the END blocks stop the nodes: the
	# parent's TERM must end the child at once instead.
	$SIG{TERM} = sub { POSIX::_exit(0) };
	my $sel = IO::Select->new($listen);
	my %peer;      # fileno => socket on the other side, undef once cut
	my %server;    # fileno of server-side sockets
	my $upstream = $master->port;
	while (1)
	{
		for my $h ($sel->can_read)
		{
			if ($h == $listen)
			{
				my $c = $listen->accept or next;
				my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
					PeerPort => $upstream) or do { close $c; next };
				$peer{ fileno $c } = $s;
				$peer{ fileno $s } = $c;
				$server{ fileno $s } = 1;
				$sel->add($c, $s);
				next;
			}
			my $fd = fileno $h;
			my $n = sysread($h, my $buf, 65536);
			my $other = $peer{$fd};
			if (!$n)
			{
				$sel->remove($h);
				close $h;
				if ($other) { $sel->remove($other); close $other; }
				next;
			}
			if (!$other)    # the server answering a cut connection
			{
				$sel->remove($h);
				close $h;
				next;
			}
			my $at = index($buf, "\r\nWAIT\r\n");
			if (!$server{$fd} && -e $arm && $at >= 0)
			{
				my $start = rindex($buf, '*', $at);
				syswrite($other, substr($buf, 0, $start)) if $start > 0;
				if (open(my $af, '<', $arm))
				{
					my $port = <$af> // '';
					chomp $port;
					$upstream = $port if $port ne '';
				}
				unlink $arm;
				$sel->remove($h);
				close $h;
				delete $peer{ fileno $other };
				$peer{ fileno $other } = undef;
				if ($start <= 0) { $sel->remove($other); close $other; }
				next;
			}
			syswrite($other, $buf);
		}
	}
	POSIX::_exit(0);
}
close $listen;

my $node = RedisLockTest::node('syncpipe', undef,
	'redislock.url' => "redis://127.0.0.1:$proxy_port");
my $s = RedisLockTest::Session->new($node);
my $id = $s->query('SELECT redis_lock_owner_id()');
$s->query("SET redislock.command_timeout = '2s'");
$s->query('SET redislock.sync_replicas = 1');
is($s->query("SELECT redis_lock_acquire('warm', '0', '10 min')"), 't',
	'through the proxy, confirmed by the replica (the connection is now open)');
is($replica->cli('HGET', 'warm', $id), '1', 'the replica has it');

# --- the replica cannot confirm; the connection is cut at the WAIT ---------
$replica->pause;
sub arm
{
	my ($port) = @_;
	open(my $fh, '>', $arm) or die "$arm: $!";
	print $fh "$port\n" if defined $port;
	close $fh;
}

arm();
my ($v, $err, $st) = $s->try("SELECT redis_lock_acquire('cut', '0', '10 min')");
ok(!-e $arm, 'the proxy cut the connection at the WAIT');
is($st, '55000', 'with the replica stopped the lock is NOT reported as confirmed (55000)')
  or diag("got " . ($v // 'NULL') . ' ' . ($err // ''));
like($err // '', qr/was not confirmed by 1 replicas/, '... not confirmed by 1 replica');
is($master->cli('EXISTS', 'cut'), 0, '... and it was given back on the master');
is($s->query("SELECT count(*) FROM redis_locks WHERE name = 'cut'"), 0, '... and is not in redis_locks');
$replica->resume;
until_ok('the replica is back in sync', sub {
	$replica->cli('EXISTS', 'cut') eq '0' && $replica->cli('HGET', 'warm', $id) eq '1';
});

# --- a failover between the write and the WAIT ------------------------------
arm($other->port);
($v, $err) = $s->try("SELECT redis_lock_acquire('moved', '0', '10 min')");
ok(!-e $arm, 'the proxy cut the connection at the WAIT and now leads to the other master');
is($master->cli('HGET', 'moved', $id), '1', 'the first master had taken the write');
is($v, 't', 'acquired') or diag($err);
is($other->cli('HGET', 'moved', $id), '1',
	'confirmed means: the master that serves the lock now holds it')
  or diag('the lock was reported confirmed by a WAIT that followed no write');
until_ok("and so does that master's replica", sub { $other_replica->cli('HGET', 'moved', $id) eq '1' }, 20);
is($s->query("SELECT redis_lock_release('moved')"), 't', 'release');
is($other->cli('EXISTS', 'moved'), 0, 'released on the new master');

$s->close;
no_crash_ok($node, 'sync_replicas pipeline');
$node->stop('fast');
kill 'TERM', $proxy_pid;
waitpid($proxy_pid, 0);

# --- cluster: the WAIT follows the acquisition through a MOVED ----------------
my $cl = RedisLockTest::Cluster->new(masters => 3, replicas => 1);
my $cnode = RedisLockTest::node('syncpipe_cluster', undef,
	'redislock.cluster_nodes' => $cl->seeds);
my $c = RedisLockTest::Session->new($cnode);
my $cid = $c->query('SELECT redis_lock_owner_id()');
$c->query('SET redislock.sync_replicas = 1');
is($c->query("SELECT redis_lock_acquire('cl:warm', '0', '10 min')"), 't',
	'cluster: acquired and confirmed (the session has the slot map now)');
my $slot = $cl->slot_of('cl:moved');
my $from = $cl->owner_of_slot($slot);
my ($to) = grep { $_->port != $from->port } $cl->masters;
$cl->migrate_slot($slot, $to);
($v, $err) = $c->try("SELECT redis_lock_acquire('cl:moved', '0', '10 min')");
is($v, 't', 'after its slot moved: acquired through the MOVED and confirmed') or diag($err);
is($to->cli('HGET', 'cl:moved', $cid), '1', '... on the new owner');
my ($to_replica) = $cl->replicas_of($to);
my $ro = FakeRedisson::conn_to($to_replica->port);
$ro->cmd('READONLY');
is($ro->cmd('HGET', 'cl:moved', $cid), '1',
	"... and the new owner's replica had it when the call returned (the WAIT ran there)");
is($c->query('SELECT redis_lock_release_all()'), 2, 'release all');
$c->close;
no_crash_ok($cnode, 'sync_replicas pipeline on a cluster');
$cnode->stop('fast');
done_testing();
