# Workload 4: transaction-scope lock and the commit guard. pgbench
# (-M prepared), each client on its own row and lock name:
#   guard on   BEGIN; SELECT redis_xact_lock_acquire(name, '0');
#              UPDATE bench_rows ...; COMMIT;      (verify_on_commit = on)
#   guard off  the same with PGOPTIONS=-c redislock.verify_on_commit=off
#   no lock    BEGIN; UPDATE bench_rows ...; COMMIT;
# The COMMIT statement's own latency (pgbench -r) shows what the guard adds
# (one HEXISTS round trip) on top of the release at commit (one EVALSHA).
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use BenchLib;
use RedisLockTest;
use File::Basename qw(dirname);

my $out = shift // 'RESULTS-xact.md';
my $dir = dirname($out);
my @clients = BenchLib::clients();
my $secs = BenchLib::seconds();

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('bench_xact', $redis, 'max_connections' => 50);
my $tmp = $node->basedir;
$node->safe_psql('postgres', <<'SQL');
CREATE TABLE bench_rows(id int PRIMARY KEY, n bigint NOT NULL) WITH (fillfactor = 20);
INSERT INTO bench_rows SELECT g, 0 FROM generate_series(0, 99) g;
SQL

my $upd = "UPDATE bench_rows SET n = n + 1 WHERE id = :client_id;";
my $lock = BenchLib::script_file($tmp, 'xact_lock',
	"BEGIN;\nSELECT redis_xact_lock_acquire('bench_x' || :client_id::text, '0');\n$upd\nCOMMIT;\n");
my $nolock = BenchLib::script_file($tmp, 'xact_nolock', "BEGIN;\n$upd\nCOMMIT;\n");
my @variants = (
	[ 'guard on', $lock, {} ],
	[ 'guard off', $lock, { PGOPTIONS => '-c redislock.verify_on_commit=off' } ],
	[ 'no lock', $nolock, {} ],
);

my %res;
my %cmds;
for my $c (@clients)
{
	for my $v (@variants)
	{
		my ($label, $script, $env) = @$v;
		my $k0 = BenchLib::commandstats($redis);
		my $r = BenchLib::pgbench($node, $script, $c, env => $env);
		my $k1 = BenchLib::commandstats($redis);
		my $d = BenchLib::commandstats_delta($k0, $k1);
		$res{$label}{$c} = $r;
		$cmds{$label}{$c} = sprintf('%.2f / %.2f', ($d->{evalsha} // 0) / $r->{xacts}, ($d->{hexists} // 0) / $r->{xacts});
		BenchLib::progress("%-9s c=%-3d tps %8.1f lat %.3f ms commit %.3f ms", $label, $c, $r->{tps}, $r->{lat_ms},
			$r->{stmt}[-1][0]);
	}
}
my $stats = $node->safe_psql('postgres', 'SELECT acquires, releases, lost_locks, redis_errors FROM redis_lock_stats');

my @rows;
for my $c (@clients)
{
	my ($on, $off, $none) = map { $res{$_}{$c} } ('guard on', 'guard off', 'no lock');
	push @rows, [ $c,
		(map { sprintf('%.0f', $_->{tps}) } $on, $off, $none),
		(map { sprintf('%.3f', $_->{lat_ms}) } $on, $off, $none),
		(map { sprintf('%.3f', $_->{stmt}[-1][0]) } $on, $off, $none),
		sprintf('%.3f', $on->{stmt}[-1][0] - $off->{stmt}[-1][0]),
		sprintf('%.3f', $on->{lat_ms} - $off->{lat_ms}),
		sprintf('%.3f', $on->{stmt}[1][0]),
		$cmds{'guard on'}{$c}, $cmds{'guard off'}{$c} ];
}

my $dat = "$tmp/xact.dat";
open my $dfh, '>', $dat or die;
for my $c (@clients)
{
	print $dfh join(' ', $c, map({ $res{$_}{$c}{lat_ms} } 'guard on', 'guard off', 'no lock'),
		map({ $res{$_}{$c}{tps} } 'guard on', 'guard off', 'no lock')), "\n";
}
close $dfh;
my $png = "$dir/xact.png";
my $term = BenchLib::png_terminal(1200, 450);
my $have_png = BenchLib::gnuplot(<<"GP", $png);
$term
set output '$png'
set multiplot layout 1,2 title 'redislock: BEGIN; redis\\_xact\\_lock\\_acquire; UPDATE; COMMIT (pgbench -M prepared)'
set logscale x 2
set xtics (1,2,4,8,16,32)
set xlabel 'clients'
set grid
set key top left
set ylabel 'latency per transaction (ms)'
set title 'latency'
plot '$dat' u 1:2 w lp lw 2 t 'lock, commit guard on', '' u 1:3 w lp lw 2 t 'lock, commit guard off', '' u 1:4 w lp t 'no lock'
set ylabel 'transactions per second'
set title 'throughput'
plot '$dat' u 1:5 w lp lw 2 t 'lock, commit guard on', '' u 1:6 w lp lw 2 t 'lock, commit guard off', '' u 1:7 w lp t 'no lock'
unset multiplot
GP

open my $fh, '>', $out or die;
print $fh <<"MD";
## 4. Transaction-scope lock and the commit guard

Command: `bash bench/run.sh xact` (bench/xact.pl), ${secs} s per pgbench run.
@{[ BenchLib::machine($node, $redis) ]}

pgbench `$res{'guard on'}{$clients[0]}{cmd}` (`-c N -j 2` for N ≥ 2), each client on its own row
of a 100-row table and its own lock name:

- guard on: `BEGIN; SELECT redis_xact_lock_acquire('bench_x' || :client_id, '0'); UPDATE bench_rows SET n = n + 1 WHERE id = :client_id; COMMIT;`
- guard off: the same with `PGOPTIONS='-c redislock.verify_on_commit=off'`
- no lock: `BEGIN; UPDATE ...; COMMIT;`

At COMMIT the guard sends one HEXISTS per held lock (one pipelined round
trip), then the transaction-scope lock is released (one EVALSHA round trip),
with or without the guard. Latencies in ms; "COMMIT" is the COMMIT
statement's own latency from `pgbench -r`.

@{[ BenchLib::table(['clients', 'tps guard on', 'tps guard off', 'tps no lock', 'latency on', 'latency off', 'latency no lock', 'COMMIT on', 'COMMIT off', 'COMMIT no lock', 'guard cost per COMMIT (COMMIT on − off)', 'guard cost per transaction (latency on − off)', 'acquire statement (on)', 'EVALSHA / HEXISTS per xact, on', 'EVALSHA / HEXISTS per xact, off'], @rows) ]}
@{[ $have_png ? "![xact lock latency and throughput vs clients](xact.png)\n" : '' ]}
redis_lock_stats at the end (acquires | releases | lost_locks | redis_errors): `$stats`.
MD
close $fh;
BenchLib::progress("wrote %s", $out);
