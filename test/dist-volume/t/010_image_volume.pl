# 010_image_volume.pl — redislock loaded from an extension directory of its
# own (make dist-volume), as a PostgreSQL 18+ image loads it from an image
# volume: extension_control_path, dynamic_library_path and
# shared_preload_libraries point there, and the system's directories hold
# nothing of redislock or hiredis (test/dist-volume/run.sh hides them and
# names the directory in REDISLOCK_DIST_VOLUME).  Checks that nothing else
# could have been used (the system's directories, the library's needs, what
# the backends and the watchdog map), then that the extension works from
# there: CREATE EXTENSION, a lock taken, a second session waiting for it
# and woken by its release, the watchdog renewing a lock (its PTTL in
# Redis going up again, renewed_at advancing).  About 15 s.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../../lib", "$FindBin::RealBin/../../redisson";
use RedisLockTest;
use FakeRedisson;    # redis_cmd's connection
use Test::More;

my $V = $ENV{REDISLOCK_DIST_VOLUME}
  or BAIL_OUT('REDISLOCK_DIST_VOLUME is not set: run test/dist-volume/run.sh');
my $SO = "$V/lib/redislock.so";

sub pgc { my $v = `pg_config --$_[0]`; chomp $v; $v }
my ($pkglibdir, $sharedir) = (pgc('pkglibdir'), pgc('sharedir'));

# --- 1. nothing but the volume ----------------------------------------------------
ok(-f "$V/share/extension/redislock.control", 'the volume has share/extension/redislock.control');
# the version the volume's control file offers (not a literal: every release changes it)
my ($version) = map { /^default_version = '([^']+)'/ ? $1 : () }
  split /\n/, do { local (@ARGV, $/) = ("$V/share/extension/redislock.control"); <> };
ok(-f $SO, 'the volume has lib/redislock.so');
ok(!-e "$pkglibdir/redislock.so", "no redislock.so in the server's pkglibdir ($pkglibdir)");
ok(!-e "$sharedir/extension/redislock.control", "no redislock.control in $sharedir/extension");
my @hiredis = grep { /hiredis/ } split /\n/, `ldconfig -p`;
my @present = grep { -e } map { /=> (\S+)/ ? $1 : () } @hiredis;
is_deeply(\@present, [], "no libhiredis in the dynamic linker's directories");
my $ldd = `ldd $SO 2>&1`;
is($?, 0, 'ldd reads the library') or diag($ldd);
unlike($ldd, qr/not found/, 'every library the volume\'s redislock.so needs is found') or diag($ldd);
unlike($ldd, qr/hiredis/, '... and none of them is hiredis (linked in)') or diag($ldd);
like(`nm -D --defined-only $SO 2>/dev/null`, qr/\bredis_lock_acquire\b/,
	'the library exports the SQL functions');
unlike(`nm -D --defined-only $SO 2>/dev/null`, qr/\bredisConnect/,
	'... but not hiredis\'s functions (kept inside: no clash with another hiredis)');

# --- 2. a server configured as an image volume is mounted -----------------------
# extension_control_path names the directory holding extension/ (PostgreSQL
# adds "extension" to each entry); $system keeps the server's own ones.
my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node(
	'volume', $redis,
	preload                    => 0,
	create_extension           => 0,
	shared_preload_libraries   => 'redislock',
	extension_control_path     => "\$system:$V/share",
	dynamic_library_path       => "$V/lib:\$libdir",
	'redislock.watchdog_timeout' => '3s');
my $obs = RedisLockTest::observer($node);

is($obs->query(
		"SELECT default_version FROM pg_available_extensions WHERE name = 'redislock'"),
	$version, "pg_available_extensions finds redislock $version through extension_control_path");
$obs->query('CREATE EXTENSION redislock');
is($obs->query("SELECT extversion FROM pg_extension WHERE extname = 'redislock'"),
	$version, "CREATE EXTENSION redislock: $version");

# A process's mapped files: the volume's library, no other redislock.so, no hiredis.
sub maps_ok
{
	my ($pid, $what) = @_;
	my %files = map { (split ' ', $_, 6)[5] // '' => 1 } split /\n/, slurp("/proc/$pid/maps");
	my @redislock = grep { m{/redislock\.so$} } keys %files;
	is_deeply(\@redislock, [$SO], "$what maps the volume's redislock.so and no other");
	is_deeply([ grep { /hiredis/ } keys %files ], [], "$what maps no hiredis library");
}

my $sa = RedisLockTest::Session->new($node);
my $sb = RedisLockTest::Session->new($node);
is($sa->query("SELECT redis_lock_acquire('volume:k')"), 't', 'A takes volume:k');
maps_ok($sa->pid, 'a backend that called redislock');
my $worker;
until_ok('the watchdog worker runs', sub { $worker = RedisLockTest::watchdog_pids($obs); defined $worker });
maps_ok($worker, 'the watchdog worker');

# --- 3. a wait, woken by the release -------------------------------------------------
$sb->start("SELECT redis_lock_acquire('volume:k', '60s')");
ok(RedisLockTest::wait_for_extension_wait($node, $sb->pid, 30), 'B waits for volume:k');
is($sa->query("SELECT redis_lock_release('volume:k')"), 't', 'A releases volume:k');
my ($got, $err) = $sb->finish(30);
is($got, 't', 'B is woken and takes volume:k') or diag($err);

# --- 4. the watchdog renews B's hold -------------------------------------------------
# Lease 3 s, renewed every third of it: the key's PTTL only falls between
# renewals, so a PTTL above one read before is a renewal.
my $first = redis_cmd($redis, 'PTTL', 'volume:k');
ok($first > 0 && $first <= 3000, "volume:k has the watchdog's lease in Redis (PTTL $first ms)");
my $renewed0 = $obs->query(
	"SELECT coalesce(renewed_at, '-infinity') FROM redis_locks WHERE name = 'volume:k'");
my $low = $first;
until_ok('the watchdog renews volume:k: its PTTL goes up again', sub {
		my $p = redis_cmd($redis, 'PTTL', 'volume:k');
		return 1 if $p > $low;
		$low = $p;
		return 0;
	});
until_ok('redis_locks.renewed_at advances', sub {
		($obs->query("SELECT renewed_at > '$renewed0' FROM redis_locks WHERE name = 'volume:k'")
			  // '') eq 't';
	});
ok($obs->query('SELECT renewals FROM redis_lock_stats') > 0, 'redis_lock_stats counts renewals');
is($sb->query("SELECT redis_lock_release('volume:k')"), 't', 'B releases volume:k');
is(redis_cmd($redis, 'EXISTS', 'volume:k'), 0, 'volume:k is gone from Redis');

no_crash_ok($node, 'the volume-loaded server');
$_->close for $sa, $sb;
$node->stop;
done_testing();
