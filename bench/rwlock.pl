# Read-write locks and multi-locks against the exclusive lock. plpgsql loops
# in one backend (no client round trips), each a pair of calls:
#   lock        redis_lock_acquire(n, '0') + redis_lock_release(n)   (anchor)
#   read        redis_read_lock_acquire + redis_read_lock_release
#   write       redis_write_lock_acquire + redis_write_lock_release
#   all5        redis_lock_acquire_all(5 names, '0') + redis_lock_release_all()
#   5 locks     five redis_lock_acquire + redis_lock_release_all() (what all5
#               replaces)
# watchdog leases, several rounds alternating; medians and ratios against
# the lock pair of the same round.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use BenchLib;
use RedisLockTest;

my $out = shift // 'RESULTS-rwlock.md';
my $n = int(($ENV{REDISLOCK_BENCH_RWLOCK_LOOP} // 4000) * BenchLib::scale());
my $rounds = $ENV{REDISLOCK_BENCH_ROUNDS} // 3;

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('bench_rwlock', $redis);
$node->safe_psql('postgres', <<'SQL');
CREATE FUNCTION bench_loop(kind text, n int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz := clock_timestamp();
    names text[] := ARRAY['b:1', 'b:2', 'b:3', 'b:4', 'b:5'];
BEGIN
    FOR i IN 1 .. n LOOP
        CASE kind
        WHEN 'lock' THEN
            IF NOT redis_lock_acquire('b:lock', '0') OR NOT redis_lock_release('b:lock') THEN
                RAISE EXCEPTION 'lock pair failed';
            END IF;
        WHEN 'read' THEN
            IF NOT redis_read_lock_acquire('b:read', '0') OR NOT redis_read_lock_release('b:read') THEN
                RAISE EXCEPTION 'read pair failed';
            END IF;
        WHEN 'write' THEN
            IF NOT redis_write_lock_acquire('b:write', '0') OR NOT redis_write_lock_release('b:write') THEN
                RAISE EXCEPTION 'write pair failed';
            END IF;
        WHEN 'all5' THEN
            IF NOT redis_lock_acquire_all(names, '0') OR redis_lock_release_all() <> 5 THEN
                RAISE EXCEPTION 'all5 failed';
            END IF;
        WHEN 'each5' THEN
            FOR j IN 1 .. 5 LOOP
                IF NOT redis_lock_acquire(names[j], '0') THEN RAISE EXCEPTION 'each5 failed'; END IF;
            END LOOP;
            IF redis_lock_release_all() <> 5 THEN RAISE EXCEPTION 'each5 release failed'; END IF;
        END CASE;
    END LOOP;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / n;
END $$;
SQL
my $s = RedisLockTest::Session->new($node);
my @kinds = qw(lock read write all5 each5);
my $r = BenchLib::pair_rounds($s, $redis, \@kinds, $n, $rounds);
my %label = (lock => 'exclusive lock (anchor)', read => 'read lock', write => 'write lock',
	all5 => 'redis_lock_acquire_all, 5 names', each5 => '5 × redis_lock_acquire');
my ($rows, $med) = BenchLib::pair_rows($r, \@kinds, \%label, 'lock');
my @rows = @$rows;
my %med = %$med;

open my $fh, '>', $out or die;
print $fh <<"MD";
## 10. Read-write locks and multi-locks

Command: `bash bench/run.sh rwlock` (bench/rwlock.pl).
@{[ BenchLib::machine($node, $redis) ]}

One session, plpgsql loop of $n pairs (acquire with wait '0', watchdog lease,
then release) per kind; $rounds rounds, alternating; the median is shown with
each round's value. The ratio is against the exclusive-lock pair of the same
round (median of the per-round ratios). "Redis commands" counts the
commands the scripts run inside Redis as well.

@{[ BenchLib::table(BenchLib::pair_columns('lock'), @rows) ]}
A read pair costs @{[ sprintf('%.2f', $med{read}{ratio}) ]}× an exclusive pair and a write pair
@{[ sprintf('%.2f', $med{write}{ratio}) ]}×: one round trip each way, like the exclusive lock; the
read scripts also write and delete the hold's `rwlock_timeout` key and, on the
last release, look at every reader's timeout keys, as Redisson's do.
Taking 5 locks with `redis_lock_acquire_all` costs @{[ sprintf('%.2f', $med{all5}{ratio}) ]}× one exclusive pair,
against @{[ sprintf('%.2f', $med{each5}{ratio}) ]}× for five separate acquisitions (one round trip
instead of five; both release with one pipelined `redis_lock_release_all`).
MD
close $fh;
BenchLib::progress("wrote %s", $out);
