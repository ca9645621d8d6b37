# 379_lease_truth.pl — when Redis is silent, the lease is the truth.  A hold
# whose last confirmed renewal plus its lease (less the drift margin) has
# passed is lost whether or not Redis answers: its row leaves 'held', its
# fencing token is NULL, the watchdog's WARNING and redislock.on_lock_lost
# act, and a re-entry goes to Redis.  Before, a hold outlived its lease for
# as long as Redis was unreachable: Redis killed past the lease, two of
# three Redlock masters killed and restarted empty, or a server stopped
# (SIGSTOP) left the row 'held' with its token, and another session could
# take the lock while it did.
#
# Every primitive that has a lease (the table %K), on a single server that
# is killed, one that is stopped, and a Redlock of 3 masters of which two
# are killed and restarted empty (exclusive locks only: the others are not
# served by Redlock).  Each loss must show while Redis is still silent.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use Test::More;

my %K = (
	lock      => { take => "SELECT redis_lock_acquire('%s')", token => 1 },
	fair      => { take => "SELECT redis_lock_acquire('%s', NULL, NULL, true)", token => 1 },
	xact      => { take => "SELECT redis_xact_lock_acquire('%s')", xact => 1, token => 1 },
	read      => { take => "SELECT redis_read_lock_acquire('%s')" },
	write     => { take => "SELECT redis_write_lock_acquire('%s')", token => 1 },
	multi     => { take => "SELECT redis_lock_acquire_all(ARRAY['%s', '%s:2'])", token => 1 },
	semaphore => { take => "SELECT redis_semaphore_acquire('%s')", pool => 'semaphore' },
	permit    => { take => "SELECT redis_permit_acquire('%s')", pool => 'permit' },
);

sub state_of
{
	my ($obs, $s, $name) = @_;
	return $obs->query("SELECT coalesce(string_agg(DISTINCT state, ','), '') FROM redis_locks
		WHERE pid = " . $s->pid . " AND name = '$name'");
}

# Takes every kind in a session of its own (and one more, with
# on_lock_lost = terminate), makes Redis silent with $silence, and checks
# each loss while it is; $speak brings Redis back.
sub silent_case
{
	my ($label, $node, $kinds, $silence, $speak, $after) = @_;
	my $obs = RedisLockTest::observer($node);
	my (%a, %name);
	for my $k (@$kinds)
	{
		my $c = $K{$k};
		$name{$k} = "$label:$k";
		$obs->query("SELECT redis_$c->{pool}_try_set_permits('$name{$k}', 1)") if $c->{pool};
		$a{$k} = RedisLockTest::Session->new($node);
		$a{$k}->query('BEGIN') if $c->{xact};
		my $got = $a{$k}->query(sqlf($c->{take}, $name{$k}));
		ok(defined $got && $got ne 'f', "$label, $k: A takes it");
	}
	my $t = RedisLockTest::Session->new($node);
	$t->query('SET redislock.on_lock_lost = terminate');
	is($t->query("SELECT redis_lock_acquire('$label:term')"), 't', "$label: T (on_lock_lost = terminate) takes a lock");
	my $tpid = $t->pid;
	my $log0 = length slurp($node->logfile);

	$silence->();
	for my $k (@$kinds)
	{
		until_ok("$label, $k: A's row shows the loss while Redis is silent",
			sub { state_of($obs, $a{$k}, $name{$k}) eq 'lost' });
		is($a{$k}->query("SELECT redis_lock_fencing_token('$name{$k}')"), undef,
			"$label, $k: A's fencing token is NULL") if $K{$k}{token};
	}
	until_ok("$label: T is ended while Redis is silent",
		sub { $obs->query("SELECT count(*) FROM pg_stat_activity WHERE pid = $tpid") eq '0' });
	until_ok("$label: the watchdog said the lease ran out, while Redis is silent",
		sub { substr(slurp($node->logfile), $log0) =~ /was lost\n[^\n]*DETAIL:  Its lease of \d+ ms ran out before Redis confirmed a renewal/ });
	$speak->();
	$after->(\%a, \%name) if $after;
	for my $k (@$kinds)
	{
		$a{$k}->try($K{$k}{xact} ? 'ROLLBACK' : 'SELECT redis_lock_release_all()');
		$a{$k}->close;
	}
	$t->close;
}

# --- a single server, killed past the lease, then restarted ---------------------------
{
	my $redis = RedisLockTest::Redis->new;
	my $node  = RedisLockTest::node('leasetruth', $redis,
		'redislock.watchdog_timeout' => '3s',
		'redislock.command_timeout'  => '2s');
	my $b = RedisLockTest::Session->new($node);
	silent_case('killed', $node, [ sort keys %K ],
		sub { $redis->kill9 }, sub { $redis->restart_empty },
		sub {
			my ($a, $name) = @_;
			for my $k (qw(lock write))
			{
				my $want = $k eq 'lock' ? "SELECT redis_lock_acquire('%s', '0')" : "SELECT redis_write_lock_acquire('%s', '0')";
				my $v;
				RedisLockTest::wait_until($RedisLockTest::WAIT, "killed, $k: B reaches Redis",
					sub { ($v) = $b->try(sqlf($want, $name->{$k})); defined $v });
				is($v, 't', "killed, $k: B takes it on the restarted server");
				is($a->{$k}->try(sqlf($want, $name->{$k})), 'f', "killed, $k: A's re-entry goes to Redis and is refused");
				is(RedisLockTest::observer($node)->query("SELECT count(*) FROM redis_locks WHERE name = '$name->{$k}' AND state = 'held'"),
					'1', "killed, $k: one held row, B's");
				$b->query('SELECT redis_lock_release_all()');
			}
		});

	# --- the same server stopped (SIGSTOP): a renewal in flight does not hold the loss up
	silent_case('stopped', $node, [qw(lock read semaphore permit)],
		sub { $redis->pause }, sub { $redis->resume });
	no_crash_ok($node, 'single server');
	$node->stop;
}

# --- Redlock over 3 masters, two killed and restarted empty -------------------------------
{
	my $rl   = RedisLockTest::Redlock->new(n => 3);
	my $node = RedisLockTest::node('leasetruthrl', undef,
		'redislock.redlock_nodes'    => $rl->list,
		'redislock.watchdog_timeout' => '3s',
		'redislock.command_timeout'  => '2s');
	my $b = RedisLockTest::Session->new($node);
	silent_case('redlock', $node, [qw(lock xact)],
		sub { $rl->kill9(0); $rl->kill9(1) },
		sub { $rl->restart_empty(0); $rl->restart_empty(1) },
		sub {
			my ($a, $name) = @_;
			my $v;
			RedisLockTest::wait_until($RedisLockTest::WAIT, 'redlock: B reaches a majority',
				sub { ($v) = $b->try("SELECT redis_lock_acquire('$name->{lock}', '0')"); defined $v && $v eq 't' });
			is($v, 't', 'redlock: B takes it on the restarted majority');
			is(RedisLockTest::observer($node)->query("SELECT count(*) FROM redis_locks WHERE name = '$name->{lock}' AND state = 'held'"),
				'1', 'redlock: one held row, B\'s');
			isnt($b->query("SELECT redis_lock_fencing_token('$name->{lock}')"), undef, "redlock: B has a token");
			is($a->{lock}->try("SELECT redis_lock_acquire('$name->{lock}', '0')"), 'f',
				"redlock: A's re-entry goes to Redis and is refused");
			$b->query('SELECT redis_lock_release_all()');
		});
	no_crash_ok($node, 'redlock');
	$node->stop;
}

# --- a Cluster of 3 masters, one stopped past the lease ----------------------------------
# The hold on the stopped master is lost by time; the holds on the others
# stay held (the cluster serves their slots without full coverage): their
# renewals were answered, though the batch as a whole failed on the stopped
# node.
{
	my $cl   = RedisLockTest::Cluster->new(masters => 3, replicas => 0);
	my $node = RedisLockTest::node('leasetruthcl', undef,
		'redislock.cluster_nodes'    => $cl->seeds,
		'redislock.watchdog_timeout' => '3s',
		'redislock.command_timeout'  => '2s');
	my $obs = RedisLockTest::observer($node);
	my @masters = $cl->masters;
	my (%on, @names);
	for (my $i = 0; keys %on < 3 && $i < 1000; $i++)
	{
		my $n = "cl:$i";
		my $port = $cl->node_for_key($n)->port;
		next if $on{$port};
		$on{$port} = $n;
	}
	is(scalar keys %on, 3, 'cluster: a name on each master');
	my $a = RedisLockTest::Session->new($node);
	for my $port (sort keys %on)
	{
		is($a->query("SELECT redis_lock_acquire('$on{$port}')"), 't', "cluster: A takes $on{$port}");
	}
	my $r1 = lock_stats($obs)->{renewals};
	until_ok('cluster: the watchdog has renewed them on every master',
		sub { lock_stats($obs)->{renewals} >= $r1 + 3 });
	# the other masters go on serving their slots while one is down
	$_->cli('CONFIG', 'SET', 'cluster-require-full-coverage', 'no') for @masters;
	my $stop = $masters[0];
	my $lost = $on{ $stop->port };
	$stop->pause;
	until_ok("cluster: $lost, on the stopped master, is lost by time",
		sub { state_of($obs, $a, $lost) eq 'lost' });
	my $r0 = lock_stats($obs)->{renewals};
	until_ok('cluster: two more renewals while the master is stopped',
		sub { lock_stats($obs)->{renewals} >= $r0 + 4 });
	for my $port (grep { $_ != $stop->port } sort keys %on)
	{
		is(state_of($obs, $a, $on{$port}), 'held', "cluster: $on{$port}, on a master that answers, is held");
	}
	$stop->resume;
	$a->query('SELECT redis_lock_release_all()');
	no_crash_ok($node, 'cluster');
	$node->stop;
}

done_testing();
