# Workload 6: memory. A backend's memory over 100,000 acquire + release
# cycles (distinct names, watchdog mode, plpgsql loop in chunks): VmRSS and
# RssAnon from /proc/<pid>/status, and the sum of
# pg_backend_memory_contexts.total_bytes, at 0, 10k, 50k and 100k cycles.
# And shared memory per lock entry: pg_shmem_allocations 'redislock' at two
# redislock.max_locks settings.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use BenchLib;
use RedisLockTest;

my $out = shift // 'RESULTS-memory.md';
my $cycles = int(($ENV{REDISLOCK_BENCH_MEMORY_CYCLES} // 100000) * BenchLib::scale());
my @marks = grep { $_ <= $cycles } map { int($_ * $cycles / 100000) } (10000, 50000, 100000);

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('bench_memory', $redis);
$node->safe_psql('postgres', <<'SQL');
CREATE FUNCTION bench_cycles(first bigint, n int, lease interval) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN first .. first + n - 1 LOOP
        IF NOT redis_lock_acquire('bench:mem:' || i, '0', lease) THEN RAISE EXCEPTION 'not acquired'; END IF;
        IF NOT redis_lock_release('bench:mem:' || i) THEN RAISE EXCEPTION 'not released'; END IF;
    END LOOP;
END $$;
SQL

my @rows;
my %series;
for my $lease ('NULL', "'30 s'")
{
	my $s = RedisLockTest::Session->new($node);
	my $pid = $s->pid;
	my $measure = sub {
		my ($done) = @_;
		my $ctx = $s->query('SELECT sum(total_bytes) FROM pg_backend_memory_contexts');
		my $st = BenchLib::proc_status($pid);
		my $locks = $s->query('SELECT count(*) FROM redis_locks');
		push @{ $series{$lease} }, [ $done, $st->{VmRSS}, $st->{RssAnon}, $ctx, $locks, $st->{RssShmem} ];
		BenchLib::progress("lease %-6s %6d cycles: VmRSS %d kB, RssAnon %d kB, contexts %d bytes", $lease, $done,
			$st->{VmRSS}, $st->{RssAnon}, $ctx);
	};
	# warm-up: plan caches, connection, hash table, first allocations
	$s->query("SELECT bench_cycles(-1000, 1000, $lease)");
	$measure->(0);
	shift @{ $series{$lease} };    # the first measurement warms up its own queries
	$measure->(0);
	my $done = 0;
	my $chunk = 5000 < $marks[0] ? 5000 : $marks[0];
	for my $m (@marks)
	{
		while ($done < $m)
		{
			my $k = $m - $done < $chunk ? $m - $done : $chunk;
			$s->query("SELECT bench_cycles($done, $k, $lease)");
			$done += $k;
		}
		$measure->($done);
	}
	$s->close;
}
for my $lease ('NULL', "'30 s'")
{
	my $base = $series{$lease}[0];
	for my $p (@{ $series{$lease} })
	{
		push @rows, [ $lease eq 'NULL' ? 'NULL (watchdog)' : '30 s', $p->[0], $p->[1], $p->[1] - $base->[1],
			$p->[5], $p->[2], $p->[2] - $base->[2], $p->[3], $p->[3] - $base->[3], $p->[4] ];
	}
}
my $ctx_growth = 0;
my $anon_growth = 0;
for my $lease (keys %series)
{
	my $b = $series{$lease}[0];
	my $e = $series{$lease}[-1];
	$ctx_growth = $e->[3] - $b->[3] if abs($e->[3] - $b->[3]) > abs($ctx_growth);
	$anon_growth = $e->[2] - $b->[2] if abs($e->[2] - $b->[2]) > abs($anon_growth);
}
my $verdict = ($ctx_growth <= 0 && $anon_growth <= 64) ? 'met' : 'MISSED';

# shared memory per lock entry
my @shm;
for my $max (4096, 16384)
{
	$node->append_conf('postgresql.conf', "redislock.max_locks = $max\n");
	$node->restart;
	my $size = $node->safe_psql('postgres', "SELECT size FROM pg_shmem_allocations WHERE name = 'redislock'");
	push @shm, [ $max, $size ];
}
my $per = ($shm[1][1] - $shm[0][1]) / ($shm[1][0] - $shm[0][0]);
my $fixed = $shm[0][1] - $per * $shm[0][0];

open my $fh, '>', $out or die;
print $fh <<"MD";
## 6. Memory

Command: `bash bench/run.sh memory` (bench/memory.pl).
@{[ BenchLib::machine($node, $redis) ]}

One session per lease kind runs `bench_cycles(first, n, lease)`, a plpgsql
loop of `redis_lock_acquire('bench:mem:' || i, '0', lease)` +
`redis_lock_release(...)` on a new name every cycle, in chunks of 5,000
(after a 1,000-cycle warm-up). After $marks[0], $marks[1] and $marks[-1] cycles the same session
reads `sum(total_bytes)` of `pg_backend_memory_contexts` and the harness reads
`/proc/<pid>/status` (VmRSS = all resident pages, including the shared memory
the backend touched; RssShmem = the part of it that is shared memory, which grows as the backend
first touches pages of shared buffers and of the redislock table, and is not
the backend's own; RssAnon = the backend's private heap). Sizes in kB
except the contexts (bytes); Δ is against the 0-cycle row; "held" is
`redis_locks` rows at that point.

@{[ BenchLib::table(['lease', 'cycles', 'VmRSS', 'Δ VmRSS', 'RssShmem', 'RssAnon', 'Δ RssAnon', 'contexts bytes', 'Δ contexts bytes', 'held'], @rows) ]}
**Target: zero growth in backend memory — $verdict** (largest change after warm-up: memory contexts @{[ $ctx_growth ]} bytes, RssAnon @{[ $anon_growth ]} kB over $marks[-1] cycles).

Shared memory: `pg_shmem_allocations` size of `redislock`:

@{[ BenchLib::table(['redislock.max_locks', 'bytes'], @shm) ]}
i.e. @{[ sprintf('%.0f', $per) ]} bytes per lock entry (plus @{[ sprintf('%.0f', $fixed) ]} bytes fixed);
with the default 4096 entries, @{[ sprintf('%.1f', $shm[0][1] / 1048576) ]} MiB. An entry
holds a name of up to 512 bytes, the owner id and the lock's state.
MD
close $fh;
BenchLib::progress("wrote %s", $out);
