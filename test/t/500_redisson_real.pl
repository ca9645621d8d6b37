# 500_redisson_real.pl — the real Redisson client, every version in
# @RealRedisson::VERSIONS, against SQL sessions on one lock:
#   exclusion  SQL sessions and Java threads bump one non-atomic counter under
#              the lock; the count is exact;
#   wake       a SQL waiter wakes when a Java holder unlocks and a Java waiter
#              when a SQL holder releases (plain and fair locks), every hold on
#              a 10-minute lease, so only the unlock message explains a wake
#              within $T;
#   fencing    tokens strictly increase across SQL and RFencedLock (3.19+);
#   semaphore  a Java waiter wakes on a SQL release and a SQL waiter on a
#              Java release; sem-addPermits: a SQL waiter on Java's addPermits
#              (S1);
#   token-ttl  the token counter carries no TTL, as Redisson leaves it (T1).
# Known disagreements (../shared reference: redisson-versions.md ids) are TODO
# for the versions they concern, so the suite stays green while they are
# real; the per-version table at the end says what passed.
# The drivers are built by test/redisson-java/build.sh (see its README).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;
use Test::More;
use Time::HiRes ();

my $T      = 60;         # bound for a wake; far below the lease
my $LONG   = 600_000;    # 10-minute leases, ms
my $ROUNDS = 15;         # counter rounds per SQL session and per Java thread

# Which known disagreement makes a check fail for which versions
# (redisson-versions.md).  A check listed here is TODO for those versions.
my %KNOWN = (
	'sem-addPermits' => [ 'S1', 'Java addPermits publishes nothing before 3.16.2', sub { RealRedisson::version_cmp($_[0], '3.16.2') < 0 } ],
	'token-ttl' => [ 'T1', 'our scripts put a TTL on redisson_lock_token:{n}', sub { RealRedisson::has_fenced($_[0]) } ],
);

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('real', $redis,
	'redislock.fair_wait_timeout' => '120s', 'max_connections' => '30');
my $rc = FakeRedisson::Conn->new(port => $redis->port);
sub numsub { $rc->cmd('PUBSUB', 'NUMSUB', $_[0])->[1] }

my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $pg = RedisLockTest::Session->new($node);    # the Java threads' counter access
$pg->query(<<'SQL');
CREATE TABLE real_counter(name text PRIMARY KEY, v int NOT NULL);
CREATE PROCEDURE real_bump(lock_name text, rounds int)
LANGUAGE plpgsql AS $$
DECLARE
    cur int;
BEGIN
    FOR i IN 1 .. rounds LOOP
        PERFORM redis_xact_lock_acquire(lock_name);
        SELECT v INTO cur FROM real_counter WHERE name = lock_name;
        PERFORM pg_sleep(0.001);
        UPDATE real_counter SET v = cur + 1 WHERE name = lock_name;
        COMMIT;
    END LOOP;
END $$;
SQL

my %record;    # version -> check -> pass | FAIL | FAIL (known X) | n/a

# check($java, $check, sub { ... }): a subtest; TODO if a known disagreement
# covers it for this version.
sub check
{
	my ($j, $name, $body) = @_;
	my $v = $j->version;
	my $k = $KNOWN{$name};
	my $known = $k && $k->[2]->($v) ? $k->[0] : undef;
	our $TODO;
	local $TODO = $known ? "$known (redisson-versions.md): $k->[1]" : undef;
	my $ok = subtest("Redisson $v: $name" => sub {
		eval { $body->($j, $v); 1 } or fail("no error: $@");
		# whatever happened, the sessions end idle and hold nothing
		for my $s ($a, $b)
		{
			$s->cancel if $s->{sth_async};
			$s->query('SELECT redis_lock_release_all()');
		}
	});
	$record{$v}{$name} = $ok ? 'pass' : $known ? "FAIL (known $known)" : 'FAIL';
	return $ok;
}

sub counter_check
{
	my ($j, $v) = @_;
	my $name = "real:$v:counter";
	$pg->query("INSERT INTO real_counter VALUES (" . sql_literal($name) . ", 0)");
	my @sql = ($a, $b);
	$_->start('CALL real_bump(' . sql_literal($name) . ", $ROUNDS)") for @sql;
	# Java threads j1, j2: lock, read and write the counter (two statements,
	# on their behalf), unlock; each thread's next lock starts at once.
	my %left = (j1 => $ROUNDS, j2 => $ROUNDS);
	my %n;
	my $start = sub { my $t = shift; $j->start("$t." . ++$n{$t}, $t, 'lock', 'plain', $name) };
	$start->($_) for keys %left;
	my $errors = 0;
	while (grep { $_ > 0 } values %left)
	{
		my $tag = $j->next_result([ map { "$_.$n{$_}" } grep { $left{$_} > 0 } keys %left ], $T * 5);
		unless (defined $tag) { fail("Java lock within " . ($T * 5) . " s"); $errors++; last; }
		my ($t) = split /\./, $tag;
		my ($st, $val) = $j->result($tag, 0);
		if ($st ne 'ok') { fail("Java $t lock: $val"); $errors++; last; }
		my $cur = $pg->query('SELECT v FROM real_counter WHERE name = ' . sql_literal($name));
		$pg->query('UPDATE real_counter SET v = ' . ($cur + 1) . ' WHERE name = ' . sql_literal($name));
		$j->run($t, 'unlock', 'plain', $name);
		$start->($t) if --$left{$t} > 0;
	}
	for my $s (@sql)
	{
		my ($val, $err) = $s->finish($T * 5);
		is($err, undef, 'SQL session bumped its rounds');
	}
	is($pg->query('SELECT v FROM real_counter WHERE name = ' . sql_literal($name)), 4 * $ROUNDS,
		"counter exact: 2 SQL sessions and 2 Java threads x $ROUNDS rounds");
	is($rc->cmd('EXISTS', $name), 0, 'lock gone at the end');
}

# One direction each, plain (SQL fair = false) or fair.
sub wake_check
{
	my ($j, $v, $kind) = @_;
	my $fair = $kind eq 'fair' ? 'true' : 'false';
	my $name = "real:$v:wake:$kind";
	my $l = sql_literal($name);
	my $jo = $j->owner('h');

	# Java holds, SQL waits, Java unlocks
	is($j->run('h', 'lock', $kind, $name, $LONG), 'null', 'Java holds (10 min lease)');
	is($rc->cmd('HGET', $name, $jo), '1', 'the hash holds the Java owner');
	$a->start("SELECT redis_lock_acquire($l, NULL, '10 min', $fair)");
	waits_ok($a, 'SQL waiter');
	ok(!$a->is_done, 'SQL waiter still waits while Java holds');
	is($j->run('h', 'unlock', $kind, $name), 'null', 'Java unlocks');
	my ($val, $err) = $a->finish($T);
	is($val, 't', "SQL waiter woken within $T s by the Java unlock") or diag($err);
	$a->query("SELECT redis_lock_release($l)");

	# SQL holds, Java waits, SQL releases
	is($a->query("SELECT redis_lock_acquire($l, '0', '10 min', $fair)"), 't', 'SQL holds (10 min lease)');
	my $w = $j->owner("w$kind");
	$j->start("wake$kind", "w$kind", 'lock', $kind, $name, $LONG);
	my $chan = $kind eq 'fair' ? FakeRedisson::fair_channel($name, $w) : FakeRedisson::channel($name);
	RedisLockTest::until_ok("Java waiter subscribed to $chan", sub { numsub($chan) >= 1 });
	if ($kind eq 'fair')
	{
		RedisLockTest::until_ok('Java waiter queued', sub { RedisLockTest::fair_queue_len($rc, $name) >= 1 });
	}
	is($j->poll("wake$kind"), undef, 'Java waiter still waits while SQL holds');
	is($a->query("SELECT redis_lock_release($l)"), 't', 'SQL releases');
	my ($st, $r) = $j->result("wake$kind", $T);
	is($st, 'ok', "Java waiter woken within $T s by the SQL release") or diag($r // 'no result');
	is($rc->cmd('HGET', $name, $w), '1', 'the hash holds the Java waiter');
	is($j->run("w$kind", 'unlock', $kind, $name), 'null', 'Java unlocks');
	is($rc->cmd('EXISTS', $name), 0, 'lock gone');
}

# Semaphore: a Java waiter wakes on a SQL release, a SQL waiter on a Java release.
sub sem_check
{
	my ($j, $v) = @_;
	my $name = "real:$v:sem";
	my $l = sql_literal($name);
	my $chan = FakeRedisson::sem_channel($name);
	is($j->run('s1', 'sem.trySetPermits', $name, 1), 'true', 'Java trySetPermits 1');
	is($a->query("SELECT redis_semaphore_acquire($l, 1, '0')"), 't', 'SQL takes the permit');
	is($j->run('s1', 'sem.tryAcquire', $name, 1, 0), 'false', 'Java tryAcquire: none left');
	$j->start('semw', 's2', 'sem.acquire', $name, 1);
	RedisLockTest::until_ok("Java waiter subscribed to $chan", sub { numsub($chan) >= 1 });
	is($j->poll('semw'), undef, 'Java waiter still waits while SQL holds the permit');
	is($a->query("SELECT redis_semaphore_release($l, 1)"), 't', 'SQL releases its permit');
	my ($st, $r) = $j->result('semw', $T);
	is($st, 'ok', "Java waiter woken within $T s by the SQL release") or diag($r // 'no result');
	is($a->query("SELECT redis_semaphore_available($l)"), 0, 'Java holds the only permit');
	$a->start("SELECT redis_semaphore_acquire($l, 1, NULL)");
	waits_ok($a, 'SQL semaphore waiter');
	is($j->run('s2', 'sem.release', $name, 1), 'null', 'Java releases');
	my ($val, $err) = $a->finish($T);
	is($val, 't', "SQL waiter woken within $T s by the Java release") or diag($err);
	is($a->query("SELECT redis_semaphore_release($l, 1)"), 't', 'SQL gives it back');
	is($j->run('s1', 'sem.availablePermits', $name), 1, 'Java sees 1 available');
}

# Semaphore: a SQL waiter wakes when Java adds permits (S1: not before 3.16.2).
sub sem_add_check
{
	my ($j, $v) = @_;
	my $name = "real:$v:semadd";
	my $l = sql_literal($name);
	is($j->run('s1', 'sem.trySetPermits', $name, 1), 'true', 'Java trySetPermits 1');
	is($b->query("SELECT redis_semaphore_acquire($l, 1, '0')"), 't', 'SQL B takes the permit');
	$a->start("SELECT redis_semaphore_acquire($l, 1, NULL)");
	waits_ok($a, 'SQL A waits');
	my $sub = FakeRedisson::Conn->new(port => $redis->port);
	$sub->subscribe(FakeRedisson::sem_channel($name));
	is($j->run('s1', 'sem.addPermits', $name, 1), 'null', 'Java addPermits 1');
	my $t0 = Time::HiRes::time();
	my ($val, $err) = $a->finish($T);
	note(sprintf('the SQL waiter ended %.1f s after addPermits', Time::HiRes::time() - $t0));
	# A message, if any, was published before the waiter woke or $T ago.
	my $m = $sub->next_message(1);
	is($m && $m->[1], '1', 'addPermits published the new count on ' . FakeRedisson::sem_channel($name));
	$sub->close;
	is($val, 't', "SQL waiter woken within $T s by Java's addPermits") or diag($err);
	$a->cancel if $a->{sth_async};
	$a->query("SELECT redis_semaphore_release($l, 1)") if ($val // '') eq 't';
	is($b->query("SELECT redis_semaphore_release($l, 1)"), 't', 'SQL B gives it back');
}

sub fencing_check
{
	my ($j, $v) = @_;
	my $name = "real:$v:fence";
	my $l = sql_literal($name);
	my @tok;
	for my $round (1 .. 2)
	{
		is($a->query("SELECT redis_lock_acquire($l, '0', '10 min')"), 't', "SQL acquires ($round)");
		push @tok, [ 'SQL', $a->query("SELECT redis_lock_fencing_token($l)") ];
		is($a->query("SELECT redis_lock_release($l)"), 't', 'SQL releases');
		my $t = $round == 1 ? $j->run('f', 'lockAndGetToken', $name, $LONG)
		  : $j->run('f', 'tryLockAndGetToken', $name, 0, $LONG);
		push @tok, [ 'Java', $t ];
		is($j->run('f', 'getToken', $name), $t, 'getToken while held');
		is($j->run('f', 'unlock', 'fenced', $name), 'null', 'Java unlocks');
	}
	for my $i (1 .. $#tok)
	{
		ok(defined $tok[$i][1] && defined $tok[$i-1][1] && $tok[$i][1] > $tok[$i-1][1],
			"token $i ($tok[$i][0]) > token " . ($i - 1) . " ($tok[$i-1][0])")
		  or diag(join(', ', map { "$_->[0] " . ($_->[1] // 'undef') } @tok));
	}
}

sub token_ttl_check
{
	my ($j, $v) = @_;
	my $name = "real:$v:fence-ttl";
	my $key = FakeRedisson::token_key($name);
	my $t = $j->run('f', 'lockAndGetToken', $name, $LONG);
	$j->run('f', 'unlock', 'fenced', $name);
	is($rc->cmd('PTTL', $key), -1, 'after a Java acquisition: no TTL');
	is($a->query('SELECT redis_lock_acquire(' . sql_literal($name) . ", '0', '10 min')"), 't', 'SQL acquires');
	is($a->query('SELECT redis_lock_release(' . sql_literal($name) . ')'), 't', 'SQL releases');
	is($rc->cmd('PTTL', $key), -1, 'after a SQL acquisition: still no TTL (else the counter can vanish and Java restarts at 1)');
}

note('only Redisson ' . join(' ', RealRedisson::versions()) . ' (REDISLOCK_REDISSON_VERSIONS)')
  if $ENV{REDISLOCK_REDISSON_VERSIONS};
for my $v (RealRedisson::versions())
{
	my $why = RealRedisson::check_build($v);
	if ($why)
	{
		fail("Redisson $v: driver available");
		diag($why);
		$record{$v}{driver} = 'FAIL';
		next;
	}
	my $j = RealRedisson->new(version => $v, port => $redis->port);
	note("Redisson $v: client id " . $j->id . ", log " . $j->logfile);
	check($j, 'exclusion', \&counter_check);
	check($j, 'wake', sub { wake_check(@_, 'plain') });
	check($j, 'fair-wake', sub { wake_check(@_, 'fair') });
	check($j, 'semaphore', \&sem_check);
	check($j, 'sem-addPermits', \&sem_add_check);
	if (RealRedisson::has_fenced($v))
	{
		check($j, 'fencing', \&fencing_check);
		check($j, 'token-ttl', \&token_ttl_check);
	}
	else
	{
		$record{$v}{$_} = 'n/a (no RFencedLock)' for qw(fencing token-ttl);
	}
	$j->quit;
}

# The per-version record, also in the log directory for the docs' table.
my @checks = qw(exclusion wake fair-wake semaphore sem-addPermits fencing token-ttl);
my $table = join("\t", 'version', @checks) . "\n";
for my $v (RealRedisson::versions())
{
	$table .= join("\t", $v, map { $record{$v}{$_} // $record{$v}{driver} // '-' } @checks) . "\n";
}
diag("real Redisson, per version:\n$table");
if (open my $fh, '>', "$PostgreSQL::Test::Utils::log_path/500_redisson_real.tsv")
{
	print $fh $table;
	close $fh;
}

$_->close for ($a, $b, $pg);
no_crash_ok($node, 'real Redisson');
done_testing();
