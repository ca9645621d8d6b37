# Workload: a Java service's lock rate next to SQL's, on one Redis.
#
# Uncontended lock + unlock pairs, each client on a lock name of its own, at
# 1 and 4 clients (REDISLOCK_BENCH_JAVA_CLIENTS), REDISLOCK_BENCH_SECONDS each,
# Java and SQL alternating for REDISLOCK_BENCH_ROUNDS rounds (default 3; the
# medians are reported, so that load from elsewhere on a shared machine
# weighs on both sides alike):
#   Java        the real Redisson (REDISLOCK_BENCH_REDISSON, default 4.7.0:
#               test/redisson-java's LockRate), N threads of one client, each
#               looping RLock.lock() + unlock() (watchdog, no lease), after a
#               2 s warm-up
#   SQL         pgbench -M prepared, N clients, one transaction =
#               SELECT redis_lock_acquire(name); SELECT redis_lock_release(name);
#               (watchdog, no lease, the default wait)
#   SQL in-job  the same pair in a plpgsql loop in one backend (a pg_cron job's
#               or a procedure's view: no client round trips)
# and reports pairs per second and the ratio SQL / Java.  Every SQL
# transaction is checked to have taken and released its lock
# (redis_lock_stats).
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use BenchLib;
use RedisLockTest;
use RealRedisson;

my $out = shift // 'RESULTS-javarate.md';
my $secs = BenchLib::seconds();
my @clients = split /[,\s]+/, ($ENV{REDISLOCK_BENCH_JAVA_CLIENTS} // '1,4');
my $version = $ENV{REDISLOCK_BENCH_REDISSON} // '4.7.0';
my $loop_n = int(20000 * BenchLib::scale());
my $rounds = $ENV{REDISLOCK_BENCH_ROUNDS} // 3;

my $why = RealRedisson::check_build($version);
die "javarate: $why\n" if $why;
my $cp = RealRedisson::driver_dir($version) . "/redisson-driver.jar:" . RealRedisson::driver_dir($version) . "/lib/*";
my $java = $ENV{REDISLOCK_JAVA} // 'java';
my $jv = (BenchLib::run_cmd([ $java, '-version' ]))[1];
($jv) = $jv =~ /^(\S+ version "[^"]+")/m;

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('bench_javarate', $redis, 'max_connections' => 50);
my $tmp = $node->basedir;
my $url = 'redis://127.0.0.1:' . $redis->port;

my $name = q{'bench_sql' || :client_id::text};
my $script = BenchLib::script_file($tmp, 'sqlpair',
	"SELECT redis_lock_acquire($name);\nSELECT redis_lock_release($name);\n");

sub stats
{
	my @v = split /\|/, $node->safe_psql('postgres',
		'SELECT acquires, releases, redis_errors FROM redis_lock_stats');
	return { acquires => $v[0], releases => $v[1], errors => $v[2] };
}

sub java_rate
{
	my ($threads) = @_;
	my ($o) = BenchLib::run_cmd([ $java, '-Dorg.slf4j.simpleLogger.defaultLogLevel=warn',
			'-cp', $cp, 'redislock.test.LockRate', $url, $threads, $secs, "bench:java$threads:" ],
		timeout => $secs * 4 + 120);
	$o =~ /threads=\d+ pairs=(\d+) seconds=([\d.]+) rate=([\d.]+)/ or die "LockRate: unexpected output: $o";
	return { pairs => $1, seconds => $2, rate => $3 };
}

my (%java, %sql, %check);    # {clients} = [ pairs/s per round ]; check totals
for my $c (@clients)
{
	my @t = (0, 0, 0, 0);
	for my $r (1 .. $rounds)
	{
		my $j = java_rate($c);
		push @{ $java{$c} }, $j->{rate};
		BenchLib::progress("round %d java c=%-3d %10.1f pairs/s", $r, $c, $j->{rate});
		my $s0 = stats();
		my $q = BenchLib::pgbench($node, $script, $c);
		my $s1 = stats();
		push @{ $sql{$c} }, $q->{tps};
		$t[0] += $q->{xacts};
		$t[1] += $s1->{acquires} - $s0->{acquires};
		$t[2] += $s1->{releases} - $s0->{releases};
		$t[3] += $s1->{errors} - $s0->{errors};
		BenchLib::progress("round %d sql  c=%-3d %10.1f pairs/s", $r, $c, $q->{tps});
	}
	$check{$c} = join ' / ', @t;
}
my $left = $redis->cli('EVAL', "return #redis.call('keys', 'bench*')", 0);

# One backend, no client round trips.
$node->safe_psql('postgres', <<'SQL');
CREATE FUNCTION bench_job_pairs(n int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
    FOR i IN 1 .. n LOOP
        IF NOT redis_lock_acquire('bench:job') THEN RAISE EXCEPTION 'not acquired'; END IF;
        PERFORM redis_lock_release('bench:job');
    END LOOP;
    RETURN n / extract(epoch FROM clock_timestamp() - t0);
END $$;
SQL
$node->safe_psql('postgres', 'SELECT bench_job_pairs(500)');
my $job = $node->safe_psql('postgres', "SELECT bench_job_pairs($loop_n)");
BenchLib::progress("sql in-job loop %10.1f pairs/s", $job);

my (%jm, %sm);
for my $c (@clients)
{
	$jm{$c} = BenchLib::median(@{ $java{$c} });
	$sm{$c} = BenchLib::median(@{ $sql{$c} });
}
my $each = sub { join ' / ', map { sprintf('%.0f', $_) } @{ $_[0] } };
my @rows = map {
	[ $_, sprintf('%.0f', $jm{$_}), sprintf('%.0f', $sm{$_}), sprintf('%.2f', $sm{$_} / $jm{$_}),
		sprintf('%.0f', 1e6 * $_ / $jm{$_}), sprintf('%.0f', 1e6 * $_ / $sm{$_}),
		$each->($java{$_}), $each->($sql{$_}), $check{$_} ]
} @clients;
my $c1 = $clients[0];

open my $fh, '>', $out or die "$out: $!";
print $fh <<"MD";
## Java Redisson next to SQL: lock + unlock pairs on one Redis

Command: `bash bench/run.sh javarate` (bench/javarate.pl), $secs s per run,
$rounds rounds alternating Java and SQL; medians (a round's runs are next to
each other in time, so load from elsewhere weighs on both alike).
@{[ BenchLib::machine($node, $redis) ]} Java: Redisson $version, $jv.

Each client on a lock name of its own, so nothing waits; both sides in
watchdog mode (no lease), on the same Redis:

| side | one pair |
|---|---|
| Java | `RLock lock = redisson.getLock(name); lock.lock(); lock.unlock();` in N threads of one Redisson client (test/redisson-java's `LockRate`, 2 s warm-up not counted) |
| SQL | `pgbench -n -M prepared -c N -T $secs` (`-j 2` from 2 clients on): `SELECT redis_lock_acquire(name); SELECT redis_lock_release(name);` |
| SQL in a job | the same two calls in a plpgsql loop of $loop_n pairs in one backend (what a pg_cron job or a procedure sees: no client round trips) |

@{[ BenchLib::table(['clients (threads / sessions)', 'Java pairs/s (median)', 'SQL pairs/s (median)', 'SQL / Java', 'Java µs per pair, per client', 'SQL µs per pair, per client', 'Java pairs/s per round', 'SQL pairs/s per round', 'check SQL: transactions / acquires / releases / Redis errors'], @rows) ]}
SQL inside one backend (plpgsql loop, after the rounds): @{[ sprintf('%.0f', $job) ]} pairs/s, @{[ sprintf('%.2f', $job / $jm{$c1}) ]}× the median of Java's single thread.
Lock keys left in Redis after the runs: $left.
MD
close $fh;
BenchLib::progress("wrote %s", $out);
