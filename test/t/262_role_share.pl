# 262_role_share.pl — one role cannot take the whole shared lock table.
#
# redislock.max_locks_per_session bounds one session, but a role with several
# connections could still fill redislock.max_locks and make every other
# role's acquisitions fail. redislock.max_locks_per_role (default -1: a
# quarter of max_locks) bounds the entries the sessions of one login role
# take together:
#  - several sessions of an unprivileged role fill its share; the next new
#    lock of any of them fails with 53400 naming the setting, before anything
#    reaches Redis, and a re-entry needs no new entry;
#  - another role, and a superuser (not limited), still acquire;
#  - the share comes back as the role's locks are released and as its
#    sessions end;
#  - the setting is superuser-only; ALTER ROLE ... SET gives one role more.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use Test::More;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('role_share', $redis, 'redislock.max_locks' => '16');
$node->safe_psql('postgres', 'CREATE ROLE app LOGIN; CREATE ROLE other LOGIN');
my $su  = RedisLockTest::Session->new($node);
my $obs = RedisLockTest::observer($node);

# Four sessions of app each try to take four locks, as one role's
# connections would: together they get a quarter of the 16 entries.
my @app = map { RedisLockTest::Session->new($node, user => 'app') } 1 .. 4;
my ($v, $err, $st) = $app[0]->try('SET redislock.max_locks_per_role = 16');
is($st, '42501', 'app may not raise its own share');
my ($got, $refused, $msg) = (0, 0, '');
for my $i (0 .. $#app)
{
	for my $j (1 .. 4)
	{
		($v, $err, $st) = $app[$i]->try("SELECT redis_lock_acquire('rs:$i:$j', '0', '10 min')");
		if (($v // '') eq 't') { $got++; next; }
		$refused++ if ($st // '') eq '53400';
		$msg ||= $err // '';
		is($redis->cli('EXISTS', "rs:$i:$j"), 0, "rs:$i:$j refused: nothing of it in Redis")
		  if $refused == 1;
	}
}
is($got, 4, 'the sessions of app together get 4 of the 16 entries');
is($refused, 12, 'every other new lock of theirs fails with 53400');
like($msg, qr/too many Redis locks held by role "app"/, '... saying the role has too many');
like($msg, qr/redislock\.max_locks_per_role is 4 \(a quarter of redislock\.max_locks\)/,
	'... naming the setting and its value');
($v, $err, $st) = $app[0]->try("SELECT redis_lock_acquire('rs:w')");
is($st, '53400', 'a watchdog-mode lock too');
($v, $err) = $app[0]->try("SELECT redis_lock_acquire('rs:0:1', '0', '10 min')");
is($v, 't', 'a re-entry needs no new entry') or diag($err);

my $o = RedisLockTest::Session->new($node, user => 'other');
($v, $err) = $o->try("SELECT count(*) FILTER (WHERE redis_lock_acquire('ro:' || i, '0', '10 min')) FROM generate_series(1, 4) i");
is($v, 4, 'another role still takes its 4') or diag($err);
is($su->query("SELECT count(*) FILTER (WHERE redis_lock_acquire('rsu:' || i, '0', '10 min')) FROM generate_series(1, 6) i"),
	6, 'a superuser is not limited by the share');
is($obs->query('SELECT count(*) FROM redis_locks'), 14, '14 entries in use');

# the share comes back: by release, and by session end
is($app[0]->query('SELECT count(*) FROM redis_locks WHERE pid = pg_backend_pid()'), 4,
	'the first app session has the 4');
is($app[0]->query('SELECT redis_lock_release_all()'), 4, 'it releases them');
is($app[1]->query("SELECT redis_lock_acquire('rs:again', '0', '10 min')"), 't',
	'another app session gets an entry then');
$_->close for @app;
until_ok('the ended sessions of app hold nothing', sub {
	$obs->query("SELECT count(*) FROM redis_locks WHERE name LIKE 'rs:%'") == 0 });
my $late = RedisLockTest::Session->new($node, user => 'app');
is($late->query("SELECT count(*) FILTER (WHERE redis_lock_acquire('rl:' || i, '0', '10 min')) FROM generate_series(1, 4) i"),
	4, 'a new session of app takes the whole share again');
($v, $err, $st) = $late->try("SELECT redis_lock_acquire('rl:5', '0', '10 min')");
is($st, '53400', '... and no more');
is($late->query('SELECT redis_lock_release_all()'), 4, 'it releases them');

# a role given more by a superuser
$node->safe_psql('postgres', 'ALTER ROLE app SET redislock.max_locks_per_role = 5');
my $more = RedisLockTest::Session->new($node, user => 'app');
is($more->query("SELECT count(*) FILTER (WHERE redis_lock_acquire('rm:' || i, '0', '10 min')) FROM generate_series(1, 5) i"),
	5, 'ALTER ROLE app SET redislock.max_locks_per_role = 5: app takes 5');
($v, $err, $st) = $more->try("SELECT redis_lock_acquire('rm:6', '0', '10 min')");
is($st, '53400', '... and not a 6th');
like($err // '', qr/redislock\.max_locks_per_role is 5\./, '... the message shows the role\'s value');
is($more->query('SELECT redis_lock_release_all()'), 5, 'and releases them');

$_->close for $late, $more, $o;
is($su->query('SELECT redis_lock_release_all()'), 6, 'the superuser releases');
until_ok('the table is empty', sub { $obs->query('SELECT count(*) FROM redis_locks') == 0 });
is($su->query('SHOW redislock.max_locks_per_role'), '-1', 'max_locks_per_role is -1 by default');
is($su->query("SELECT context FROM pg_settings WHERE name = 'redislock.max_locks_per_role'"),
	'superuser', '... a superuser setting');
no_crash_ok($node, 'role share');
done_testing();
