# Workload: the hot path of one uncontended acquire + release pair, counted.
# A plpgsql loop of N watchdog-mode pairs on one name runs in a backend of
# a server started under callgrind, which collects only inside redis_lock_acquire() and redis_lock_release() (their
# C entry points): instructions per pair, and per pair the calls of
# LWLockAcquire (exclusive or shared), of the allocators (PostgreSQL's
# palloc and malloc), and of the libc wrappers that enter the kernel.
# Instruction counts are repeatable here, unlike times; a run on another
# commit of the same script gives the before/after. Backend CPU µs per pair
# of the same loop in a normal backend comes from /proc/PID/schedstat.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use BenchLib;
use RedisLockTest;
use IPC::Run;

my $out = shift // 'RESULTS-hotpath.md';
my $n = int(($ENV{REDISLOCK_BENCH_HOTPATH_LOOP} // 2000) * BenchLib::scale());
my $cpu_n = 20000;

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('bench_hotpath', $redis);
$node->safe_psql('postgres', <<'SQL');
CREATE FUNCTION bench_pairs(n int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. n LOOP
        IF NOT redis_lock_acquire('bench:hot', '0') THEN RAISE EXCEPTION 'not acquired'; END IF;
        IF NOT redis_lock_release('bench:hot') THEN RAISE EXCEPTION 'not released'; END IF;
    END LOOP;
    RETURN n;
END $$;
SQL

# backend CPU per pair, normal backend (median of 3 runs)
my $s = RedisLockTest::Session->new($node);
$s->query('SELECT bench_pairs(1000)');
my $pid = $s->pid;
my @cpu;
for (1 .. 3)
{
	my $c0 = BenchLib::cpu_ns($pid);
	$s->query("SELECT bench_pairs($cpu_n)");
	push @cpu, (BenchLib::cpu_ns($pid) - $c0) / 1000 / $cpu_n;
}
$s->close;
my $cpu_us = BenchLib::median(@cpu);
BenchLib::progress("backend CPU %.2f µs per pair", $cpu_us);
my $machine = BenchLib::machine($node, $redis);
$node->stop;

# callgrind over the server: every process runs under it, but only the
# backend that runs the loop collects anything (--toggle-collect)
my $dir = ($ENV{TESTDIR} // $node->basedir) . '/callgrind';
mkdir $dir;
my $vg = IPC::Run::start([ 'valgrind', '--tool=callgrind', "--callgrind-out-file=$dir/cg.%p",
		'--toggle-collect=redis_lock_acquire', '--toggle-collect=redis_lock_release',
		'postgres', '-D', $node->data_dir ],
	'>', "$dir/stdout", '2>', "$dir/stderr");
my @psql = ('psql', '-X', '-q', '-A', '-t', '-h', $node->host, '-p', $node->port, '-d', 'postgres');
RedisLockTest::wait_until(600, 'the server under callgrind accepts connections',
	sub { IPC::Run::run([ @psql, '-c', 'SELECT 1' ], '>', '/dev/null', '2>', '/dev/null') }) or die 'server under callgrind did not start';
IPC::Run::run([ @psql, '-c', 'SELECT bench_pairs(10)', '-c', "SELECT bench_pairs($n)" ],
	'>', "$dir/psql.out", '2>&1', IPC::Run::timeout(1800)) or die 'the loop failed under callgrind';
system('pg_ctl', '-D', $node->data_dir, '-m', 'fast', '-w', '-t', '600', 'stop') == 0
  or die 'pg_ctl stop failed';
$vg->finish;
# the process that collected the most: the backend that ran the loop
my ($cg, $most) = (undef, 0);
for my $f (glob("$dir/cg.*"))
{
	my ($sum) = `grep -m1 '^summary:' $f` =~ /(\d+)/;
	($cg, $most) = ($f, $sum) if defined $sum && $sum > $most;
}
die 'no callgrind file with collected instructions' unless $cg;

# totals and call counts from the callgrind file
my (%calls, %names, $fn, $cfn, $total);
open my $fh, '<', $cg or die "$cg: $!";
while (my $l = <$fh>)
{
	chomp $l;
	if ($l =~ /^(?:totals|summary):\s+(\d+)/) { $total = $1; next; }
	if ($l =~ /^cfn=\((\d+)\)(?:\s+(.*))?$/)
	{
		$names{$1} = $2 if defined $2;
		$cfn = $names{$1};
		next;
	}
	if ($l =~ /^fn=\((\d+)\)(?:\s+(.*))?$/) { $names{$1} = $2 if defined $2; next; }
	if ($l =~ /^calls=(\d+)/ && defined $cfn) { $calls{$cfn} += $1; next; }
}
close $fh;
# the first 10 pairs load the scripts and open the connection
my $pairs = $n + 10;
my $per = sub { my $c = 0; $c += $calls{$_} // 0 for @_; sprintf('%.2f', $c / $pairs) };
my @sys = sort grep { /^(?:__libc_)?(?:send|sendto|sendmsg|recv|recvfrom|recvmsg|read|write|epoll_wait|epoll_ctl|epoll_create1?|poll|close|getpid|kill|clock_gettime|gettimeofday)$/ } keys %calls;

open my $md, '>', $out or die;
print $md <<"MD";
## Hot path: one uncontended acquire + release

Command: `bash bench/run.sh hotpath` (bench/hotpath.pl).
$machine

A plpgsql loop of `redis_lock_acquire('bench:hot', '0')` +
`redis_lock_release('bench:hot')` (watchdog mode, nobody else on the name)
runs $n times (after 10 warm-up pairs in the same session, counted in) in a
backend of a server started under `valgrind --tool=callgrind
--toggle-collect=redis_lock_acquire --toggle-collect=redis_lock_release`:
only what runs inside the two C entry points is counted.

| per pair | count |
|---|---|
| instructions (callgrind Ir) | @{[ sprintf('%.0f', ($total // 0) / $pairs) ]} |
| LWLockAcquire calls | @{[ $per->('LWLockAcquire') ]} |
| palloc calls (palloc, palloc0, MemoryContextAlloc*, repalloc) | @{[ $per->(qw(palloc palloc0 MemoryContextAlloc MemoryContextAllocZero MemoryContextAllocZeroAligned MemoryContextAllocExtended repalloc)) ]} |
| pfree calls | @{[ $per->('pfree') ]} |
| malloc calls (malloc, calloc, realloc: hiredis, OpenSSL) | @{[ $per->(qw(malloc calloc realloc)) ]} |
| free calls | @{[ $per->('free') ]} |
| hash_bytes calls (dynahash keys) | @{[ $per->('hash_bytes') ]} |
@{[ join("\n", map { "| $_ calls | " . $per->($_) . ' |' } @sys) ]}

Backend CPU per pair in a normal backend (median of 3 loops of $cpu_n pairs,
/proc/PID/schedstat): @{[ sprintf('%.2f', $cpu_us) ]} µs.
MD
close $md;
BenchLib::progress("wrote %s", $out);
