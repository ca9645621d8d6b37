# Semaphores, expiring permits and latches against the exclusive lock.
# plpgsql loops in one backend (no client round trips), each a pair of calls:
#   lock       redis_lock_acquire(n, '0') + redis_lock_release(n)     (anchor)
#   semaphore  redis_semaphore_acquire(n, 1, '0') + redis_semaphore_release(n)
#   permit     redis_permit_acquire(n, '0') + redis_permit_release(n, id)
#   latch      redis_latch_try_set_count(n, 1) + redis_latch_count_down(n)
# watchdog leases, several rounds alternating; medians and ratios against
# the lock pair of the same round.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use BenchLib;
use RedisLockTest;

my $out = shift // 'RESULTS-semaphore.md';
my $n = int(($ENV{REDISLOCK_BENCH_SEMAPHORE_LOOP} // 4000) * BenchLib::scale());
my $rounds = $ENV{REDISLOCK_BENCH_ROUNDS} // 3;

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('bench_semaphore', $redis);
$node->safe_psql('postgres', <<'SQL');
CREATE FUNCTION bench_loop(kind text, n int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz := clock_timestamp();
    id text;
BEGIN
    FOR i IN 1 .. n LOOP
        CASE kind
        WHEN 'lock' THEN
            IF NOT redis_lock_acquire('b:lock', '0') OR NOT redis_lock_release('b:lock') THEN
                RAISE EXCEPTION 'lock pair failed';
            END IF;
        WHEN 'semaphore' THEN
            IF NOT redis_semaphore_acquire('b:sem', 1, '0') OR NOT redis_semaphore_release('b:sem') THEN
                RAISE EXCEPTION 'semaphore pair failed';
            END IF;
        WHEN 'permit' THEN
            id := redis_permit_acquire('b:permit', '0');
            IF id IS NULL OR NOT redis_permit_release('b:permit', id) THEN
                RAISE EXCEPTION 'permit pair failed';
            END IF;
        WHEN 'latch' THEN
            IF NOT redis_latch_try_set_count('b:latch', 1) OR redis_latch_count_down('b:latch') <> 0 THEN
                RAISE EXCEPTION 'latch pair failed';
            END IF;
        END CASE;
    END LOOP;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / n;
END $$;
SELECT redis_semaphore_try_set_permits('b:sem', 1), redis_permit_try_set_permits('b:permit', 1);
SQL
my $s = RedisLockTest::Session->new($node);
my @kinds = qw(lock semaphore permit latch);
my $r = BenchLib::pair_rounds($s, $redis, \@kinds, $n, $rounds);
my %label = (lock => 'exclusive lock (anchor)', semaphore => 'semaphore, 1 permit',
	permit => 'expiring permit', latch => 'latch set + count down');
my ($rows, $med) = BenchLib::pair_rows($r, \@kinds, \%label, 'lock');
my @rows = @$rows;
my %med = %$med;

open my $fh, '>', $out or die;
print $fh <<"MD";
## 11. Semaphores, expiring permits and latches

Command: `bash bench/run.sh semaphore` (bench/semaphore.pl).
@{[ BenchLib::machine($node, $redis) ]}

One session, plpgsql loop of $n pairs per kind (acquire with wait '0' and a
watchdog lease, then release; for the latch, set a count of 1 and count it
down); $rounds rounds, alternating; the median is shown with each round's
value. The ratio is against the exclusive-lock pair of the same round (median
of the per-round ratios). "Redis commands" counts the commands the scripts
run inside Redis as well.

@{[ BenchLib::table(BenchLib::pair_columns('lock'), @rows) ]}
A semaphore pair costs @{[ sprintf('%.2f', $med{semaphore}{ratio}) ]}× an exclusive pair and an expiring-permit pair
@{[ sprintf('%.2f', $med{permit}{ratio}) ]}×: one round trip each way, like the exclusive lock. The
semaphore scripts also keep the per-owner record that gives permits back
when a session or server dies (a hash field and a zset member, written on
acquire and removed on release), and both release scripts publish the new
total, as Redisson's do.
MD
close $fh;
BenchLib::progress("wrote %s", $out);
