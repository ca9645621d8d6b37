# Watchdog renewal cost: for 100, 1,000 and 10,000 held watchdog-mode locks,
# how many Redis round trips and how much worker CPU one renewal cycle takes,
# and how much shared memory one lock entry costs.
#
# Round trips are the worker's write() calls (/proc/PID/io syscw): hiredis
# sends each pipeline with one write. CPU is the worker's on-CPU time from
# /proc/PID/schedstat. Renewals are Redis' EVALSHA count over the window.
use strict;
use warnings;
use RedisLockTest;
use Time::HiRes qw(sleep time);

my $out = shift // 'RESULTS-renewal.md';
my $lease_s = 3;                      # renewed every second
my $window_s = 10;
my @sizes = (100, 1_000, 10_000);
my $sessions = 4;

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('bench_renewal', $redis,
    'redislock.max_locks' => 12000,
    'redislock.watchdog_timeout' => "${lease_s}s",
    'max_connections' => 40);

my $worker = $node->safe_psql('postgres',
    "SELECT pid FROM pg_stat_activity WHERE backend_type = 'redislock watchdog'");
my $shmem = $node->safe_psql('postgres',
    "SELECT size FROM pg_shmem_allocations WHERE name = 'redislock'");

sub proc_field { my ($file, $re) = @_; open my $fh, '<', $file or die "$file: $!"; local $/; my $t = <$fh>; return $t =~ $re ? $1 : die "no match in $file"; }
sub cpu_ns { return (split ' ', proc_field("/proc/$worker/schedstat", qr/^(.*)$/m))[0]; }
sub writes { return proc_field("/proc/$worker/io", qr/^syscw:\s*(\d+)/m); }
sub renewals { my $s = $redis->cli('INFO', 'commandstats'); return $s =~ /cmdstat_evalsha:calls=(\d+)/ ? $1 : 0; }

my @rows;
for my $n (@sizes) {
    my @s = map { RedisLockTest::Session->new($node) } 1 .. $sessions;
    my $per = $n / $sessions;
    $s[$_]->start("SELECT count(*) FROM generate_series(1, $per) g "
        . "WHERE redis_lock_acquire('bench:$n:$_:' || g)") for 0 .. $#s;
    $_->finish(300) for @s;
    RedisLockTest::wait_until(60, "$n locks listed", sub {
        $node->safe_psql('postgres', 'SELECT count(*) FROM redis_locks') == $n }) or die;
    # let acquisitions spread over time merge into shared batches
    sleep(2 * $lease_s);

    my ($c0, $w0, $r0, $t0) = (cpu_ns(), writes(), renewals(), time);
    sleep($window_s);
    my ($c1, $w1, $r1, $t1) = (cpu_ns(), writes(), renewals(), time);
    my $held = $redis->cli('EVAL', "local n = 0 for _, k in ipairs(redis.call('keys', 'bench:$n:*')) do if redis.call('pttl', k) > 0 then n = n + 1 end end return n", 0);

    my $renewed = $r1 - $r0;
    my $cycles = $renewed / $n;
    push @rows, sprintf("| %d | %d | %.1f | %d | %.2f | %.0f | %.2f | %.2f | %d |",
        $n, $renewed, $cycles, $w1 - $w0, ($w1 - $w0) / ($cycles || 1),
        $renewed / (($w1 - $w0) || 1),
        ($c1 - $c0) / 1e6 / ($cycles || 1), ($c1 - $c0) / 1e3 / ($renewed || 1), $held);

    $_->query('SELECT redis_lock_release_all()') for @s;
    $_->close for @s;
    RedisLockTest::wait_until(60, 'table empty', sub {
        $node->safe_psql('postgres', 'SELECT count(*) FROM redis_locks') == 0 }) or die;
}

my $ver = $node->safe_psql('postgres', 'SHOW server_version');
my $rver = ($redis->cli('INFO', 'server') =~ /redis_version:(\S+)/)[0];
my $cpu = `grep -m1 'model name' /proc/cpuinfo`; $cpu =~ s/.*:\s*//; chomp $cpu;
open my $fh, '>', $out or die;
print $fh <<"MD";
# Watchdog renewal cost

Command: `bash bench/run.sh renewal` (bench/renewal.pl). Machine: $cpu,
@{[ `nproc` =~ s/\s+//r ]} cores; PostgreSQL $ver, Redis $rver, hiredis 0.14.1.
Watchdog lease ${lease_s} s (renewed every @{[ $lease_s / 3 ]} s, up to a sixth early so
batches merge); locks held by $sessions sessions; measured over ${window_s} s
after the locks had been held for two leases.

| held locks | renewals in window | cycles | worker round trips | round trips / cycle | renewals / round trip | worker CPU ms / cycle | worker CPU µs / renewal | keys with TTL > 0 at end |
|---|---|---|---|---|---|---|---|---|
@{[ join("\n", @rows) ]}

Round trips are counted as the worker's write() system calls; one pipeline
of up to 1,000 EVALSHA renewals is one write and one round trip.

Shared memory: the `redislock` segment is $shmem bytes for
redislock.max_locks = 12000, i.e. @{[ sprintf('%.0f', $shmem / 12000) ]} bytes per lock entry
(a 512-byte name, the owner id and the lock's state).
MD
close $fh;
print "wrote $out\n";
