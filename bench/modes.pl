# Workload 7: deployment modes. The same uncontended acquire + release with a
# fixed 30 s lease against each way redislock can reach Redis, all real
# redis-servers on 127.0.0.1:
#   single    one server                      (redislock.url)
#   cluster   a Redis Cluster of 3 masters    (redislock.cluster_nodes = one node)
#   redlock3  3 independent masters           (redislock.redlock_nodes)
#   redlock5  5 independent masters           (redislock.redlock_nodes)
# Each mode has its own PostgreSQL node whose postgresql.conf names its
# servers (as a deployment would); all run side by side.
#
# Measured per mode:
#   1. pgbench -M prepared at 1 and 4 clients, a lock name per client:
#      tps and mean latency, and their ratio to single mode.
#   2. a plpgsql loop of acquire + release pairs in one backend (no client
#      round trips), repeated (modes interleaved) and the median taken:
#      µs per pair, ratio to single, backend and Redis CPU per pair, and
#      EVALSHA calls per pair summed over the mode's servers (INFO
#      commandstats), from which the rounds of round trips per pair follow.
#   3. anchors on the single server, one redis-benchmark client: PING, and
#      EVALSHA of lua/acquire.lua and lua/release.lua, as µs per request;
#      the loop's µs per pair is also given in those round trips.
# Reported as ratios measured in the same run; nothing is asserted.
# (All servers are local here, so their CPU, not round trips, sets the
# cost; bench/modes_rtt.pl repeats the loop behind an emulated network delay.)
#
# Environment (besides bench/BenchLib.pm's REDISLOCK_BENCH_SECONDS and
# REDISLOCK_BENCH_SCALE; defaults take about 1.5 minutes):
#   REDISLOCK_BENCH_MODES_CLIENTS=1,4      pgbench client counts
#   REDISLOCK_BENCH_MODES_LOOP=5000        pairs per loop round
#   REDISLOCK_BENCH_ROUNDS=5               loop rounds per mode
#   REDISLOCK_BENCH_MODES_REQUESTS=20000   redis-benchmark -n of the anchors
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use BenchLib;
use RedisLockTest;
use List::Util qw(sum);

my $out = shift // 'RESULTS-modes.md';
my $secs = BenchLib::seconds();
my @clients = split /[,\s]+/, ($ENV{REDISLOCK_BENCH_MODES_CLIENTS} // '1,4');
my $loop_n = int(($ENV{REDISLOCK_BENCH_MODES_LOOP} // 5000) * BenchLib::scale());
my $rounds = $ENV{REDISLOCK_BENCH_ROUNDS} // 5;
my $rb_requests = $ENV{REDISLOCK_BENCH_MODES_REQUESTS} // 20000;
my $lua = "$FindBin::Bin/../lua";
my $load0 = BenchLib::loadavg();

# ---- the four deployments, each with its own PostgreSQL node
my $single = RedisLockTest::Redis->new;
my $cluster = RedisLockTest::Cluster->new(masters => 3);
my $rl3 = RedisLockTest::Redlock->new(n => 3);
my $rl5 = RedisLockTest::Redlock->new(n => 5);
my $seed = '127.0.0.1:' . ($cluster->nodes)[0]->port;

my @modes = qw(single cluster redlock3 redlock5);
my %m = (
	single => { servers => [$single], setting => "redislock.url = '" . $single->url . "'",
		node => RedisLockTest::node('bench_modes_single', $single, 'max_connections' => 20) },
	cluster => { servers => [ $cluster->nodes ], setting => "redislock.cluster_nodes = '$seed'",
		node => RedisLockTest::node('bench_modes_cluster', undef,
			'redislock.cluster_nodes' => $seed, 'max_connections' => 20) },
	redlock3 => { servers => [ $rl3->nodes ], setting => "redislock.redlock_nodes = '" . $rl3->list . "'",
		node => RedisLockTest::node('bench_modes_redlock3', undef,
			'redislock.redlock_nodes' => $rl3->list, 'max_connections' => 20) },
	redlock5 => { servers => [ $rl5->nodes ], setting => "redislock.redlock_nodes = '" . $rl5->list . "'",
		node => RedisLockTest::node('bench_modes_redlock5', undef,
			'redislock.redlock_nodes' => $rl5->list, 'max_connections' => 20) },
);

# Each node is in the mode we think (see BenchLib::probe_mode).
for my $mode (@modes)
{
	my $node = $m{$mode}{node};
	BenchLib::install_pairs_loop($node);
	($m{$mode}{reported}, $m{$mode}{found}) =
	  BenchLib::probe_mode($node, "bench:probe:$mode", @{ $m{$mode}{servers} });
	BenchLib::progress("%-8s mode %s, probe lock on %s servers", $mode, $m{$mode}{reported}, $m{$mode}{found});
}

# ---- 1. pgbench
my %pgb;      # {mode}{clients} = pgbench result
my %pcheck;   # {mode}{clients} = transactions / acquires / releases / errors
my $script = BenchLib::script_file($m{single}{node}->basedir, 'modes',
	"SELECT redis_lock_acquire('b' || :client_id, '0', '30 s');\nSELECT redis_lock_release('b' || :client_id);\n");
for my $c (@clients)
{
	for my $mode (@modes)
	{
		my $node = $m{$mode}{node};
		my @srv = @{ $m{$mode}{servers} };
		my $s0 = BenchLib::lock_counters($node);
		my $cpu0 = sum(map { BenchLib::redis_cpu($_) } @srv);
		my $r = BenchLib::pgbench($node, $script, $c);
		my $cpu1 = sum(map { BenchLib::redis_cpu($_) } @srv);
		my $s1 = BenchLib::lock_counters($node);
		$r->{rcpu} = ($cpu1 - $cpu0) * 1e6 / ($r->{xacts} || 1);
		$pgb{$mode}{$c} = $r;
		$pcheck{$mode}{$c} = sprintf('%d / %d / %d / %d', $r->{xacts}, $s1->{acquires} - $s0->{acquires},
			$s1->{releases} - $s0->{releases}, $s1->{errors} - $s0->{errors});
		BenchLib::progress("pgbench %-8s c=%d tps %9.1f  lat %.3f ms", $mode, $c, $r->{tps}, $r->{lat_ms});
	}
}

# ---- 2. plpgsql loop, one backend per mode, modes interleaved per round
my %sess;
for my $mode (@modes)
{
	$sess{$mode} = RedisLockTest::Session->new($m{$mode}{node});
	$sess{$mode}->query("SELECT bench_pairs('bench:loop', 500)");    # warm up
}
my %loop;    # {mode} = [ {us, cpu, rcpu, evalsha, used, check} ... ]
for my $round (1 .. $rounds)
{
	# rotate the order so that no mode always runs first or last
	my @order = map { $modes[ ($_ + $round - 1) % @modes ] } 0 .. $#modes;
	for my $mode (@order)
	{
		my $s = $sess{$mode};
		my $node = $m{$mode}{node};
		my @srv = @{ $m{$mode}{servers} };
		my $st0 = BenchLib::lock_counters($node);
		my @k0 = map { BenchLib::commandstats($_) } @srv;
		my $r0 = sum(map { BenchLib::redis_cpu($_) } @srv);
		my $c0 = BenchLib::cpu_ns($s->pid);
		my $us = $s->query("SELECT bench_pairs('bench:loop', $loop_n)");
		my $c1 = BenchLib::cpu_ns($s->pid);
		my $r1 = sum(map { BenchLib::redis_cpu($_) } @srv);
		my @k1 = map { BenchLib::commandstats($_) } @srv;
		my $st1 = BenchLib::lock_counters($node);
		my @ev = map { (BenchLib::commandstats_delta($k0[$_], $k1[$_])->{evalsha} // 0) } 0 .. $#srv;
		my ($cpu, $rcpu) = (($c1 - $c0) / 1e3 / $loop_n, ($r1 - $r0) * 1e6 / $loop_n);
		push @{ $loop{$mode} }, {
			us => $us, cpu => $cpu, rcpu => $rcpu, busy => ($cpu + $rcpu) / $us,
			evalsha => sum(@ev) / $loop_n, used => scalar(grep { $_ > 0 } @ev),
			check => sprintf('%d / %d / %d', $st1->{acquires} - $st0->{acquires},
				$st1->{releases} - $st0->{releases}, $st1->{errors} - $st0->{errors}),
		};
		BenchLib::progress("loop round %d %-8s %.1f us/pair, EVALSHA/pair %.2f on %d servers",
			$round, $mode, $us, $loop{$mode}[-1]{evalsha}, $loop{$mode}[-1]{used});
	}
}
$_->close for values %sess;

my %L;    # per mode: the median round (by µs per pair), all its figures
for my $mode (@modes)
{
	my @r = @{ $loop{$mode} };
	my @by_us = sort { $a->{us} <=> $b->{us} } @r;
	$L{$mode} = { %{ $by_us[ $#by_us / 2 ] } };
	$L{$mode}{all_us} = join(', ', map { sprintf('%.1f', $_->{us}) } @r);
	$L{$mode}{check} = join('; ', map { $_->{check} } @r);
	# rounds of round trips per pair: EVALSHA calls per server reached
	$L{$mode}{rounds} = $L{$mode}{used} ? $L{$mode}{evalsha} / $L{$mode}{used} : 0;
}

# ---- 3. anchors: one redis-benchmark client on the single server
my $sha_acq = $single->cli('SCRIPT', 'LOAD', slurp("$lua/acquire.lua"));
my $sha_rel = $single->cli('SCRIPT', 'LOAD', slurp("$lua/release.lua"));
die "SCRIPT LOAD failed: $sha_acq / $sha_rel" unless $sha_acq =~ /^[0-9a-f]{40}$/ && $sha_rel =~ /^[0-9a-f]{40}$/;
my $owner = $m{single}{node}->safe_psql('postgres', 'SELECT redis_lock_owner_id()');
my $keyspace = 10 * $rb_requests;
my %rb;
$rb{ping} = BenchLib::redis_benchmark($single, 1, $rb_requests, 1, 'PING');
$rb{acq} = BenchLib::redis_benchmark($single, 1, $rb_requests, $keyspace,
	'EVALSHA', $sha_acq, 2, 'rba:__rand_int__', 'redisson_lock_token:{rba:__rand_int__}', 30000, $owner, 1);
$single->cli('EVAL', "for i = 0, tonumber(ARGV[1]) - 1 do redis.call('hset', string.format('rbr:%012d', i), ARGV[2], 1) end return 1",
	0, $keyspace, $owner);
# ARGV[4] (the publish command) is ignored by a release.lua that predates it
$rb{rel} = BenchLib::redis_benchmark($single, 1, $rb_requests, $keyspace,
	'EVALSHA', $sha_rel, 4, 'rbr:__rand_int__', 'redisson_lock__channel:{rbr:__rand_int__}',
	'redisson_lock_queue:{rbr:__rand_int__}', 'redisson_lock_timeout:{rbr:__rand_int__}', $owner, 0, 0, 'publish');
$single->cli('FLUSHALL');
# one client, closed loop: the time per request is 1 / rate
my %rt = map { $_ => 1e6 / $rb{$_}{rps} } keys %rb;
my $pair_rt = $rt{acq} + $rt{rel};
BenchLib::progress("anchors: PING %.1f us, EVALSHA acquire %.1f us, release %.1f us", $rt{ping}, $rt{acq}, $rt{rel});

# ---- results
my $f1 = sub { sprintf('%.1f', $_[0]) };
my $f2 = sub { sprintf('%.2f', $_[0]) };
my @setup_rows = map {
	[ $_, '`' . $m{$_}{setting} . '`', scalar @{ $m{$_}{servers} }, $m{$_}{reported}, $m{$_}{found} ]
} @modes;

my @pg_rows;
for my $c (@clients)
{
	my $s = $pgb{single}{$c};
	for my $mode (@modes)
	{
		my $r = $pgb{$mode}{$c};
		push @pg_rows, [ $c, $mode, sprintf('%.0f', $r->{tps}), sprintf('%.3f', $r->{lat_ms}),
			$f2->($r->{tps} / $s->{tps}), $f2->($r->{lat_ms} / $s->{lat_ms}),
			(map { sprintf('%.3f', $_->[0]) } @{ $r->{stmt} }[0, 1]), $f1->($r->{rcpu}), $pcheck{$mode}{$c} ];
	}
}

my $Ls = $L{single};
my @loop_rows = map {
	my $l = $L{$_};
	[ $_, $f1->($l->{us}), $f2->($l->{us} / $Ls->{us}), $f2->($l->{us} / $rt{ping}), $f2->($l->{us} / $pair_rt),
	  $f2->($l->{evalsha}), $l->{used}, $f2->($l->{rounds}), $f1->($l->{rounds} ? $l->{us} / $l->{rounds} : 0),
	  $f1->($l->{cpu}), $f1->($l->{us} - $l->{cpu}), $f1->($l->{rcpu}), $f2->($l->{busy}) ]
} @modes;
my @loop_detail = map { [ $_, $L{$_}{all_us}, $L{$_}{check} ] } @modes;

my $r53_loop = $L{redlock5}{us} / $L{redlock3}{us};
my @r53_pg = map { sprintf('%.2f at %d client%s', $pgb{redlock5}{$_}{lat_ms} / $pgb{redlock3}{$_}{lat_ms}, $_, $_ == 1 ? '' : 's') } @clients;
my $r3s = $L{redlock3}{us} / $Ls->{us};
my $r5s = $L{redlock5}{us} / $Ls->{us};
my $rnd = sub { $L{$_[0]}{rounds} ? $L{$_[0]}{us} / $L{$_[0]}{rounds} : 0 };
# what one request after another would cost: every EVALSHA at single mode's
# cost per round trip
my $one_rt = $rnd->('single');
my $seq = sub { $L{$_[0]}{evalsha} * $one_rt };
my $ncores = `nproc` =~ s/\s+//r;
my $wait = sub { $L{$_[0]}{rounds} ? ($L{$_[0]}{us} - $L{$_[0]}{cpu}) / $L{$_[0]}{rounds} : 0 };
my $floor = sub { ($L{$_[0]}{cpu} + $L{$_[0]}{rcpu}) / $ncores };

my $load1 = BenchLib::loadavg();
my $node = $m{single}{node};
open my $fh, '>', $out or die;
print $fh <<"MD";
## 7. Deployment modes: single server, Redis Cluster, Redlock over 3 and 5 masters

Command: `bash bench/run.sh modes` (bench/modes.pl), ${secs} s per pgbench run,
$rounds rounds of $loop_n pairs per loop.
@{[ BenchLib::machine($node, $single) ]}
Load average (1/5/15 min) when this workload started: $load0; when it ended: $load1.

Every mode has its own PostgreSQL node whose postgresql.conf names its
servers; all servers are real redis-servers on 127.0.0.1, started for this
run (no persistence, the cluster without replicas). All nodes and servers run
side by side on the same @{[ `nproc` =~ s/\s+//r ]} cores. "Mode" is what
`redis_lock_status(name).mode` reported; "probe found on" is on how many of
the mode's servers a held lock's hash existed (a cluster keeps each lock on
the one master serving its hash slot; Redlock on every master).

@{[ BenchLib::table(['mode', 'setting', 'servers', 'mode reported', 'probe found on'], @setup_rows) ]}
Every lock is taken with a fixed 30 s lease (`redis_lock_acquire(name, '0', '30 s')`,
no watchdog) and released at once; nobody else wants it.

### pgbench: acquire + release per transaction

`$pgb{single}{$clients[0]}{cmd}` (`-c 4 -j 2` at 4 clients), one transaction =

```
SELECT redis_lock_acquire('b' || :client_id, '0', '30 s');
SELECT redis_lock_release('b' || :client_id);
```

so each client has a lock name of its own (in the cluster, those names hash
to slots of different masters). Ratios are to single mode at the same number
of clients. Check = transactions / acquires / releases / Redis errors from
`redis_lock_stats` over the run.

@{[ BenchLib::table(['clients', 'mode', 'tps', 'latency ms', 'tps / single', 'latency / single', 'acquire ms (pgbench -r)', 'release ms', 'Redis CPU µs/xact (all servers)', 'check'], @pg_rows) ]}
### In one backend: plpgsql loop of acquire + release pairs

`bench_pairs(name, n)`: `redis_lock_acquire(name, '0', '30 s')` then
`redis_lock_release(name)`, n = $loop_n times, one name, no client round
trips. $rounds rounds, the modes interleaved (order rotated each round),
after 500 warm-up pairs per backend; each mode's row is its median round
(by µs per pair), every figure from that same round. "EVALSHA per pair" sums
INFO commandstats over the mode's servers; "servers reached" counts those
that got any; their quotient is the number of rounds of round trips a pair
takes (in Redlock each round goes to every master at once). "µs per round"
= µs per pair ÷ rounds. Backend CPU from /proc/<pid>/schedstat; backend
waiting = µs per pair − backend CPU (off CPU: waiting for replies, or for a
core); Redis CPU = used_cpu_user + used_cpu_sys summed over the mode's
servers. "CPU ÷ wall" =
(backend + Redis CPU) ÷ wall time: how many of these processes were on a CPU
at once, on average. A client that sends one request and waits for its reply
before the next keeps it at or below 1 (backend and server take turns); above
1, requests to different servers were being worked on at the same time. It
cannot exceed the number of cores.

Anchors, on the single server with one redis-benchmark client
(`redis-benchmark -c 1 -n $rb_requests --csv ...`; µs per request = 1 / rate):
PING @{[ $f1->($rt{ping}) ]} µs, EVALSHA of lua/acquire.lua (fresh keys) @{[ $f1->($rt{acq}) ]} µs,
EVALSHA of lua/release.lua (held keys, as lockrate.pl) @{[ $f1->($rt{rel}) ]} µs;
"pair of EVALSHA" = acquire + release = @{[ $f1->($pair_rt) ]} µs, the raw Redis cost of
a single-node pair. redis-benchmark's own client work is part of these times,
so the anchors are loose: a pair can come out below one EVALSHA pair.

@{[ BenchLib::table(['mode', 'µs per pair', '÷ single', 'in PING round trips', 'in EVALSHA pairs', 'EVALSHA per pair', 'servers reached', 'rounds per pair', 'µs per round', 'backend CPU µs/pair', 'backend waiting µs/pair', 'Redis CPU µs/pair (all servers)', 'CPU ÷ wall'], @loop_rows) ]}
Every round (µs per pair; acquires / releases / Redis errors over the round,
each must equal $loop_n / $loop_n / 0):

@{[ BenchLib::table(['mode', 'µs per pair, rounds in run order', 'check per round'], @loop_detail) ]}
### What the numbers say

- Round trips. A single-node pair is two round trips: the acquire script,
  then the release script (measured: @{[ $f2->($L{single}{rounds}) ]} rounds single, @{[ $f2->($L{cluster}{rounds}) ]} cluster,
  where a lock lives on one master and costs the same two). A Redlock pair
  is also two rounds, each sent to all masters at once and waited for
  together: acquire on every master, then release on every master. (A fresh
  acquisition needs a third round, writing the fencing token back, only
  when the granting masters' counters were not in step; here they are.)
  (measured: @{[ $f2->($L{redlock3}{rounds}) ]} for 3 masters, @{[ $f2->($L{redlock5}{rounds}) ]} for 5; @{[ $f2->($L{redlock3}{evalsha}) ]} and @{[ $f2->($L{redlock5}{evalsha}) ]} EVALSHA per
  pair). If a round over N masters cost what one round trip costs, Redlock
  would take as long as single.
- Measured, in one backend: cluster @{[ $f2->($L{cluster}{us} / $Ls->{us}) ]}× single, redlock3 **@{[ $f2->($r3s) ]}×** single,
  redlock5 **@{[ $f2->($r5s) ]}×** single; per round @{[ $f1->($rnd->('single')) ]} µs single,
  @{[ $f1->($rnd->('redlock3')) ]} µs over 3 masters, @{[ $f1->($rnd->('redlock5')) ]} µs over 5. pgbench at 1 client:
  redlock3 @{[ $f2->($pgb{redlock3}{$clients[0]}{lat_ms} / $pgb{single}{$clients[0]}{lat_ms}) ]}×, redlock5 @{[ $f2->($pgb{redlock5}{$clients[0]}{lat_ms} / $pgb{single}{$clients[0]}{lat_ms}) ]}× single's latency (there the
  client round trips are part of every mode's time).
- 5 masters against 3: µs per pair redlock5 / redlock3 = **@{[ $f2->($r53_loop) ]}** in the loop;
  pgbench latency redlock5 / redlock3 = @{[ join(', ', @r53_pg) ]}. Requests
  sent one after another would make it 5 / 3 = 1.67; the ideal of parallel
  requests on idle hardware is 1.
- What grows with N is the work per round, even where the waiting does not:
  the backend writes, reads and parses N replies (backend CPU per pair:
  @{[ $f1->($Ls->{cpu}) ]} µs single, @{[ $f1->($L{redlock3}{cpu}) ]} redlock3, @{[ $f1->($L{redlock5}{cpu}) ]} redlock5) and N servers run the
  scripts (Redis CPU per pair, all servers: @{[ $f1->($Ls->{rcpu}) ]}, @{[ $f1->($L{redlock3}{rcpu}) ]}, @{[ $f1->($L{redlock5}{rcpu}) ]} µs). The
  backend and all N servers share this machine's $ncores cores, so a Redlock
  pair cannot take less than (backend + Redis CPU) ÷ $ncores = @{[ $f1->($floor->('redlock3')) ]} µs over 3
  masters and @{[ $f1->($floor->('redlock5')) ]} µs over 5; it took @{[ $f1->($L{redlock3}{us}) ]} and @{[ $f1->($L{redlock5}{us}) ]} µs, @{[ $f2->($L{redlock3}{us} / $floor->('redlock3')) ]}× and @{[ $f2->($L{redlock5}{us} / $floor->('redlock5')) ]}×
  that floor (the nearer 1, the more the CPU on this box, rather than
  waiting on round trips, sets the time). The backend's waiting per round:
  @{[ $f1->($wait->('single')) ]} µs single, @{[ $f1->($wait->('redlock3')) ]} µs over 3 masters, @{[ $f1->($wait->('redlock5')) ]} µs over 5.
- Overlap: CPU ÷ wall is @{[ $f2->($Ls->{busy}) ]} for single, where backend and server take
  turns, and @{[ $f2->($L{redlock3}{busy}) ]} for redlock3, @{[ $f2->($L{redlock5}{busy}) ]} for redlock5 (at most $ncores here): above 1
  only while requests to different masters are worked on at the same time.
  Sending the @{[ $f2->($L{redlock3}{evalsha}) ]} / @{[ $f2->($L{redlock5}{evalsha}) ]} EVALSHA of a pair one after another, each at
  single mode's cost per round trip (@{[ $f1->($one_rt) ]} µs), would take about @{[ $f1->($seq->('redlock3')) ]} / @{[ $f1->($seq->('redlock5')) ]} µs;
  measured @{[ $f1->($L{redlock3}{us}) ]} / @{[ $f1->($L{redlock5}{us}) ]} µs (@{[ $f2->($L{redlock3}{us} / $seq->('redlock3')) ]}× / @{[ $f2->($L{redlock5}{us} / $seq->('redlock5')) ]}× that estimate). With
  the masters on hosts of their own, as a Redlock deployment has them, their
  CPU leaves the client's machine and a round costs about the slowest
  master's round trip plus the backend's per-reply work; this single
  @{[ $ncores ]}-core box cannot show that.
- At @{[ $clients[-1] ]} clients pgbench, the backends and every server compete for the
  same $ncores cores, so throughput follows the CPU per transaction: the tps
  ratios to single there are a CPU cost ratio, not a latency one.
MD
close $fh;
BenchLib::progress("wrote %s", $out);
