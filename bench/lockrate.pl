# Workload 1: uncontended acquire + release, at 1, 2, 4, 8 and 32 clients.
#
# pgbench (-M prepared) runs two statements per transaction on a lock name of
# its own per client (from :client_id):
#   redislock (watchdog)  redis_lock_acquire(name, '0') + redis_lock_release(name)
#   redislock (lease)     the same with a fixed lease of 30 s
#   advisory              pg_advisory_lock(id) + pg_advisory_unlock(id)
#   no-op                 two SELECTs of the same text expression
# and redis-benchmark runs lua/acquire.lua and lua/release.lua by EVALSHA at
# the same concurrency. The physical limit of one lock + unlock is taken as
# the no-op latency (two SQL round trips) plus one EVALSHA acquire and one
# EVALSHA release round trip.
#
# Then, in one backend, a plpgsql loop of acquire + release pairs (no client
# round trips) measures where the time goes: wall time per pair, backend and
# Redis CPU per pair, and (when perf works) a profile of the backend.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use BenchLib;
use RedisLockTest;
use File::Basename qw(dirname);
use Time::HiRes qw(time sleep);
use IPC::Run ();

my $out = shift // 'RESULTS-lockrate.md';
my $dir = dirname($out);
my @clients = BenchLib::clients();
my $secs = BenchLib::seconds();
my $rb_requests = $ENV{REDISLOCK_BENCH_REDIS_REQUESTS} // 40000;
my $loop_n = int(($ENV{REDISLOCK_BENCH_LOOP} // 20000) * BenchLib::scale());
my $lua = "$FindBin::Bin/../lua";

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('bench_lockrate', $redis, 'max_connections' => 50);
my $tmp = $node->basedir;

# Our scripts, loaded into the bench Redis for redis-benchmark.
sub slurp { my ($f) = @_; open my $fh, '<', $f or die "$f: $!"; local $/; return <$fh>; }
my $sha_acq = $redis->cli('SCRIPT', 'LOAD', slurp("$lua/acquire.lua"));
my $sha_rel = $redis->cli('SCRIPT', 'LOAD', slurp("$lua/release.lua"));
die "SCRIPT LOAD failed: $sha_acq / $sha_rel" unless $sha_acq =~ /^[0-9a-f]{40}$/ && $sha_rel =~ /^[0-9a-f]{40}$/;
# The extension runs the same scripts: after one SQL lock + unlock, Redis
# has exactly these two scripts (SCRIPT FLUSH first, so only its loads count).
$redis->cli('SCRIPT', 'FLUSH');
$node->safe_psql('postgres', "SELECT redis_lock_acquire('bench:probe', '0'), redis_lock_release('bench:probe')");
my $same = join ',', $redis->cli('SCRIPT', 'EXISTS', $sha_acq, $sha_rel);
$redis->cli('SCRIPT', 'LOAD', slurp("$lua/$_.lua")) for qw(acquire release);
my $owner = $node->safe_psql('postgres', 'SELECT redis_lock_owner_id()');

my $name = q{'bench_c' || :client_id::text};
my %scripts = (
	noop => BenchLib::script_file($tmp, 'noop', "SELECT $name;\nSELECT $name;\n"),
	advisory => BenchLib::script_file($tmp, 'advisory',
		"SELECT pg_advisory_lock(:client_id);\nSELECT pg_advisory_unlock(:client_id);\n"),
	watchdog => BenchLib::script_file($tmp, 'watchdog',
		"SELECT redis_lock_acquire($name, '0');\nSELECT redis_lock_release($name);\n"),
	lease => BenchLib::script_file($tmp, 'lease',
		"SELECT redis_lock_acquire($name, '0', '30 s');\nSELECT redis_lock_release($name);\n"),
	# a re-entry of a lock the session holds: the connection's first
	# transaction takes the base hold (and marks it taken), as in reentry.pl
	reentry => BenchLib::script_file($tmp, 'reentry',
		"SELECT CASE WHEN current_setting('bench.held', true) = '1' THEN redis_lock_acquire($name, '0') "
		  . "ELSE redis_lock_acquire($name, '0') AND set_config('bench.held', '1', false) = '1' "
		  . "AND redis_lock_acquire($name, '0') END;\nSELECT redis_lock_release($name);\n"),
);
my @kinds = qw(noop advisory watchdog lease reentry);

sub stats
{
	my @v = split /\|/, $node->safe_psql('postgres',
		'SELECT acquires, releases, redis_errors FROM redis_lock_stats');
	return { acquires => $v[0], releases => $v[1], errors => $v[2] };
}

my %res;       # {kind}{clients} = pgbench result
my %rb;        # {acq|rel}{clients} = redis-benchmark result
my %check;     # {kind}{clients} = acquisitions - transactions
my %rcpu;      # Redis CPU µs per transaction, {kind}{clients}
my $keyspace = 10 * $rb_requests;
for my $c (@clients)
{
	for my $k (@kinds)
	{
		my $s0 = stats();
		my $cpu0 = BenchLib::redis_cpu($redis);
		my $r = BenchLib::pgbench($node, $scripts{$k}, $c);
		my $cpu1 = BenchLib::redis_cpu($redis);
		my $s1 = stats();
		$res{$k}{$c} = $r;
		$rcpu{$k}{$c} = ($cpu1 - $cpu0) * 1e6 / ($r->{xacts} || 1);
		if ($k eq 'watchdog' || $k eq 'lease')
		{
			# every transaction must have taken its lock and released it
			$check{$k}{$c} = sprintf('%d / %d / %d / %d',
				$r->{xacts}, $s1->{acquires} - $s0->{acquires},
				$s1->{releases} - $s0->{releases}, $s1->{errors} - $s0->{errors});
		}
		BenchLib::progress("%-9s c=%-3d tps %10.1f  lat %.3f ms", $k, $c, $r->{tps}, $r->{lat_ms});
	}
	# raw EVALSHA: acquire on fresh keys; release of held keys (prefilled)
	$rb{acq}{$c} = BenchLib::redis_benchmark($redis, $c, $rb_requests, $keyspace,
		'EVALSHA', $sha_acq, 2, "rba$c:__rand_int__", "redisson_lock_token:{rba$c:__rand_int__}",
		30000, $owner, 1, 2592000000);
	$redis->cli('EVAL', "for i = 0, tonumber(ARGV[1]) - 1 do redis.call('hset', string.format('rbr:%012d', i), ARGV[2], 1) end return 1",
		0, $keyspace, $owner);
	$rb{rel}{$c} = BenchLib::redis_benchmark($redis, $c, $rb_requests, $keyspace,
		'EVALSHA', $sha_rel, 4, 'rbr:__rand_int__', 'redisson_lock__channel:{rbr:__rand_int__}',
		'redisson_lock_queue:{rbr:__rand_int__}', 'redisson_lock_timeout:{rbr:__rand_int__}',
		$owner, 0, 0, 'publish');
	BenchLib::progress("evalsha   c=%-3d acquire %.3f ms (%.0f/s), release %.3f ms (%.0f/s)", $c,
		$rb{acq}{$c}{avg_ms}, $rb{acq}{$c}{rps}, $rb{rel}{$c}{avg_ms}, $rb{rel}{$c}{rps});
}
$redis->cli('FLUSHALL');

# ---- where the time goes: one backend, plpgsql loop, no client round trips
$node->safe_psql('postgres', <<'SQL');
CREATE FUNCTION bench_pairs(n int, kind text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
    FOR i IN 1 .. n LOOP
        IF kind = 'watchdog' THEN
            IF NOT redis_lock_acquire('bench:loop', '0') THEN RAISE EXCEPTION 'not acquired'; END IF;
            PERFORM redis_lock_release('bench:loop');
        ELSIF kind = 'lease' THEN
            IF NOT redis_lock_acquire('bench:loop', '0', '30 s') THEN RAISE EXCEPTION 'not acquired'; END IF;
            PERFORM redis_lock_release('bench:loop');
        ELSIF kind = 'advisory' THEN
            PERFORM pg_advisory_lock(42);
            PERFORM pg_advisory_unlock(42);
        ELSE
            PERFORM 'bench:loop' || i;
            PERFORM 'bench:loop' || i;
        END IF;
    END LOOP;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / n;
END $$;
SQL
my $sess = RedisLockTest::Session->new($node);
my $bpid = $sess->pid;
$sess->query("SELECT bench_pairs(1000, 'watchdog')");    # warm up
my %loop;
for my $k (qw(noop advisory watchdog lease))
{
	my $n = $k eq 'noop' || $k eq 'advisory' ? $loop_n * 10 : $loop_n;
	my ($c0, $r0, $s0) = (BenchLib::cpu_ns($bpid), BenchLib::redis_cpu($redis), BenchLib::commandstats($redis));
	my $us = $sess->query("SELECT bench_pairs($n, '$k')");
	my ($c1, $r1, $s1) = (BenchLib::cpu_ns($bpid), BenchLib::redis_cpu($redis), BenchLib::commandstats($redis));
	my $d = BenchLib::commandstats_delta($s0, $s1);
	$loop{$k} = { us => $us, be_cpu => ($c1 - $c0) / 1e3 / $n, redis_cpu => ($r1 - $r0) * 1e6 / $n,
		evalsha => ($d->{evalsha} // 0) / $n };
	BenchLib::progress("loop %-9s %.2f us/pair, backend CPU %.2f us, redis CPU %.2f us", $k, $us,
		$loop{$k}{be_cpu}, $loop{$k}{redis_cpu});
}

# perf profile of the backend running the watchdog loop (optional)
my $perf_md = '';
my $perf_secs = $ENV{REDISLOCK_BENCH_PERF_SECONDS} // 5;
if ($perf_secs > 0 && `sh -c 'command -v perf'`)
{
	my $data = "$tmp/perf.data";
	$sess->start("SELECT bench_pairs(100000000, 'watchdog')");
	sleep(0.5);
	my ($in, $pout, $perr) = ('', '', '');
	my $ok = IPC::Run::run([ 'perf', 'record', '-F', '999', '-g', '-p', $bpid, '-o', $data, '--', 'sleep', $perf_secs ],
		\$in, \$pout, \$perr, IPC::Run::timeout($perf_secs + 60));
	$sess->cancel(30);
	if ($ok && -s $data)
	{
		my ($sym) = eval { BenchLib::run_cmd([ 'perf', 'report', '-i', $data, '--stdio', '--no-children',
			'-g', 'none', '--percent-limit', '1.5', '--sort', 'dso,symbol' ]) };
		my ($dso) = eval { BenchLib::run_cmd([ 'perf', 'report', '-i', $data, '--stdio', '--no-children',
			'-g', 'none', '--sort', 'dso' ]) };
		my ($callers) = eval { BenchLib::run_cmd([ 'perf', 'report', '-i', $data, '--stdio', '--children',
			'-g', 'none', '--percent-limit', '4', '--sort', 'symbol' ]) };
		my $clean = sub {
			join "\n", map { s/\s+-\s+-\s*$//r } grep { /\S/ && !/^#/ && !/\[\.\] (?:0x[0-9a-f]+|0+)\s/ }
			  split /\n/, ($_[0] // '');
		};
		$perf_md = "### perf profile of the backend (plpgsql watchdog loop, ${perf_secs} s, "
		  . "`perf record -F 999 -g -p <pid>`)\n\n"
		  . "Self time by shared object:\n\n```\n" . $clean->($dso) . "\n```\n\n"
		  . "Self time by symbol (≥ 1.5 %):\n\n```\n" . $clean->($sym) . "\n```\n\n"
		  . "Inclusive time (children included, ≥ 4 %):\n\n```\n" . $clean->($callers) . "\n```\n";
	}
	else
	{
		$perf_md = "perf did not work here (`perf record` said: "
		  . join(' ', grep { /\S/ } split /\n/, $perr) . "); no profile.\n";
	}
}
$sess->close;

# ---- results
my $limit = sub { my ($c) = @_; $res{noop}{$c}{lat_ms} + $rb{acq}{$c}{avg_ms} + $rb{rel}{$c}{avg_ms} };
my @lat_rows;
my @ratio_rows;
for my $c (@clients)
{
	push @lat_rows, [ $c,
		map({ sprintf('%.3f', $res{$_}{$c}{lat_ms}) } @kinds),
		sprintf('%.3f', $rb{acq}{$c}{avg_ms}), sprintf('%.3f', $rb{rel}{$c}{avg_ms}),
		sprintf('%.3f', $limit->($c)) ];
}
my @tps_rows;
for my $c (@clients)
{
	push @tps_rows, [ $c, map({ sprintf('%.0f', $res{$_}{$c}{tps}) } @kinds),
		sprintf('%.0f', $rb{acq}{$c}{rps}), sprintf('%.0f', $rb{rel}{$c}{rps}) ];
	push @ratio_rows, [ $c,
		(map { sprintf('%.2f×', $res{$_}{$c}{lat_ms} / $limit->($c)) } qw(watchdog lease)),
		(map { sprintf('%.2f', $res{$_}{$c}{tps} / $res{advisory}{$c}{tps}) } qw(watchdog lease)),
		(map { sprintf('%.1f', $rcpu{$_}{$c}) } qw(watchdog lease)),
		$check{watchdog}{$c}, $check{lease}{$c} ];
}
my @stmt_rows;
for my $c (@clients)
{
	for my $k (qw(watchdog lease reentry advisory noop))
	{
		my @s = @{ $res{$k}{$c}{stmt} };
		push @stmt_rows, [ $c, $k, map { sprintf('%.3f', $_->[0]) } @s[0, 1] ];
	}
}

# chart
my $dat = "$tmp/lockrate.dat";
open my $dfh, '>', $dat or die;
for my $c (@clients)
{
	my @four = qw(noop advisory watchdog lease);
	print $dfh join(' ', $c, (map { $res{$_}{$c}{lat_ms} } @four), $limit->($c),
		(map { $res{$_}{$c}{tps} } @four), $res{reentry}{$c}{lat_ms}, $res{reentry}{$c}{tps}), "\n";
}
close $dfh;
my $png = "$dir/lockrate.png";
my $term = BenchLib::png_terminal(1200, 500);
my $have_png = BenchLib::gnuplot(<<"GP", $png);
$term
set output '$png'
set multiplot layout 1,2 title 'redislock: uncontended acquire + release (pgbench -M prepared, distinct name per client)'
set logscale x 2
set xtics (1,2,4,8,16,32)
set xlabel 'clients'
set grid
set key top left
set ylabel 'latency per lock + unlock (ms)'
set title 'latency'
plot '$dat' u 1:4 w lp lw 2 t 'redislock, watchdog', '' u 1:5 w lp lw 2 t 'redislock, 30 s lease', \\
     '' u 1:6 w lp dt 2 lw 2 t 'physical limit (no-op SQL + 2 EVALSHA)', \\
     '' u 1:3 w lp t 'pg\\_advisory\\_lock', '' u 1:2 w lp t 'two no-op SELECTs', \\
     '' u 1:11 w lp t 'redislock, re-entrant pair'
set ylabel 'lock + unlock pairs per second'
set title 'throughput'
set key top left
plot '$dat' u 1:9 w lp lw 2 t 'redislock, watchdog', '' u 1:10 w lp lw 2 t 'redislock, 30 s lease', \\
     '' u 1:8 w lp t 'pg\\_advisory\\_lock', '' u 1:7 w lp t 'two no-op SELECTs', \\
     '' u 1:12 w lp t 'redislock, re-entrant pair'
unset multiplot
GP

my $c1 = $clients[0];
my $r1 = $res{watchdog}{$c1}{lat_ms} / $limit->($c1);
my $r1l = $res{lease}{$c1}{lat_ms} / $limit->($c1);
my $verdict = ($r1 <= 1.15 && $r1l <= 1.15) ? 'met' : 'MISSED';
my $lo = $loop{watchdog};
my $raw2 = $rb{acq}{$c1}{avg_ms} * 1000 + $rb{rel}{$c1}{avg_ms} * 1000;

open my $fh, '>', $out or die;
print $fh <<"MD";
## 1. Uncontended acquire + release vs clients

Command: `bash bench/run.sh lockrate` (bench/lockrate.pl), ${secs} s per pgbench run.
@{[ BenchLib::machine($node, $redis) ]}

pgbench: `$res{watchdog}{$c1}{cmd}` (and `-c N -j 2` for N ≥ 2), one
transaction = two statements, each client on its own lock name
(`'bench_c' || :client_id`), so no acquisition waits:

| script | statements |
|---|---|
| watchdog | `SELECT redis_lock_acquire(name, '0'); SELECT redis_lock_release(name);` (lease NULL) |
| lease | `SELECT redis_lock_acquire(name, '0', '30 s'); SELECT redis_lock_release(name);` |
| re-entrant | the watchdog pair on a name the session already holds (its first transaction takes the base hold): served in the session |
| advisory | `SELECT pg_advisory_lock(:client_id); SELECT pg_advisory_unlock(:client_id);` |
| no-op | `SELECT name; SELECT name;` |

Raw Redis: `redis-benchmark -c N -n $rb_requests -r $keyspace --csv EVALSHA <sha of lua/acquire.lua> 2 rbaN:__rand_int__ redisson_lock_token:{rbaN:__rand_int__} 30000 <owner id> 1 2592000000`
(fresh keys), and the same with `lua/release.lua` (4 keys, `<owner> 0 0 publish`) on
$keyspace lock hashes prefilled with the owner's field, so nearly every call
(≥ 95 %) really deletes a lock and publishes the unlock message, as our
release does. The scripts the extension runs are these files: after a
`SCRIPT FLUSH` and one SQL lock + unlock, `SCRIPT EXISTS` of the two shas gave `$same`.

**Physical limit** = no-op latency (two SQL round trips) + redis-benchmark's
average EVALSHA acquire latency + its average EVALSHA release latency, at the
same number of clients. **Overhead** = our latency / physical limit.

Latency per transaction (ms; pgbench "latency average", redis-benchmark "avg_latency_ms"):

@{[ BenchLib::table(['clients', 'no-op', 'advisory', 'redislock watchdog', 'redislock lease', 'redislock re-entrant', 'EVALSHA acquire', 'EVALSHA release', 'physical limit'], @lat_rows) ]}
Throughput (transactions = lock + unlock pairs per second; redis-benchmark: calls per second):

@{[ BenchLib::table(['clients', 'no-op', 'advisory', 'redislock watchdog', 'redislock lease', 'redislock re-entrant', 'EVALSHA acquire /s', 'EVALSHA release /s'], @tps_rows) ]}
Ratios (overhead over the physical limit; throughput relative to
`pg_advisory_lock`), Redis CPU per pair (µs, from INFO cpu over the run), and the check that
every transaction took and released its lock (transactions / acquires / releases / Redis errors from `redis_lock_stats`):

@{[ BenchLib::table(['clients', 'overhead watchdog', 'overhead lease', 'tps / advisory, watchdog', 'tps / advisory, lease', 'Redis CPU µs/pair, watchdog', 'Redis CPU µs/pair, lease', 'check watchdog', 'check lease'], @ratio_rows) ]}
Per-statement latency (ms, pgbench -r):

@{[ BenchLib::table(['clients', 'script', 'first statement (acquire)', 'second statement (release)'], @stmt_rows) ]}
@{[ $have_png ? "![latency and throughput vs clients](lockrate.png)\n" : "(gnuplot did not produce a chart)\n" ]}
**Target: overhead over the physical limit ≤ 1.15× at 1 client — $verdict** (watchdog @{[ sprintf('%.2f', $r1) ]}×, lease @{[ sprintf('%.2f', $r1l) ]}×).

**Target: a re-entrant pair ≤ 1.2× a no-op SQL pair at 1 client — @{[ $res{reentry}{$c1}{lat_ms} / $res{noop}{$c1}{lat_ms} <= 1.2 ? 'met' : 'MISSED' ]}** (@{[ sprintf('%.3f ÷ %.3f = %.2f', $res{reentry}{$c1}{lat_ms}, $res{noop}{$c1}{lat_ms}, $res{reentry}{$c1}{lat_ms} / $res{noop}{$c1}{lat_ms}) ]}×; bench/reentry.pl measures it over alternating rounds).

### Where the time goes (one backend, plpgsql loop of $loop_n pairs, no client round trips)

| loop body | µs per pair (wall) | backend CPU µs per pair | Redis CPU µs per pair | EVALSHA per pair |
|---|---|---|---|---|
@{[ join("\n", map { sprintf('| %s | %.2f | %.2f | %.2f | %.2f |', $_, $loop{$_}{us}, $loop{$_}{be_cpu}, $loop{$_}{redis_cpu}, $loop{$_}{evalsha}) } qw(watchdog lease advisory noop)) ]}

Two raw EVALSHA round trips (redis-benchmark, 1 client, acquire + release):
@{[ sprintf('%.1f', $raw2) ]} µs; the in-backend watchdog pair takes
@{[ sprintf('%.1f', $lo->{us}) ]} µs, i.e. @{[ sprintf('%.2f', $lo->{us} / $raw2) ]}× the raw round trips
(@{[ sprintf('%.1f', $lo->{us} - $raw2) ]} µs more per pair). Of the wall time, the backend is on CPU
@{[ sprintf('%.0f', 100 * $lo->{be_cpu} / $lo->{us}) ]} % and Redis @{[ sprintf('%.0f', 100 * $lo->{redis_cpu} / $lo->{us}) ]} %
(the rest is the two loopback wake-ups; on 2 cores the two processes can run in parallel only across round trips).

$perf_md
MD
close $fh;
BenchLib::progress("wrote %s", $out);
