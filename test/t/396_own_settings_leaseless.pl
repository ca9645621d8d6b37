# 396_own_settings_leaseless.pl — a hold without a lease is refused in a
# session whose Redis settings are its own.
#
# The watchdog worker renews lease-less holds with the server's settings
# (postgresql.conf). A session pointed at another Redis (a superuser's SET
# redislock.url, or ALTER ROLE ... SET) used to take such a hold there: the
# worker found nothing on its own Redis, marked it lost, and the real hold
# expired unrenewed. Now every primitive refuses a lease-less hold in such a
# session with 55000, a message naming the server's settings and a hint,
# before anything reaches Redis; with a fixed lease (where the primitive has
# one) it works as before, and a session whose settings match the server's
# (RESET, or SET to the same value) is not refused.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use Test::More;

my $redis = RedisLockTest::Redis->new;
my $other = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('own_settings', $redis);
my $obs   = RedisLockTest::observer($node);

# kind, the lease-less call, the same with a fixed lease (none for a
# semaphore: its permits have no lease), what the lease-less call says
my @cases = (
	[ 'lock', "SELECT redis_lock_acquire('os:lock')",
		"SELECT redis_lock_acquire('os:lock', '0', '1 min') AND redis_lock_release('os:lock')",
		qr/a Redis lock without a lease needs the server's Redis settings/ ],
	[ 'fair lock', "SELECT redis_lock_acquire('os:fair', '0', NULL, true)",
		"SELECT redis_lock_acquire('os:fair', '0', '1 min', true) AND redis_lock_release('os:fair')",
		qr/a Redis lock without a lease/ ],
	[ 'xact lock', "SELECT redis_xact_lock_acquire('os:xlock')",
		"SELECT redis_xact_lock_acquire('os:xlock', '0', '1 min')",
		qr/a Redis lock without a lease/ ],
	[ 'read', "SELECT redis_read_lock_acquire('os:rw')",
		"SELECT redis_read_lock_acquire('os:rw', '0', '1 min') AND redis_read_lock_release('os:rw')",
		qr/a Redis read lock without a lease/ ],
	[ 'xact read', "SELECT redis_xact_read_lock_acquire('os:xrw')",
		"SELECT redis_xact_read_lock_acquire('os:xrw', '0', '1 min')",
		qr/a Redis read lock without a lease/ ],
	[ 'write', "SELECT redis_write_lock_acquire('os:rw')",
		"SELECT redis_write_lock_acquire('os:rw', '0', '1 min') AND redis_write_lock_release('os:rw')",
		qr/a Redis write lock without a lease/ ],
	[ 'xact write', "SELECT redis_xact_write_lock_acquire('os:xrw')",
		"SELECT redis_xact_write_lock_acquire('os:xrw', '0', '1 min')",
		qr/a Redis write lock without a lease/ ],
	[ 'semaphore', "SELECT redis_semaphore_acquire('os:sem', 1)", undef,
		qr/a Redis semaphore needs the server's Redis settings/ ],
	[ 'xact semaphore', "SELECT redis_xact_semaphore_acquire('os:sem', 1)", undef,
		qr/a Redis semaphore needs/ ],
	[ 'permit', "SELECT redis_permit_acquire('os:permit') IS NOT NULL",
		"SELECT redis_permit_release('os:permit', redis_permit_acquire('os:permit', '0', '1 min'))",
		qr/a Redis semaphore permit without a lease/ ],
	[ 'xact permit', "SELECT redis_xact_permit_acquire('os:permit') IS NOT NULL",
		"SELECT redis_xact_permit_acquire('os:permit', '0', '1 min') IS NOT NULL",
		qr/a Redis semaphore permit without a lease/ ],
	[ 'multi-lock', "SELECT redis_lock_acquire_all(ARRAY['os:m1', 'os:m2'])",
		"SELECT redis_lock_acquire_all(ARRAY['os:m1', 'os:m2'], '0', '1 min') AND redis_lock_release('os:m1') AND redis_lock_release('os:m2')",
		qr/a Redis lock without a lease/ ],
	[ 'xact multi-lock', "SELECT redis_xact_lock_acquire_all(ARRAY['os:xm1', 'os:xm2'])",
		"SELECT redis_xact_lock_acquire_all(ARRAY['os:xm1', 'os:xm2'], '0', '1 min')",
		qr/a Redis lock without a lease/ ],
);

# the table covers every acquiring function of the extension
my %covered = map { $_->[1] =~ /\b(redis_\w*acquire\w*)\(/ ? ($1 => 1) : () } @cases;
my @catalog = split /\n/, $node->safe_psql('postgres', q{
	SELECT DISTINCT p.proname FROM pg_proc p
	JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
	JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'redislock'
	WHERE p.proname LIKE '%acquire%' ORDER BY 1});
cmp_ok(scalar @catalog, '>=', 10, 'the catalog lists the acquiring functions');
is(join(' ', grep { !$covered{$_} } @catalog), '', 'every one of them has a case');

# Every case in a session pointed at $other by $how; each lease-less call is
# refused and leaves nothing in either Redis, each leased one works there.
sub refused_everywhere
{
	my ($s, $how) = @_;
	$s->query("SELECT redis_semaphore_try_set_permits('os:sem', 2)");
	$s->query("SELECT redis_permit_try_set_permits('os:permit', 2)");
	for my $c (@cases)
	{
		my ($kind, $leaseless, $leased, $msg) = @$c;
		# keys of both servers before; a refusal adds none (a key of an
		# earlier case may expire meanwhile: the refusal can wait up to 2 s
		# for the worker to read reloaded settings)
		my @before = map { { map { $_ => 1 } $_->cli('KEYS', '*') } } $redis, $other;
		my ($v, $err, $st) = $s->try($leaseless);
		is($st, '55000', "$how, $kind without a lease: 55000") or diag($err // $v);
		like($err // '', $msg, "$how, $kind: the message");
		like($err // '', qr/HINT:.*(Pass a fixed lease, or set|Set) the connection settings for the whole server/s,
			"$how, $kind: the hint");
		my @added = map { my $b = $before[$_]; grep { !$b->{$_} } ($redis, $other)[$_]->cli('KEYS', '*') } 0, 1;
		is(join(' ', @added), '', "$how, $kind: nothing reached either Redis");
		is($s->query('SELECT count(*) FROM redis_locks WHERE pid = pg_backend_pid()'), 0,
			"$how, $kind: nothing in redis_locks");
		next unless defined $leased;
		($v, $err) = $s->try($leased);
		is($v, 't', "$how, $kind with a fixed lease works") or diag($err);
	}
	like($other->cli('GET', 'redisson_lock_token:{os:lock}') // '', qr/^\d+$/,
		"$how: the leased holds were taken on the session's Redis");
}

my $su = RedisLockTest::Session->new($node);
$su->query("SET redislock.url = '" . $other->url . "'");
refused_everywhere($su, 'SET redislock.url');

$node->safe_psql('postgres', 'CREATE ROLE own LOGIN; ALTER ROLE own SET redislock.url = '
	  . RedisLockTest::sql_literal($other->url));
my $own = RedisLockTest::Session->new($node, user => 'own');
refused_everywhere($own, 'ALTER ROLE SET redislock.url');

# the server's settings again, or the same ones set in the session
$su->query('RESET redislock.url');
$su->query("SELECT redis_semaphore_try_set_permits('os:sem2', 1)");
is($su->query("SELECT redis_lock_acquire('os:lock') AND redis_semaphore_acquire('os:sem2', 1, '0')"), 't',
	'after RESET: lease-less holds are taken');
$su->query("SET redislock.url = '" . $redis->url . "'");
is($su->query("SELECT redis_lock_acquire('os:lock2')"), 't',
	'SET to the server\'s own value: taken too');
is($obs->query("SELECT count(*) FROM redis_locks WHERE renewal = 'watchdog'"), 3,
	'three watchdog holds, on the worker\'s Redis');
is($su->query('SELECT redis_lock_release_all()'), 3, 'released');

$_->close for $su, $own;
no_crash_ok($node, 'own settings');
done_testing();
