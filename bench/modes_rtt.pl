# Workload 7b: deployment modes with an emulated network round trip.
# bench/modes.pl runs every Redis server on this machine with no network in
# between, so the CPU of N servers sets what a Redlock round costs. Here a
# userspace TCP delay proxy (test/lib/DelayProxy.pm, one process for all
# servers) sits between PostgreSQL and each redis-server and holds every chunk
# a fixed one-way delay D in each direction, so each request/reply pays an
# emulated round trip RTT = 2 D (Linux netem is not available here). The
# question: does a Redlock pair over N masters cost about the round trips of
# a single-server pair (requests to all masters sent at once and waited for
# together), or N times as many (one after another)?
#
#   single    one server                (redislock.url -> its proxy port)
#   redlock3  3 independent masters     (redislock.redlock_nodes -> proxy ports)
#   redlock5  5 independent masters     (redislock.redlock_nodes -> proxy ports)
# Redis Cluster is left out: cluster nodes announce their own ports (CLUSTER
# SLOTS, MOVED), so after the seed redislock would talk to them directly,
# around any proxy; and a cluster lock lives on one master, so it would cost
# single mode's round trips anyway.
#
# Measured:
#   1. PING with one redis-benchmark client: direct, through the proxy with
#      no delay, through the proxy with D: the delay really is added.
#   2. the plpgsql loop of bench/modes.pl (acquire + release pairs in one
#      backend), per mode, repeated with the proxy at D and at 0 (modes and
#      delays interleaved), median round: µs per pair, in RTTs, ratio to
#      single, the part added by the delay, EVALSHA rounds per pair, chunks
#      through the proxy, and what one-after-another requests would cost
#      (N × rounds × RTT).
# Reported as measured; nothing is asserted.
#
# Environment (defaults take about a minute):
#   REDISLOCK_BENCH_RTT_MS=1          emulated round trip in ms (D = half each way)
#   REDISLOCK_BENCH_RTT_LOOP=1000/RTT pairs per loop round (× REDISLOCK_BENCH_SCALE)
#   REDISLOCK_BENCH_ROUNDS=5          loop rounds per mode and delay
#   REDISLOCK_BENCH_RTT_PINGS=2000    redis-benchmark -n for the PING check
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use BenchLib;
use RedisLockTest;
use IPC::Run ();
use List::Util qw(sum max);
use Time::HiRes qw(time);

my $out = shift // 'RESULTS-modes_rtt.md';
my $rtt_ms = $ENV{REDISLOCK_BENCH_RTT_MS} // 1;
die "REDISLOCK_BENCH_RTT_MS must be a positive number\n" unless $rtt_ms =~ /^[\d.]+$/ && $rtt_ms > 0;
my $d_ms = $rtt_ms / 2;
my $rtt_us = $rtt_ms * 1e3;
my $loop_n = int(($ENV{REDISLOCK_BENCH_RTT_LOOP} // int(1000 / max(1, $rtt_ms))) * BenchLib::scale());
$loop_n = 50 if $loop_n < 50;
my $rounds = $ENV{REDISLOCK_BENCH_ROUNDS} // 5;
my $pings = $ENV{REDISLOCK_BENCH_RTT_PINGS} // 2000;
my $load0 = BenchLib::loadavg();

# ---- servers, and a proxy port in front of each
my $single = RedisLockTest::Redis->new;
my $rl3 = RedisLockTest::Redlock->new(n => 3);
my $rl5 = RedisLockTest::Redlock->new(n => 5);
my %pport;    # server port => proxy port
$pport{ $_->port } = RedisLockTest::free_port() for $single, $rl3->nodes, $rl5->nodes;

my ($pin, $pout, $perr) = ('', '', '');
my $pto = IPC::Run::timeout(60);
my $proxy = IPC::Run::start(
	[ 'perl', "$FindBin::Bin/../test/lib/DelayProxy.pm", $d_ms, map { "$pport{$_}:$_" } sort keys %pport ],
	\$pin, \$pout, \$perr, $pto);
my $proxy_pid = $proxy->{KIDS}[0]{PID};
END { if ($proxy) { $pin .= "quit\n"; eval { $pto->start(10); $proxy->finish }; eval { $proxy->kill_kill }; } }

# One command to the proxy, waits for its answer line (bounded).
sub proxy_cmd
{
	my ($cmd, $re) = @_;
	$pin .= "$cmd\n" if defined $cmd;
	$pto->start(60);
	$proxy->pump until $pout =~ s/^($re[^\n]*)\n//m;
	return $1;
}
proxy_cmd(undef, 'ready');
my $delay_now;
sub set_delay
{
	my ($ms) = @_;
	return if defined $delay_now && $delay_now == $ms;
	proxy_cmd("delay $ms", 'ok delay');
	$delay_now = $ms;
}
sub proxy_stats
{
	my $l = proxy_cmd('stats', 'stats ');
	my %s = (chunks => ($l =~ /chunks=(\d+)/)[0], late => ($l =~ /late_mean_us=([\d.]+)/)[0],
		late_max => ($l =~ /late_max_us=([\d.]+)/)[0]);
	$s{port}{$1} = $2 while $l =~ / (\d+):(\d+)/g;
	return \%s;
}
set_delay($d_ms);

my $via = sub { join(',', map { '127.0.0.1:' . $pport{ $_->port } } @_) };
my @modes = qw(single redlock3 redlock5);
my %m = (
	single => { servers => [$single], setting => "redislock.url = 'redis://127.0.0.1:$pport{$single->port}'",
		node => RedisLockTest::node('bench_rtt_single', undef,
			'redislock.url' => "redis://127.0.0.1:$pport{$single->port}", 'max_connections' => 20) },
	redlock3 => { servers => [ $rl3->nodes ], setting => "redislock.redlock_nodes = '" . $via->($rl3->nodes) . "'",
		node => RedisLockTest::node('bench_rtt_redlock3', undef,
			'redislock.redlock_nodes' => $via->($rl3->nodes), 'max_connections' => 20) },
	redlock5 => { servers => [ $rl5->nodes ], setting => "redislock.redlock_nodes = '" . $via->($rl5->nodes) . "'",
		node => RedisLockTest::node('bench_rtt_redlock5', undef,
			'redislock.redlock_nodes' => $via->($rl5->nodes), 'max_connections' => 20) },
);

# Each node is in the mode we think, and a held lock is on every server.
for my $mode (@modes)
{
	my $node = $m{$mode}{node};
	BenchLib::install_pairs_loop($node);
	($m{$mode}{reported}, $m{$mode}{found}) =
	  BenchLib::probe_mode($node, "bench:probe:$mode", @{ $m{$mode}{servers} });
	BenchLib::progress("%-8s mode %s, probe lock on %s servers", $mode, $m{$mode}{reported}, $m{$mode}{found});
}

# ---- 1. PING: direct, through the proxy at 0, through the proxy at D
{
	package BenchRTT::Port;
	sub new { bless { port => $_[1] }, $_[0] }
	sub port { $_[0]{port} }
}
my %ping;    # label => { us (1 / rate), p50, p99, late }
for my $case ([ 'direct', $single->port, undef ], [ 'proxy, no delay', $pport{ $single->port }, 0 ],
	[ "proxy, D = $d_ms ms", $pport{ $single->port }, $d_ms ])
{
	my ($label, $port, $delay) = @$case;
	set_delay($delay) if defined $delay;
	proxy_stats();
	my $r = BenchLib::redis_benchmark(BenchRTT::Port->new($port), 1, $pings, 1, 'PING');
	my $ps = proxy_stats();
	$ping{$label} = { us => 1e6 / $r->{rps}, p50 => $r->{p50_ms} * 1e3, p99 => $r->{p99_ms} * 1e3,
		late => defined $delay ? $ps->{late} : undef, chunks => $ps->{chunks} };
	BenchLib::progress("PING %-18s %.1f us (p50 %.1f)", $label, $ping{$label}{us}, $ping{$label}{p50});
}
my @ping_labels = ('direct', 'proxy, no delay', "proxy, D = $d_ms ms");
# the round trip the proxy really adds: PING at D minus PING at 0
my $rtt_meas = $ping{ $ping_labels[2] }{us} - $ping{ $ping_labels[1] }{us};

# ---- 2. plpgsql loop, one backend per mode; delays and modes interleaved
my %sess;
for my $mode (@modes)
{
	$sess{$mode} = RedisLockTest::Session->new($m{$mode}{node});
	$sess{$mode}->query("SELECT bench_pairs('bench:loop', 50)");    # warm up
}
my %loop;    # {delay}{mode} = [ {us, cpu, rcpu, pcpu, evalsha, used, chunks, late, check} ... ]
my $t_loop0 = time;
for my $round (1 .. $rounds)
{
	my @delays = $round % 2 ? ($d_ms, 0) : (0, $d_ms);
	for my $delay (@delays)
	{
		set_delay($delay);
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
			my $p0 = BenchLib::cpu_ns($proxy_pid);
			proxy_stats();
			my $us = $s->query("SELECT bench_pairs('bench:loop', $loop_n)");
			my $ps = proxy_stats();
			my $p1 = BenchLib::cpu_ns($proxy_pid);
			my $c1 = BenchLib::cpu_ns($s->pid);
			my $r1 = sum(map { BenchLib::redis_cpu($_) } @srv);
			my @k1 = map { BenchLib::commandstats($_) } @srv;
			my $st1 = BenchLib::lock_counters($node);
			my @ev = map { (BenchLib::commandstats_delta($k0[$_], $k1[$_])->{evalsha} // 0) } 0 .. $#srv;
			# chunks the proxy forwarded on this mode's ports (both directions)
			my $chunks = sum(map { $ps->{port}{ $pport{ $_->port } } // 0 } @srv);
			push @{ $loop{$delay}{$mode} }, {
				us => $us, cpu => ($c1 - $c0) / 1e3 / $loop_n, rcpu => ($r1 - $r0) * 1e6 / $loop_n,
				pcpu => ($p1 - $p0) / 1e3 / $loop_n, evalsha => sum(@ev) / $loop_n,
				used => scalar(grep { $_ > 0 } @ev), chunks => $chunks / $loop_n, late => $ps->{late},
				check => sprintf('%d / %d / %d', $st1->{acquires} - $st0->{acquires},
					$st1->{releases} - $st0->{releases}, $st1->{errors} - $st0->{errors}),
			};
			BenchLib::progress("round %d D=%-4s %-8s %8.1f us/pair, EVALSHA/pair %.2f on %d, chunks/pair %.2f",
				$round, $delay, $mode, $us, $loop{$delay}{$mode}[-1]{evalsha}, $loop{$delay}{$mode}[-1]{used},
				$loop{$delay}{$mode}[-1]{chunks});
		}
	}
}
my $t_loop = time - $t_loop0;
$_->close for values %sess;

my %L;    # {delay}{mode}: the median round by µs per pair
for my $delay ($d_ms, 0)
{
	for my $mode (@modes)
	{
		my @r = @{ $loop{$delay}{$mode} };
		my @by_us = sort { $a->{us} <=> $b->{us} } @r;
		my $l = $L{$delay}{$mode} = { %{ $by_us[ $#by_us / 2 ] } };
		$l->{all_us} = join(', ', map { sprintf('%.1f', $_->{us}) } @r);
		$l->{check} = join('; ', map { $_->{check} } @r);
		$l->{rounds} = $l->{used} ? $l->{evalsha} / $l->{used} : 0;
	}
}
my ($LD, $L0) = ($L{$d_ms}, $L{0});

# ---- results
my $f1 = sub { sprintf('%.1f', $_[0]) };
my $f2 = sub { sprintf('%.2f', $_[0]) };
my $nsrv = sub { scalar @{ $m{ $_[0] }{servers} } };
my $added = sub { $LD->{ $_[0] }{us} - $L0->{ $_[0] }{us} };
# one after another: every EVALSHA its own round trip
my $serial = sub { $nsrv->($_[0]) * $LD->{ $_[0] }{rounds} * $rtt_us };

my @setup_rows = map {
	[ $_, '`' . $m{$_}{setting} . '`', $nsrv->($_), $m{$_}{reported}, $m{$_}{found} ]
} @modes;
my @ping_rows = map {
	my $p = $ping{$_};
	[ $_, $f1->($p->{us}), $f1->($p->{p50}), $f1->($p->{p99}), $f1->($p->{us} - $ping{direct}{us}),
	  defined $p->{late} ? $f1->($p->{late}) : '—' ]
} @ping_labels;

my $sD = $LD->{single};
my @main_rows = map {
	my ($l, $l0) = ($LD->{$_}, $L0->{$_});
	[ $_, $nsrv->($_), $f1->($l->{us}), $f2->($l->{us} / $rtt_us), $f2->($l->{us} / $sD->{us}),
	  $f1->($l0->{us}), $f1->($added->($_)), $f2->($added->($_) / $rtt_meas), $f2->($l->{rounds}),
	  $f1->($serial->($_)), $f2->($serial->($_) / $rtt_us), $f2->($l->{us} / $serial->($_)) ]
} @modes;
my @cpu_rows = map {
	my $l = $LD->{$_};
	[ $_, $f2->($l->{evalsha}), $l->{used}, $f2->($l->{chunks}), $f1->($l->{cpu}), $f1->($l->{rcpu}),
	  $f1->($l->{pcpu}), $f1->($l->{late}) ]
} @modes;
my @detail = map {
	my $mode = $_;
	map { [ $mode, $_ ? "$_ ms" : '0', $L{$_}{$mode}{all_us}, $L{$_}{$mode}{check} ] } ($d_ms, 0)
} @modes;

my $r53 = $LD->{redlock5}{us} / $LD->{redlock3}{us};
my $r53a = $added->('redlock5') / $added->('redlock3');
my $load1 = BenchLib::loadavg();
my $node = $m{single}{node};
my $ncores = `nproc` =~ s/\s+//r;
my $rtt_txt = "$rtt_ms ms";

open my $fh, '>', $out or die;
print $fh <<"MD";
## 7b. Deployment modes with an emulated network round trip (single, Redlock over 3 and 5 masters)

Command: `bash bench/run.sh modes_rtt` (bench/modes_rtt.pl, proxy test/lib/DelayProxy.pm),
REDISLOCK_BENCH_RTT_MS=$rtt_ms, $rounds rounds of $loop_n pairs per loop, per mode and per delay
(loops took @{[ sprintf('%.0f', $t_loop) ]} s).
@{[ BenchLib::machine($node, $single) ]}
Load average (1/5/15 min) when this workload started: $load0; when it ended: $load1.

**The network round trip here is emulated, not real**: every server is a
redis-server on 127.0.0.1 of this one machine, and a userspace TCP proxy
written in Perl (test/lib/DelayProxy.pm, one process for all servers, a select()
loop and a first-in-first-out timer queue) sits in front of each of them. It
holds every chunk it reads, from either side, for a fixed one-way delay
D = $d_ms ms before writing it on, keeping the order per connection: each
request/reply pays an emulated round trip RTT = 2 D = $rtt_txt on top of what
it costs without the proxy (Linux netem, the usual tool, is not available on
this kernel). PostgreSQL's settings name the proxy ports; the servers, the
proxy, the backends all share the same $ncores cores. Redis Cluster is not
measured: cluster nodes announce their own ports (CLUSTER SLOTS, MOVED), so
redislock would reach them around the proxy; and a cluster lock lives on one
master, so its pair is single mode's two round trips anyway (bench/modes.pl
measured 2.00 rounds per pair for it).

@{[ BenchLib::table(['mode', 'setting (proxy ports)', 'servers', 'mode reported', 'probe found on'], @setup_rows) ]}
### The proxy adds the delay

One redis-benchmark client, PING, on the single server
(`redis-benchmark -c 1 -n $pings --csv PING`; µs per request = 1 / rate).
"late" = how long after its due time the proxy wrote a chunk, on average
(timer wake-up and scheduling on this box).

@{[ BenchLib::table(['path', 'µs per PING', 'p50 µs', 'p99 µs', 'added to direct µs', 'proxy late µs/chunk'], @ping_rows) ]}
So the proxy with D = $d_ms ms adds **@{[ $f1->($rtt_meas) ]} µs** per round trip over the same
proxy without delay (nominal $rtt_us µs; the rest is the proxy's timer
overshoot and wake-ups); the proxy without delay costs @{[ $f1->($ping{$ping_labels[1]}{us} - $ping{direct}{us}) ]} µs per round
trip over direct. Below, "RTT" is the nominal $rtt_us µs and "measured RTT"
is this @{[ $f1->($rtt_meas) ]} µs.

### Acquire + release in one backend, through the proxy

The plpgsql loop of bench/modes.pl: `redis_lock_acquire(name, '0', '30 s')`
then `redis_lock_release(name)`, n = $loop_n times, one name, no client
round trips; fixed 30 s lease, no watchdog, uncontended. $rounds rounds; in each,
the proxy at D = $d_ms ms and at 0 (which one first alternates), the modes in
rotated order, after 50 warm-up pairs per backend; each row is the median
round (by µs per pair) at that delay. "added by the delay" = µs per pair at D
− µs per pair at 0 (same proxy, same path): the waiting the emulated network
causes, and "÷ measured RTT" says how many round trips' worth that is.
"Rounds per pair" = EVALSHA per pair ÷ servers reached (INFO commandstats).
"Serial" is what an implementation sending to the N masters one after
another would wait for the network alone: N × rounds × RTT.

@{[ BenchLib::table(['mode', 'N', 'µs per pair at D', 'in RTTs', '÷ single', 'µs per pair at 0', 'added by the delay µs', '÷ measured RTT', 'rounds per pair', 'serial N × rounds × RTT µs', 'serial in RTTs', 'measured ÷ serial'], @main_rows) ]}
Where the time goes at D (the median round above). Chunks through the proxy
per pair count both directions on the mode's proxy ports (a request and its
reply are 2 chunks, so 2 × EVALSHA when each goes in one piece): proof that
the traffic went through the proxy. Backend CPU from /proc/<pid>/schedstat,
Redis CPU = used_cpu_user + used_cpu_sys over the mode's servers, proxy CPU
of the proxy process.

@{[ BenchLib::table(['mode', 'EVALSHA per pair', 'servers reached', 'proxy chunks per pair', 'backend CPU µs/pair', 'Redis CPU µs/pair', 'proxy CPU µs/pair', 'proxy late µs/chunk'], @cpu_rows) ]}
Every round (µs per pair, in run order; acquires / releases / Redis errors
per round, each must be $loop_n / $loop_n / 0):

@{[ BenchLib::table(['mode', 'D', 'µs per pair, rounds in run order', 'check per round'], @detail) ]}
### What the numbers say

- A pair is 2 rounds in every mode (measured @{[ join(', ', map { $f2->($LD->{$_}{rounds}) . " $_" } @modes) ]}):
  acquire, then release; in Redlock each round goes to all N masters at once.
  With the emulated $rtt_txt round trip a pair costs **@{[ $f2->($LD->{single}{us} / $rtt_us) ]} RTT single,
  @{[ $f2->($LD->{redlock3}{us} / $rtt_us) ]} RTT redlock3, @{[ $f2->($LD->{redlock5}{us} / $rtt_us) ]} RTT redlock5** (@{[ $f1->($LD->{single}{us}) ]}, @{[ $f1->($LD->{redlock3}{us}) ]}, @{[ $f1->($LD->{redlock5}{us}) ]} µs):
  redlock3 @{[ $f2->($LD->{redlock3}{us} / $sD->{us}) ]}× single, redlock5 @{[ $f2->($LD->{redlock5}{us} / $sD->{us}) ]}× single, redlock5 / redlock3 = **@{[ $f2->($r53) ]}**.
- The part the delay adds: @{[ $f1->($added->('single')) ]} µs single, @{[ $f1->($added->('redlock3')) ]} redlock3, @{[ $f1->($added->('redlock5')) ]} redlock5,
  i.e. @{[ $f2->($added->('single') / $rtt_meas) ]}, @{[ $f2->($added->('redlock3') / $rtt_meas) ]} and @{[ $f2->($added->('redlock5') / $rtt_meas) ]} measured round trips (redlock5 / redlock3 =
  @{[ $f2->($r53a) ]}). Parallel requests wait 2 round trips per pair whatever N is;
  one after another they would wait 2 N: @{[ $f2->($serial->('redlock3') / $rtt_us) ]} RTT (@{[ $f1->($serial->('redlock3')) ]} µs) for 3 masters and
  @{[ $f2->($serial->('redlock5') / $rtt_us) ]} RTT (@{[ $f1->($serial->('redlock5')) ]} µs) for 5, before any CPU cost; measured
  @{[ $f2->($LD->{redlock3}{us} / $serial->('redlock3')) ]}× and @{[ $f2->($LD->{redlock5}{us} / $serial->('redlock5')) ]}× that.
- What grows with N is the per-round work, as in bench/modes.pl: without
  delay the pair costs @{[ $f1->($L0->{single}{us}) ]} / @{[ $f1->($L0->{redlock3}{us}) ]} / @{[ $f1->($L0->{redlock5}{us}) ]} µs (single / redlock3 / redlock5,
  through the proxy; its chunks are part of that CPU on this box), which the
  pair at D carries on top of the round trips. That difference is CPU of
  the backend, the N servers and the proxy on $ncores shared cores, not
  network waiting; with real masters on hosts of their own most of it leaves
  the client's machine.
- This is an emulation on one machine: the delay is a userspace proxy's
  timer (it overshoots: @{[ $f1->($rtt_meas) ]} µs added per PING for a nominal $rtt_us),
  there is no bandwidth limit, loss or jitter of a real network, and the
  masters are all equally far away (a real Redlock round waits for the
  slowest master of the quorum it needs).
MD
close $fh;
BenchLib::progress("wrote %s", $out);
