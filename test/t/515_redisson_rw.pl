# 515_redisson_rw.pl — read holds shared by SQL sessions and the real
# Redisson client (every version in @RealRedisson::VERSIONS), where Java's
# read renewal or a Java hold whose lease ran out meets ours
# (redisson-versions.md, issue 23):
#   r1-fixed-read   R1: a SQL read hold with a fixed 10-minute lease beside a
#                   Java reader on the watchdog, whose renewal (before 4.4)
#                   cuts every reader's timeout key to Java's lease. After
#                   the Java reader leaves and Java's lease has passed (by
#                   Redis's clock), the SQL hold is still in Redis and a Java
#                   writer cannot get in;
#   r4-lapsed-reader R4, write side: a Java reader with a fixed lease that
#                   ran out while a SQL reader keeps the hash alive still
#                   counts as a reader, as for Redisson's writer: the SQL
#                   reader's upgrade and another SQL writer are refused, the
#                   Java reader's late unlock still finds its hold.
# Both failed on the code before the fix for every version, except
# r1-fixed-read on 4.7.0 (Java 4.4+ renews only its own keys); they were
# fixed by restoring a fixed-lease SQL read hold's keys to its remaining
# lease and by counting every reader field in the hash, live or not, in
# write_acquire.lua.
# One PostgreSQL node and one JVM per version. Takes about 12 s per version
# (about 100 s for all eight), most of it Java's lease waited out once.
#
# No sleeps and no timing thresholds: "Java's lease has passed" is a marker
# key set with PX of that lease in Redis and waited out; everything else
# waits for observable state with a bounded timeout.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;
use Test::More;

my $T     = 60;       # bound for anything that happens at once, s
my $JWD   = 6000;     # Java's lockWatchdogTimeout: a renewal round every 2 s
# redislock.watchdog_timeout: the worker looks after a fixed-lease read hold
# every third of it, well within Java's lease
my $WD    = 2000;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('rwreal', $redis,
	'redislock.watchdog_timeout' => "${WD}ms");
my $rc = FakeRedisson::Conn->new(port => $redis->port);

my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $a_id = $a->query('SELECT redis_lock_owner_id()');

sub tkey { FakeRedisson::rw_timeout_key($_[0], $_[1], 1) }

# Waits, by Redis's clock, until $ms have passed from now.
my $marks = 0;
sub redis_time_passes
{
	my ($ms, $what) = @_;
	my $mark = 'rw515:marker:' . ++$marks;
	$rc->cmd('SET', $mark, '1', 'PX', $ms);
	RedisLockTest::until_ok($what, sub { !$rc->cmd('EXISTS', $mark) }, $T);
}

sub check
{
	my ($j, $name, $body) = @_;
	my $v = $j->version;
	subtest("Redisson $v: $name" => sub {
		eval { $body->($j, $v); 1 } or fail("no error: $@");
		# whatever happened, the sessions end idle and hold nothing
		eval {
			$_->query('SELECT redis_lock_release_all()') for ($a, $b);
			1;
		} or fail("the SQL sessions are idle again: $@");
	});
}

sub r1_check
{
	my ($j, $v) = @_;
	my $name = "rw515:$v:r1";
	my $l = sql_literal($name);
	my $ak = tkey($name, $a_id);
	is($a->query("SELECT redis_read_lock_acquire($l, '0', '10 min')"), 't', 'SQL A reads, fixed 10-minute lease');
	is($j->run('r', 'lock', 'read', $name), 'null', "Java reads on the watchdog (${JWD} ms)");
	my $jk = tkey($name, $j->owner('r'));
	# a renewal round of Java's watchdog: its own key's PTTL goes up again
	my $low;
	RedisLockTest::until_ok("Java's watchdog renews its read hold", sub {
		my $p = $rc->cmd('PTTL', $jk);
		$low = $p if !defined $low || $p < $low;
		return $p > $low + 100;
	}, $T);
	is($j->run('r', 'unlock', 'read', $name), 'null', 'the Java reader leaves');
	redis_time_passes($JWD + 1000, "Java's lease has passed since (Redis's clock)");
	is($rc->cmd('EXISTS', $name), 1, 'the hash is still there');
	ok($rc->cmd('PTTL', $ak) > $JWD, "A's timeout key has more than Java's lease left");
	ok($rc->cmd('PTTL', $name) > $JWD, "the hash has more than Java's lease left");
	is($j->run('w', 'tryLock', 'write', $name), 'false', 'a Java writer cannot get in while A reads');
	is($b->query("SELECT redis_write_lock_acquire($l, '0', '10 min')"), 'f', 'nor can a SQL writer');
	is($a->query("SELECT redis_read_lock_release($l)"), 't', 'A leaves its read hold');
	is($j->run('w', 'tryLock', 'write', $name), 'true', 'now the Java writer gets in');
	$j->try_run('w', 'unlock', 'write', $name);
}

sub r4_check
{
	my ($j, $v) = @_;
	my $name = "rw515:$v:r4";
	my $l = sql_literal($name);
	is($a->query("SELECT redis_read_lock_acquire($l, '0', '10 min')"), 't', 'SQL A reads (10 min)');
	is($j->run('s', 'lock', 'read', $name, 1500), 'null', 'Java reads with a fixed 1500 ms lease');
	my $o = $j->owner('s');
	RedisLockTest::until_ok("the Java reader's timeout key lapses", sub { !$rc->cmd('EXISTS', tkey($name, $o)) }, $T);
	is($rc->cmd('HGET', $name, $o), '1', '... its field stays in the hash, which lives on A');
	is($j->run('w', 'tryLock', 'write', $name), 'false', 'a Java writer waits for it');
	is($a->query("SELECT redis_write_lock_acquire($l, '0', '10 min')"), 'f', "so does SQL A's upgrade");
	is($b->query("SELECT redis_write_lock_acquire($l, '0', '10 min')"), 'f', 'and a SQL writer');
	is($rc->cmd('HGET', $name, $o), '1', "the Java reader's field is untouched");
	my ($r, $err) = $j->try_run('s', 'unlock', 'read', $name);
	is($err, undef, "the Java reader's late unlock finds its hold");
	is($a->query("SELECT redis_write_lock_acquire($l, '0', '10 min')"), 't', 'then A upgrades');
	is($a->query("SELECT redis_write_lock_release($l)"), 't', 'A leaves the write hold');
	is($a->query("SELECT redis_read_lock_release($l)"), 't', 'and the read hold');
}

for my $v (RealRedisson::usable_versions())
{
	my $j = eval { RealRedisson->new(version => $v, port => $redis->port, options => ["watchdog=$JWD"]) };
	if (!$j)
	{
		fail("Redisson $v: the client starts and connects");
		diag($@);
		next;
	}
	note("Redisson $v: client id " . $j->id . ", log " . $j->logfile);
	check($j, 'r1-fixed-read', \&r1_check);
	check($j, 'r4-lapsed-reader', \&r4_check);
	$j->quit;
}

$_->close for ($a, $b);
no_crash_ok($node, 'real Redisson read-write locks');
done_testing();
