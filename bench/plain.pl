# Workload: the plain layout's lock rate next to the Redisson layout's and
# next to the real plain-layout clients', on one Redis, in one run.
#
# Uncontended lock + unlock pairs, each client on a lock name of its own, all
# with a fixed 30 s lease (so every side does the same: one acquisition, one
# compare-and-delete; no watchdog), at 1 and 4 clients
# (REDISLOCK_BENCH_PLAIN_CLIENTS), REDISLOCK_BENCH_SECONDS each, the four
# sides one after the other for REDISLOCK_BENCH_ROUNDS rounds (default 3; the
# medians are reported, so that load from elsewhere on a shared machine
# weighs on all alike):
#   SQL plain     pgbench -M prepared, N clients, one transaction =
#                 SELECT redis_lock_acquire(name, '0', '30 s', layout => 'plain');
#                 SELECT redis_lock_release(name);
#   SQL redisson  the same with layout => 'redisson' (a Redisson lock hash)
#   redis-py      bench/plain-peers/redispy_pairs.py: N threads of one client,
#                 Lock(name, timeout=30).acquire(blocking=False) + release(),
#                 with test/peers' redis-py build (its pinned version)
#   redsync       bench/plain-peers/redsync: N goroutines of one client,
#                 Mutex(WithExpiry(30 s), WithTries(1)).Lock() + Unlock()
#                 (the pins of test/peers/redsync), built by bench/run.sh
#                 into REDISLOCK_BENCH_REDSYNC_PAIRS
# and reports pairs per second and the ratios SQL plain / each other side.
# Also the same pair of either layout in a plpgsql loop in one backend (a
# pg_cron job's view).  Every SQL transaction is checked to have taken and
# released its lock (redis_lock_stats), and no lock key is left behind.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use BenchLib;
use LockPeer;
use RedisLockTest;

my $out = shift // 'RESULTS-plain.md';
my $secs = BenchLib::seconds();
my @clients = split /[,\s]+/, ($ENV{REDISLOCK_BENCH_PLAIN_CLIENTS} // '1,4');
my $rounds = $ENV{REDISLOCK_BENCH_ROUNDS} // 3;
my $loop_n = int(20000 * BenchLib::scale());
my $lease_ms = 30000;
my $load_start = BenchLib::loadavg();

my $why = LockPeer::check_build('redispy');
die "plain: $why\n" if $why;
my $python = LockPeer::driver_dir('redispy') . '/venv/bin/python';
my $redsync = $ENV{REDISLOCK_BENCH_REDSYNC_PAIRS}
  // die "plain: REDISLOCK_BENCH_REDSYNC_PAIRS names no program (bash bench/run.sh plain builds it)\n";
die "plain: $redsync: not executable\n" unless -x $redsync;

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('bench_plain', $redis, 'max_connections' => 50);
my $tmp = $node->basedir;
my $url = 'redis://127.0.0.1:' . $redis->port;

my %script;
for my $layout (qw(plain redisson))
{
	my $name = "'bench_sql_$layout:' || :client_id::text";
	$script{$layout} = BenchLib::script_file($tmp, "pair_$layout",
		"SELECT redis_lock_acquire($name, '0', '30 s', layout => '$layout');\n"
		  . "SELECT redis_lock_release($name);\n");
}

# One run of a real client's loop: pairs per second, and its version.
sub peer_rate
{
	my ($client, $threads) = @_;
	my @cmd = $client eq 'redispy'
	  ? ($python, "$FindBin::Bin/plain-peers/redispy_pairs.py")
	  : ($redsync);
	my ($o) = BenchLib::run_cmd([ @cmd, $url, $secs, $threads, "bench_$client$threads:", $lease_ms ],
		timeout => $secs * 4 + 60);
	$o =~ /client=\Q$client\E version=(\S+) threads=\d+ pairs=(\d+) seconds=([\d.]+) rate=([\d.]+)/
	  or die "plain: $client: unexpected output: $o";
	return { version => $1, pairs => $2, rate => $4 };
}

my @sides = ('plain', 'redisson', 'redispy', 'redsync');
my (%rate, %check, %version);    # {side}{clients} = [ pairs/s per round ]
for my $c (@clients)
{
	my %t = map { $_ => [ 0, 0, 0, 0 ] } qw(plain redisson);
	for my $r (1 .. $rounds)
	{
		for my $side (@sides)
		{
			my $v;
			if ($side eq 'plain' || $side eq 'redisson')
			{
				my $s0 = BenchLib::lock_counters($node);
				my $q = BenchLib::pgbench($node, $script{$side}, $c);
				my $s1 = BenchLib::lock_counters($node);
				$v = $q->{tps};
				my $t = $t{$side};
				$t->[0] += $q->{xacts};
				$t->[1] += $s1->{acquires} - $s0->{acquires};
				$t->[2] += $s1->{releases} - $s0->{releases};
				$t->[3] += $s1->{errors} - $s0->{errors};
			}
			else
			{
				my $p = peer_rate($side, $c);
				$v = $p->{rate};
				$version{$side} = $p->{version};
			}
			push @{ $rate{$side}{$c} }, $v;
			BenchLib::progress("round %d %-8s c=%-3d %10.1f pairs/s", $r, $side, $c, $v);
		}
	}
	$check{$_}{$c} = join(' / ', @{ $t{$_} }) for keys %t;
}
my $left = $redis->cli('EVAL', "return #redis.call('keys', 'bench*')", 0);

# One backend, no client round trips: either layout's pair in a loop.
$node->safe_psql('postgres', <<'SQL');
CREATE FUNCTION bench_job_pairs(lay text, n int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
    FOR i IN 1 .. n LOOP
        IF NOT redis_lock_acquire('bench:job:' || lay, '0', '30 s', layout => lay) THEN
            RAISE EXCEPTION 'not acquired';
        END IF;
        IF NOT redis_lock_release('bench:job:' || lay) THEN RAISE EXCEPTION 'not released'; END IF;
    END LOOP;
    RETURN n / extract(epoch FROM clock_timestamp() - t0);
END $$;
SQL
my %job;
$node->safe_psql('postgres', "SELECT bench_job_pairs('$_', 500)") for qw(plain redisson);
for my $r (1 .. $rounds)
{
	for my $lay (qw(plain redisson))
	{
		push @{ $job{$lay} }, $node->safe_psql('postgres', "SELECT bench_job_pairs('$lay', $loop_n)");
		BenchLib::progress("round %d in-job %-8s %10.1f pairs/s", $r, $lay, $job{$lay}[-1]);
	}
}

# Redis commands of one pair of each SQL layout (a loop of 1000 in a backend).
my %cmds;
for my $lay (qw(plain redisson))
{
	my $k0 = BenchLib::commandstats($redis);
	$node->safe_psql('postgres', "SELECT bench_job_pairs('$lay', 1000)");
	my $d = BenchLib::commandstats_delta($k0, BenchLib::commandstats($redis));
	$cmds{$lay} = join(', ', map { sprintf('%s %.2f', $_, $d->{$_} / 1000) }
		  grep { $d->{$_} >= 5 } sort keys %$d);
}

my %m;
for my $side (@sides)
{
	$m{$side}{$_} = BenchLib::median(@{ $rate{$side}{$_} }) for @clients;
}
my $each = sub { join ' / ', map { sprintf('%.0f', $_) } @{ $_[0] } };
my @rows;
for my $c (@clients)
{
	push @rows, [ $c, (map { sprintf('%.0f', $m{$_}{$c}) } @sides),
		(map { sprintf('%.2f', $m{plain}{$c} / $m{$_}{$c}) } qw(redisson redispy redsync)),
		(map { $each->($rate{$_}{$c}) } @sides) ];
}
my @checks = map { my $c = $_; [ $c, $check{plain}{$c}, $check{redisson}{$c} ] } @clients;
my $load_end = BenchLib::loadavg();
my %jm = map { $_ => BenchLib::median(@{ $job{$_} }) } qw(plain redisson);

open my $fh, '>', $out or die "$out: $!";
print $fh <<"MD";
## The plain layout next to the Redisson layout, redis-py and redsync: lock + unlock pairs on one Redis

Command: `bash bench/run.sh plain` (bench/plain.pl), $secs s per run,
$rounds rounds, each round running the four sides one after the other;
medians (a round's runs are next to each other in time, so load from
elsewhere weighs on all alike). Load average (1/5/15 min) at the start:
$load_start, at the end: $load_end; the machine's cores were shared with
whatever else ran then, so single rounds vary and only the medians' order
and the ratios' direction carry.
@{[ BenchLib::machine($node, $redis) ]} redis-py $version{redispy} (test/peers/redispy's
pin, Python @{[ (split ' ', `$python -V 2>&1`)[1] // '?' ]}), redsync $version{redsync} with go-redis (test/peers/redsync's pins).

Each client on a lock name of its own, so nothing waits; every side with
a fixed 30 s lease (no watchdog), on the same Redis:

| side | one pair |
|---|---|
| SQL plain | `pgbench -n -M prepared -c N -T $secs` (`-j 2` from 2 clients on): `SELECT redis_lock_acquire(name, '0', '30 s', layout => 'plain'); SELECT redis_lock_release(name);` |
| SQL redisson | the same with `layout => 'redisson'` |
| redis-py | `lock = r.lock(name, timeout=30)`, then `lock.acquire(blocking=False); lock.release()` in N threads of one client (bench/plain-peers/redispy_pairs.py, 1 s warm-up not counted) |
| redsync | `m := rs.NewMutex(name, WithExpiry(30 s), WithTries(1))`, then `m.Lock(); m.Unlock()` in N goroutines of one client (bench/plain-peers/redsync, 1 s warm-up not counted) |

@{[ BenchLib::table(['clients', 'SQL plain pairs/s', 'SQL redisson pairs/s', 'redis-py pairs/s', 'redsync pairs/s', 'plain / redisson', 'plain / redis-py', 'plain / redsync', 'SQL plain per round', 'SQL redisson per round', 'redis-py per round', 'redsync per round'], @rows) ]}
@{[ BenchLib::table(['clients', 'check SQL plain: transactions / acquires / releases / Redis errors', 'check SQL redisson'], @checks) ]}
Inside one backend (a plpgsql loop of $loop_n pairs, $rounds rounds, medians):
plain @{[ sprintf('%.0f', $jm{plain}) ]} pairs/s (@{[ $each->($job{plain}) ]}), redisson
@{[ sprintf('%.0f', $jm{redisson}) ]} pairs/s (@{[ $each->($job{redisson}) ]}): plain / redisson @{[ sprintf('%.2f', $jm{plain} / $jm{redisson}) ]}.

Redis commands per pair (INFO commandstats over 1000 pairs in one backend):
plain: $cmds{plain}; redisson: $cmds{redisson}.
Lock keys left in Redis after the pgbench and client runs: $left.
MD
close $fh;
BenchLib::progress("wrote %s", $out);
