# Helpers shared by redislock's benchmarks (bench/*.pl): durations from the
# environment, pgbench and redis-benchmark runners and their parsers,
# /proc readers, machine description, Markdown and gnuplot output.
#
# Environment (all optional):
#   REDISLOCK_BENCH_SECONDS   seconds per pgbench run (default 5)
#   REDISLOCK_BENCH_CLIENTS   client counts, e.g. "1,2,4,8,32" (the default)
#   REDISLOCK_BENCH_SCALE     multiplies loop counts of the loop benchmarks
#                             (hand-off, reentry, memory); default 1
package BenchLib;

use strict;
use warnings;
use Carp qw(croak);
use File::Temp qw(tempfile);
use IPC::Run ();
use POSIX ();
use Test::More ();

# bench/run.sh passes its REDISLOCK_PGBIN
our $PGBIN = $ENV{REDISLOCK_PGBIN} // '/usr/lib/postgresql/15/bin';

# /proc/loadavg's 1, 5 and 15 minute load averages, as one string.
sub loadavg
{
	open my $fh, '<', '/proc/loadavg' or return '?';
	return join(' ', (split ' ', scalar <$fh>)[0 .. 2]);
}

# redislock's counters on a node: { acquires, releases, errors }.
sub lock_counters
{
	my ($node) = @_;
	my @v = split /\|/, $node->safe_psql('postgres',
		'SELECT acquires, releases, redis_errors FROM redis_lock_stats');
	return { acquires => $v[0], releases => $v[1], errors => $v[2] };
}

# Installs bench_pairs(name, n) on a node: n acquire (fixed 30 s lease) +
# release pairs in one backend, no client round trips; returns µs per pair.
sub install_pairs_loop
{
	my ($node) = @_;
	$node->safe_psql('postgres', <<'SQL');
CREATE FUNCTION bench_pairs(lockname text, n int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
    FOR i IN 1 .. n LOOP
        IF NOT redis_lock_acquire(lockname, '0', '30 s') THEN RAISE EXCEPTION 'not acquired'; END IF;
        IF NOT redis_lock_release(lockname) THEN RAISE EXCEPTION 'not released'; END IF;
    END LOOP;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / n;
END $$;
SQL
}

# Checks that a node is in the mode we think: while a session holds a probe
# lock (a session's locks go when it ends), the mode redis_lock_status()
# reports, and on how many of @servers the lock's hash is found ("2 of 5").
# A cluster node that does not serve the key answers MOVED, not 1.
sub probe_mode
{
	my ($node, $probe, @servers) = @_;
	my $s = RedisLockTest::Session->new($node);
	croak "$probe: not acquired" unless $s->query("SELECT redis_lock_acquire('$probe', '0', '30 s')") eq 't';
	my $reported = $s->query("SELECT mode FROM redis_lock_status('$probe')");
	my $found = grep { scalar($_->cli('EXISTS', $probe)) eq '1' } @servers;
	croak "$probe: not released" unless $s->query("SELECT redis_lock_release('$probe')") eq 't';
	$s->close;
	return ($reported, sprintf('%d of %d', $found, scalar @servers));
}

# Progress lines: STDOUT goes to the test log (PostgreSQL::Test::Utils), so
# these go through Test::More's diag to the terminal (and the log).
sub progress { Test::More::diag(sprintf(shift, @_)); }

sub seconds { return $ENV{REDISLOCK_BENCH_SECONDS} // 5; }
sub scale   { return $ENV{REDISLOCK_BENCH_SCALE} // 1; }

sub clients
{
	my $c = $ENV{REDISLOCK_BENCH_CLIENTS} // '1,2,4,8,32';
	return split /[,\s]+/, $c;
}

# Runs a command, bounded; returns (stdout, stderr); dies on non-zero exit.
sub run_cmd
{
	my ($cmd, %opt) = @_;
	my ($in, $out, $err) = ('', '', '');
	local %ENV = (%ENV, %{ $opt{env} // {} });
	IPC::Run::run($cmd, \$in, \$out, \$err, IPC::Run::timeout($opt{timeout} // 600))
	  or croak "command failed (status $?): @$cmd\n$err$out";
	return ($out, $err);
}

# Writes a pgbench script file and returns its path.
sub script_file
{
	my ($dir, $name, $text) = @_;
	my $path = "$dir/$name.sql";
	open my $fh, '>', $path or croak "$path: $!";
	print $fh $text;
	close $fh;
	return $path;
}

# pgbench -n -M prepared -r on the node; returns a hash:
#   tps, lat_ms (average latency per transaction), stmt => [[ms, text]...],
#   xacts (transactions processed), failed, cmd (the command line shown).
sub pgbench
{
	my ($node, $script, $clients, %opt) = @_;
	my $secs = $opt{seconds} // seconds();
	my $jobs = $clients >= 2 ? 2 : 1;
	my @cmd = ("$PGBIN/pgbench", '-n', '-M', 'prepared', '-r',
		'-c', $clients, '-j', $jobs, '-T', $secs,
		'-f', $script, '-h', $node->host, '-p', $node->port, 'postgres');
	my ($out, $err) = run_cmd(\@cmd, env => $opt{env}, timeout => $secs * 4 + 120);
	my %r = (cmd => join(' ', 'pgbench', @cmd[1 .. $#cmd - 7], '-f', ($script =~ s{.*/}{}r)), out => $out);
	($r{tps}) = $out =~ /^tps = ([\d.]+)/m or croak "no tps in pgbench output:\n$out$err";
	($r{lat_ms}) = $out =~ /^latency average = ([\d.]+) ms/m;
	($r{xacts}) = $out =~ /^number of transactions actually processed: (\d+)/m;
	($r{failed}) = $out =~ /^number of failed transactions: (\d+)/m;
	$r{failed} //= 0;
	my @stmt;
	if ($out =~ /^statement latencies in milliseconds.*?:\n(.*)\z/ms)
	{
		for my $l (split /\n/, $1)
		{
			# "   0.052   0  SELECT ..." (latency, failures, text)
			push @stmt, [ $1, $2 ] if $l =~ /^\s+([\d.]+)\s+(?:\d+\s+)?(\S.*)$/;
		}
	}
	$r{stmt} = \@stmt;
	croak "pgbench: $r{failed} failed transactions\n$out$err" if $r{failed};
	return \%r;
}

# redis-benchmark at $clients connections, --csv; returns the hash
# (rps, avg_ms, p50_ms, p99_ms) of its one test.
sub redis_benchmark
{
	my ($redis, $clients, $requests, $keyspace, @command) = @_;
	my @cmd = ('redis-benchmark', '-h', '127.0.0.1', '-p', $redis->port,
		'-c', $clients, '-n', $requests, '-r', $keyspace, '--csv', @command);
	my ($out) = run_cmd(\@cmd, timeout => 600);
	my @lines = grep { /\S/ } split /\n/, $out;
	my @h = map { s/"//gr } split /,/, $lines[0];
	my @v = map { s/"//gr } split /,/, $lines[-1];
	my %row;
	@row{@h} = @v;
	croak "redis-benchmark: unexpected output:\n$out" unless defined $row{avg_latency_ms};
	return { rps => $row{rps}, avg_ms => $row{avg_latency_ms},
		p50_ms => $row{p50_latency_ms}, p99_ms => $row{p99_latency_ms} };
}

# INFO commandstats as { command => calls }.
sub commandstats
{
	my ($redis) = @_;
	my %c;
	for ($redis->cli('INFO', 'commandstats'))
	{
		$c{$1} = $2 if /^cmdstat_([^:]+):calls=(\d+)/;
	}
	return \%c;
}

# Differences b - a of two commandstats hashes, without the INFO calls.
sub commandstats_delta
{
	my ($a, $b) = @_;
	my %d;
	for my $k (keys %$b)
	{
		next if $k eq 'info';
		my $n = $b->{$k} - ($a->{$k} // 0);
		$d{$k} = $n if $n;
	}
	return \%d;
}

# used_cpu_user + used_cpu_sys of the Redis server, in seconds.
sub redis_cpu
{
	my ($redis) = @_;
	my $s = $redis->cli('INFO', 'cpu');
	my ($u) = $s =~ /used_cpu_user:([\d.]+)/;
	my ($y) = $s =~ /used_cpu_sys:([\d.]+)/;
	return $u + $y;
}

sub redis_version
{
	my ($redis) = @_;
	return ($redis->cli('INFO', 'server') =~ /redis_version:(\S+)/)[0];
}

# On-CPU nanoseconds of a process (/proc/PID/schedstat).
sub cpu_ns
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/schedstat" or croak "/proc/$pid/schedstat: $!";
	my $l = <$fh>;
	return (split ' ', $l)[0];
}

# Fields of /proc/PID/status, in kB: VmRSS, RssAnon, RssFile, RssShmem...
sub proc_status
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/status" or croak "/proc/$pid/status: $!";
	my %s;
	while (<$fh>) { $s{$1} = $2 if /^(\w+):\s+(\d+) kB/; }
	return \%s;
}

sub hiredis_version
{
	my $v = `dpkg-query -W -f='\${Version}' libhiredis0.14 2>/dev/null`;
	return $v ? "hiredis $v (Debian)" : 'hiredis (unknown version)';
}

# A paragraph naming the machine and the versions.
sub machine
{
	my ($node, $redis) = @_;
	my $cpu = `grep -m1 'model name' /proc/cpuinfo`;
	$cpu =~ s/.*:\s*//;
	chomp $cpu;
	my $cores = `nproc`;
	chomp $cores;
	my $kernel = `uname -sr`;
	chomp $kernel;
	my $mem = `grep MemTotal /proc/meminfo`;
	$mem = $mem =~ /(\d+)/ ? sprintf('%.1f GiB RAM', $1 / 1048576) : '';
	my $pg = $node->safe_psql('postgres', 'SELECT version()');
	my $pgb = `$PGBIN/pgbench --version`;
	chomp $pgb;
	my $rb = `redis-benchmark --version 2>/dev/null` || '';
	chomp $rb;
	return "Machine: $cpu, $cores cores, $mem, $kernel. $pg; "
	  . 'Redis ' . redis_version($redis) . '; ' . hiredis_version()
	  . "; $pgb" . ($rb ? "; $rb" : '') . '. '
	  . 'PostgreSQL runs as set up by PostgreSQL::Test::Cluster (fsync = off, '
	  . 'Unix-socket connections), Redis on 127.0.0.1 TCP with no persistence; '
	  . 'both on this same machine, as are the clients.';
}

# Percentile (0..100) of a sorted array ref, nearest rank.
sub pct
{
	my ($sorted, $p) = @_;
	return undef unless @$sorted;
	my $i = POSIX::ceil($p / 100 * @$sorted) - 1;
	$i = 0 if $i < 0;
	$i = $#$sorted if $i > $#$sorted;
	return $sorted->[$i];
}

# The median of a list (the lower one of an even count).
sub median
{
	my @v = sort { $a <=> $b } @_;
	return $v[ int($#v / 2) ];
}

sub mean
{
	my @v = @_;
	return undef unless @v;
	my $s = 0;
	$s += $_ for @v;
	return $s / @v;
}

# Pairs of calls measured in one session: bench_loop(kind, n) for each kind,
# $rounds rounds alternating, after a warm-up that loads the scripts.
# Returns {kind} = [ {us, cpu, rcpu, evalsha, all} per round ]: wall µs,
# backend and Redis CPU µs, EVALSHAs and all Redis commands, per pair.
sub pair_rounds
{
	my ($s, $redis, $kinds, $n, $rounds) = @_;
	my $pid = $s->pid;
	my %r;

	$s->query("SELECT bench_loop('$_', 200)") for @$kinds;
	for my $round (1 .. $rounds)
	{
		for my $kind (@$kinds)
		{
			my ($c0, $r0, $k0) = (cpu_ns($pid), redis_cpu($redis), commandstats($redis));
			my $us = $s->query("SELECT bench_loop('$kind', $n)");
			my ($c1, $r1, $k1) = (cpu_ns($pid), redis_cpu($redis), commandstats($redis));
			my $d = commandstats_delta($k0, $k1);
			my $all = 0;
			$all += $_ for values %$d;
			push @{ $r{$kind} }, { us => $us, cpu => ($c1 - $c0) / 1e3 / $n,
				rcpu => ($r1 - $r0) * 1e6 / $n, evalsha => ($d->{evalsha} // 0) / $n, all => $all / $n };
			progress("round %d %-6s %.1f us/pair", $round, $kind, $us);
		}
	}
	return \%r;
}

# The table of pair_rounds' results (see pair_columns), medians with each
# round's value and the ratio to the $anchor kind's pair of the same round;
# returns (rows, {kind} = medians and ratio).
sub pair_rows
{
	my ($r, $kinds, $label, $anchor) = @_;
	my (@rows, %med);

	for my $kind (@$kinds)
	{
		my $l = $r->{$kind};
		my %m = map { my $f = $_; $f => median(map { $_->{$f} } @$l) } qw(us cpu rcpu evalsha all);
		$m{ratio} = median(map { $l->[$_]{us} / $r->{$anchor}[$_]{us} } 0 .. $#$l);
		$med{$kind} = \%m;
		push @rows, [ $label->{$kind}, sprintf('%.1f', $m{us}), join(' / ', map { sprintf('%.1f', $_->{us}) } @$l),
			sprintf('%.2f×', $m{ratio}), sprintf('%.1f', $m{cpu}), sprintf('%.1f', $m{rcpu}),
			sprintf('%.2f', $m{evalsha}), sprintf('%.1f', $m{all}) ];
	}
	return (\@rows, \%med);
}

sub pair_columns
{
	my ($anchor) = @_;
	return ['pair', 'µs per pair (median)', 'each round', "vs $anchor", 'backend CPU µs', 'Redis CPU µs',
		'EVALSHA per pair', 'Redis commands per pair'];
}

# Markdown table from a header array ref and row array refs.
sub table
{
	my ($head, @rows) = @_;
	my $t = '| ' . join(' | ', @$head) . " |\n|" . join('|', map { '---' } @$head) . "|\n";
	$t .= '| ' . join(' | ', map { defined $_ ? $_ : '' } @$_) . " |\n" for @rows;
	return $t;
}

# Runs gnuplot on $script (text); data files must already exist.
# Returns 1 when the PNG was written, 0 (with a warning) otherwise.
sub gnuplot
{
	my ($script, $png) = @_;
	my ($fh, $path) = tempfile('benchplotXXXX', TMPDIR => 1, SUFFIX => '.gp');
	print $fh $script;
	close $fh;
	my $ok = eval { run_cmd([ 'gnuplot', $path ], timeout => 60); 1 };
	unlink $path;
	warn "gnuplot failed: $@" unless $ok;
	return $ok && -s $png ? 1 : 0;
}

# The terminal line for PNGs: pngcairo when it exists, else png.
sub png_terminal
{
	my ($w, $h) = @_;
	my $t = `gnuplot -e 'set terminal' 2>&1`;
	return $t =~ /pngcairo/
	  ? "set terminal pngcairo size $w,$h font 'sans,10'"
	  : "set terminal png size $w,$h";
}

1;
