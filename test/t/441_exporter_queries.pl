# 441_exporter_queries.pl — contrib/postgres_exporter/redislock-queries.yaml
# works on a real server.  Takes about 10 s (one node, one Redis, the
# exporter).
#
# The file is read with a small parser for the subset postgres_exporter's
# query files use (query name, "query: |" block, "master", a list of metrics
# each with "usage" and "description"); where YAML::XS is installed, the
# parse is checked against it.  With a lock held, one lost (its key deleted
# in Redis, found gone by the watchdog) and a session waiting:
#  - every query runs, and its columns are exactly the metrics it declares,
#    in order;
#  - LABEL columns are text and never NULL; COUNTER and GAUGE columns are
#    numbers on every row;
#  - the values say what the server has: redislock_locks counts 1 held and 1
#    lost lock, redislock_waits 1 waiting session of kind lock, and
#    redislock_stats the lost lock;
#  - where Debian's prometheus-postgres-exporter is installed, the exporter
#    given the file serves every declared metric with those values.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use Test::More;

my $path = "$FindBin::RealBin/../../contrib/postgres_exporter/redislock-queries.yaml";
open(my $fh, '<', $path) or BAIL_OUT("cannot read $path: $!");
my @lines = <$fh>;
close $fh;
chomp @lines;

# --- parse -------------------------------------------------------------------
my (@order, %q, @errors);
my ($cur, $metric, $in_query);
my $n = 0;
for my $line (@lines)
{
	$n++;
	if ($in_query)
	{
		if ($line =~ /^    (.*)$/ || $line =~ /^\s*$/)
		{
			$q{$cur}{query} .= ($1 // '') . "\n";
			next;
		}
		$in_query = 0;
	}
	next if $line =~ /^\s*(#.*)?$/;
	if ($line =~ /^(\w+):\s*$/)
	{
		$cur = $1;
		push @errors, "line $n: query $cur twice" if $q{$cur};
		push @order, $cur;
		$q{$cur} = { query => '', metrics => [] };
		$metric = undef;
	}
	elsif (defined $cur && $line =~ /^  query: \|\s*$/)
	{
		$in_query = 1;
	}
	elsif (defined $cur && $line =~ /^  master: (true|false)\s*$/)
	{
		$q{$cur}{master} = $1;
	}
	elsif (defined $cur && $line =~ /^  metrics:\s*$/)
	{
	}
	elsif (defined $cur && $line =~ /^    - (\w+):\s*$/)
	{
		$metric = { name => $1 };
		push @{ $q{$cur}{metrics} }, $metric;
	}
	elsif (defined $metric && $line =~ /^        (usage|description): "([^"]*)"\s*$/)
	{
		$metric->{$1} = $2;
	}
	else
	{
		push @errors, "line $n: not understood: $line";
	}
}
is_deeply(\@errors, [], 'the query file parses');
cmp_ok(scalar(@order), '>=', 3, 'it has queries: ' . join(' ', @order));

my %usages = map { $_ => 1 } qw(LABEL COUNTER GAUGE);
for my $name (@order)
{
	my $qq = $q{$name};
	like($qq->{query}, qr/\bSELECT\b/i, "$name: has a query");
	is($qq->{master} // '', 'true', "$name: runs on the exporter's first database only (the views are server-wide)");
	for my $m (@{ $qq->{metrics} })
	{
		ok($usages{ $m->{usage} // '' }, "$name.$m->{name}: usage is LABEL, COUNTER or GAUGE");
		ok(length($m->{description} // ''), "$name.$m->{name}: has a description");
	}
}

SKIP:
{
	skip 'YAML::XS not installed', 1 unless eval { require YAML::XS; 1 };
	my $y = YAML::XS::LoadFile($path);
	my %mine = map {
		my $qq = $q{$_};
		($_ => {
			query   => $qq->{query},
			master  => ($qq->{master} eq 'true' ? 1 : 0),
			metrics => [ map { { $_->{name} => { usage => $_->{usage}, description => $_->{description} } } } @{ $qq->{metrics} } ] })
	} @order;
	my %theirs = map {
		my $qq = $y->{$_};
		($_ => { %$qq, master => ($qq->{master} ? 1 : 0) })
	} keys %$y;
	is_deeply(\%theirs, \%mine, 'YAML::XS reads the file as the parser above does');
}

# --- a server with a lock held, a lock lost and a waiter ------------------------
my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('exporter', $redis, 'redislock.watchdog_timeout' => '3s');
my $holder = RedisLockTest::Session->new($node);
my $waiter = RedisLockTest::Session->new($node);
my $obs    = RedisLockTest::Session->new($node);

is($holder->query(q{SELECT redis_lock_acquire('exp:held')}), 't', 'a lock is held');
is($holder->query(q{SELECT redis_lock_acquire('exp:lost')}), 't', 'a second lock is held');
is($redis->cli('DEL', 'exp:lost'), '1', 'the lock is deleted in Redis');
ok(RedisLockTest::wait_until(30, 'the watchdog marks exp:lost lost', sub {
	($obs->query(q{SELECT state FROM redis_locks WHERE name = 'exp:lost'}) // '') eq 'lost' }),
	'the watchdog found the deleted lock lost');
$waiter->start(q{SELECT redis_lock_acquire('exp:held')});
ok(RedisLockTest::wait_until(30, 'the waiter shows in redis_lock_waits', sub {
	$obs->query(q{SELECT count(*) FROM redis_lock_waits WHERE name = 'exp:held'}) eq '1' }),
	'a session waits for exp:held');

# --- every query ----------------------------------------------------------------
my %result;
for my $name (@order)
{
	my $qq  = $q{$name};
	my $sth = $obs->dbh->prepare($qq->{query});
	ok($sth->execute, "$name: the query runs") or next;
	my @cols = @{ $sth->{NAME} };
	my @types = @{ $sth->{pg_type} };
	my $rows = $sth->fetchall_arrayref;
	is(join(',', @cols), join(',', map { $_->{name} } @{ $qq->{metrics} }),
		"$name: its columns are the declared metrics, in order");
	cmp_ok(scalar(@$rows), '>', 0, "$name: returns rows");
	for my $i (0 .. $#cols)
	{
		my $m = $qq->{metrics}[$i] or next;
		my @bad;
		if ($m->{usage} eq 'LABEL')
		{
			@bad = grep { !defined $_->[$i] } @$rows;
			is($types[$i], 'text', "$name.$cols[$i]: a label is text");
		}
		else
		{
			@bad = grep { !defined $_->[$i] || $_->[$i] !~ /^-?\d+(\.\d+)?$/ } @$rows;
		}
		is(scalar(@bad), 0, "$name.$cols[$i]: a value on every row, of the right kind");
	}
	my @label_idx = grep { $qq->{metrics}[$_]{usage} eq 'LABEL' } 0 .. $#cols;
	for my $row (@$rows)
	{
		my $key = join('|', map { $row->[$_] // '' } @label_idx);
		$result{$name}{$key} = { map { ($cols[$_] => $row->[$_]) } 0 .. $#cols };
	}
}

is($result{redislock_locks}{held}{entries},   '1', 'redislock_locks: one lock held');
is($result{redislock_locks}{lost}{entries},   '1', 'redislock_locks: one lock lost');
is($result{redislock_locks}{expired}{entries}, '0', 'redislock_locks: a state without locks counts 0');
is($result{redislock_waits}{lock}{waiting},   '1', 'redislock_waits: one session waits for a lock');
is($result{redislock_waits}{read}{waiting},   '0', 'redislock_waits: none for a read hold');
cmp_ok($result{redislock_waits}{lock}{oldest_wait_seconds}, '>', 0, 'redislock_waits: the wait has an age');
my ($stats) = values %{ $result{redislock_stats} // {} };
cmp_ok($stats->{lost_locks_total} // 0, '>=', 1, 'redislock_stats: the lost lock is counted');
is($stats->{mode}, 'single', 'redislock_stats: the mode label');

# --- the exporter itself ----------------------------------------------------------
# Debian's prometheus-postgres-exporter (test/setup-deps.sh installs it), run
# with the file as its query file: each declared metric is served, with the
# values above.
my ($exporter) = grep { -x $_ } map { ("$_/prometheus-postgres-exporter", "$_/postgres_exporter") }
  split /:/, "$ENV{PATH}:/usr/bin";
SKIP:
{
	skip 'prometheus-postgres-exporter not installed', 6 unless $exporter;
	require IPC::Run;
	require HTTP::Tiny;
	my $port = RedisLockTest::free_port();
	my $log = $node->basedir . '/exporter.log';
	my $dsn = sprintf('host=%s port=%d dbname=postgres user=%s sslmode=disable',
		$node->host, $node->port, scalar getpwuid($<));
	my $h = do
	{
		local $ENV{DATA_SOURCE_NAME} = $dsn;
		IPC::Run::start([ $exporter, '--disable-default-metrics', '--disable-settings-metrics',
				"--extend.query-path=$path", "--web.listen-address=127.0.0.1:$port" ],
			'<', \undef, '>', $log, '2>&1');
	};
	my $metrics = '';
	my $http = HTTP::Tiny->new(timeout => 10);
	ok(RedisLockTest::wait_until(30, 'the exporter serves redislock metrics', sub {
		my $r = $http->get("http://127.0.0.1:$port/metrics");
		$metrics = $r->{success} ? $r->{content} : '';
		return $metrics =~ /^redislock_locks_entries\{/m }),
		'the exporter serves metrics from the query file');
	my @declared = map {
		my $qn = $_;
		map { "${qn}_$_->{name}" } grep { $_->{usage} ne 'LABEL' } @{ $q{$qn}{metrics} }
	} @order;
	my @missing = grep { $metrics !~ /^\Q$_\E\{/m } @declared;
	is_deeply(\@missing, [], 'every declared metric is served (' . scalar(@declared) . ')');
	like($metrics, qr/^redislock_locks_entries\{[^}]*state="lost"[^}]*\} 1$/m, 'exporter: one lost lock');
	like($metrics, qr/^redislock_locks_entries\{[^}]*state="held"[^}]*\} 1$/m, 'exporter: one held lock');
	like($metrics, qr/^redislock_waits_waiting\{[^}]*kind="lock"[^}]*\} 1$/m, 'exporter: one waiting session');
	$h->kill_kill;
	my $err = RedisLockTest::slurp($log) // '';
	unlike($err, qr/level=error|error running query/i, 'the exporter logged no error')
	  or diag("exporter log: $err");
}

$waiter->cancel;
$holder->query('SELECT redis_lock_release_all()');
$_->close for $holder, $waiter, $obs;
$node->stop;
done_testing();
