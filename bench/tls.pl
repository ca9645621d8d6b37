# TLS against plain TCP, on one redis-server that listens on both (the same
# server, so the difference is the transport only):
#   pair        acquire + release pairs in a plpgsql loop, 1 session
#               (µs per pair, and backend CPU per pair), rounds alternating
#   throughput  pgbench, 8 clients, each its own lock name (pairs per second)
#   connect     a new connection for every pair (a setting bumped in the
#               loop makes the session reconnect): connect + setup + pair;
#               the difference TLS - plain is the handshake's cost
# Ratios TLS / plain are reported; medians over the rounds.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use BenchLib;
use RedisLockTest;

my $out = shift // 'RESULTS-tls.md';
my $n = int(($ENV{REDISLOCK_BENCH_TLS_LOOP} // 5000) * BenchLib::scale());
my $nconn = int(500 * BenchLib::scale());
my $rounds = $ENV{REDISLOCK_BENCH_ROUNDS} // 5;
my $clients = 8;

my $tls = RedisLockTest::TLS->new;
my $redis = RedisLockTest::Redis->new(tls => $tls, tls_plain_port => 1);
my %url = (plain => 'redis://127.0.0.1:' . $redis->plain_port, tls => $redis->url);
my $node = RedisLockTest::node('bench_tls', $redis, 'redislock.tls_ca_file' => $tls->ca_file);
$node->safe_psql('postgres', <<'SQL');
CREATE FUNCTION bench_pairs(lockname text, n int, reconnect bool) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
    FOR i IN 1 .. n LOOP
        IF reconnect THEN
            PERFORM set_config('redislock.tls_server_name', '', false);
        END IF;
        IF NOT redis_lock_acquire(lockname, '0', '30 s') THEN RAISE EXCEPTION 'not acquired'; END IF;
        IF NOT redis_lock_release(lockname) THEN RAISE EXCEPTION 'not released'; END IF;
    END LOOP;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / n;
END $$;
SQL

my $s = RedisLockTest::Session->new($node);
my $pid = $s->pid;
my %r;    # {test}{transport} = [ values ]
for my $round (1 .. $rounds)
{
	for my $t (qw(plain tls))
	{
		$s->query("SET redislock.url = '$url{$t}'");
		$s->query("SELECT bench_pairs('bench:tls:warm', 200, false)");
		my $c0 = BenchLib::cpu_ns($pid);
		my $us = $s->query("SELECT bench_pairs('bench:tls:pair', $n, false)");
		my $cpu = (BenchLib::cpu_ns($pid) - $c0) / 1e3 / $n;
		my $cus = $s->query("SELECT bench_pairs('bench:tls:conn', $nconn, true)");
		push @{ $r{pair}{$t} }, $us;
		push @{ $r{cpu}{$t} }, $cpu;
		push @{ $r{connect}{$t} }, $cus;

		my $script = BenchLib::script_file($node->basedir, "tls_$t", <<'SQL');
SELECT redis_lock_acquire('bench_tls_c' || :client_id::text, '0', '30 s');
SELECT redis_lock_release('bench_tls_c' || :client_id::text);
SQL
		my $pg = BenchLib::pgbench($node, $script, $clients,
			env => { PGOPTIONS => "-c redislock.url=$url{$t}" });
		push @{ $r{throughput}{$t} }, $pg->{tps};
		BenchLib::progress("round %d %-5s pair %.1f us (cpu %.1f), connect+pair %.1f us, %d clients %.0f pairs/s",
			$round, $t, $us, $cpu, $cus, $clients, $pg->{tps});
	}
}

sub median
{
	my @v = sort { $a <=> $b } @_;
	return $v[ int(@v / 2) ];
}

my %m = map { my $k = $_; $k => { map { $_ => median(@{ $r{$k}{$_} }) } qw(plain tls) } } keys %r;
my $pair_ratio = $m{pair}{tls} / $m{pair}{plain};
my $handshake = $m{connect}{tls} - $m{pair}{tls} - ($m{connect}{plain} - $m{pair}{plain});

open my $fh, '>', $out or die "$out: $!";
printf $fh <<'EOT',
## 9. TLS against plain TCP

Command: `bash bench/run.sh tls` (bench/tls.pl) — one redis-server listening on a plain and a TLS
port (the same server, so only the transport differs), loopback; medians of
%d rounds alternating plain and TLS. %s

| | plain | TLS | TLS / plain |
|---|---|---|---|
| acquire+release pair, 1 session (µs) | %.1f | %.1f | **%.2f×** |
| backend CPU per pair (µs) | %.1f | %.1f | %.2f× |
| pairs/s, %d clients (pgbench, own names) | %.0f | %.0f | %.2f× |
| new connection + pair (µs) | %.1f | %.1f | %.2f× |

**Target: TLS ≤ 1.25× plain per acquire+release pair at 1 session once connected — %s** (%.2f×, median of the rounds).

Each round's ratio, TLS pair / plain pair of the same round: %s (this 2-core
VM is noisy: read the spread with the median).

The handshake, measured apart: a new connection costs %.0f µs more over TLS
than over plain TCP (connect, TLS 1.3 handshake with ECDSA P-256 certificate
verification, setup round trip; "new connection + pair" minus "pair", TLS
minus plain). A backend pays it once per connection: connections are kept
for the session's life.
EOT
	$rounds, BenchLib::machine($node, $redis),
	$m{pair}{plain}, $m{pair}{tls}, $pair_ratio,
	$m{cpu}{plain}, $m{cpu}{tls}, $m{cpu}{tls} / $m{cpu}{plain},
	$clients, $m{throughput}{plain}, $m{throughput}{tls}, $m{throughput}{tls} / $m{throughput}{plain},
	$m{connect}{plain}, $m{connect}{tls}, $m{connect}{tls} / $m{connect}{plain},
	$pair_ratio <= 1.25 ? 'met' : 'missed', $pair_ratio,
	join(', ', map { sprintf('%.2f×', $r{pair}{tls}[$_] / $r{pair}{plain}[$_]) } 0 .. $rounds - 1),
	$handshake;
close $fh;
Test::More::ok(1, 'tls bench done');
Test::More::done_testing();
