# 250_redlock_status_holders.pl — redis_lock_status() over 3 Redlock masters
# counts exactly the holders a majority has, however many there are (issue 9,
# item 1: the holder array was sized by the number of masters and overflowed
# as soon as a lock had more holders than twice that). The holders are a
# Redisson read-write lock's readers: 40, then 2,000 on every master, then
# 40 that only a majority shares (plus 20 on one master, which do not
# count). The backend must survive and report the exact count every time.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use Test::More;

my $rl = RedisLockTest::Redlock->new(n => 3);
my $node = RedisLockTest::node('rlstatus', undef,
	'redislock.redlock_nodes' => $rl->list);
my $s = RedisLockTest::Session->new($node);

my $uuid = '0b7e6a4c-2f1d-4b8e-9c3a-5d6f7e8a9b0c';

# A Redisson RReadWriteLock held for reading by threads $from .. $to.
sub readers
{
	my ($r, $key, $from, $to) = @_;
	my @pairs = map { ("$uuid:$_", 1) } $from .. $to;
	while (my @chunk = splice(@pairs, 0, 400))
	{
		$r->cli('HSET', $key, @chunk);
	}
	$r->cli('HSET', $key, 'mode', 'read');
	$r->cli('PEXPIRE', $key, 600000);
}

sub status_holders
{
	my ($key) = @_;
	my ($v, $err) = $s->try(
		"SELECT cardinality(holders) FROM redis_lock_status('$key')");
	diag($err) if defined $err;
	return $v;
}

readers($_, 'rw:40', 1, 40) for $rl->nodes;
is(status_holders('rw:40'), 40, '40 readers on every master: exactly 40 holders');
is($s->query("SELECT locked FROM redis_lock_status('rw:40')"), 't', '... and locked');
is($s->query("SELECT count(*) FROM redis_lock_nodes('rw:40') WHERE cardinality(holders) = 40"), 3,
	'redis_lock_nodes: 40 holders on each of the 3 masters');

readers($_, 'rw:2000', 1, 2000) for $rl->nodes;
is(status_holders('rw:2000'), 2000, '2,000 readers on every master: exactly 2,000 holders');

# masters 0 and 1 have readers 1..40, master 2 has 21..60: 1..40 are on a
# majority, 41..60 on one master only
readers($rl->node(0), 'rw:split', 1, 40);
readers($rl->node(1), 'rw:split', 1, 40);
readers($rl->node(2), 'rw:split', 21, 60);
is(status_holders('rw:split'), 40, 'readers on a majority count, those on one master do not');
is($s->query("SELECT min(split_part(h, ':', 2)::int) || '-' || max(split_part(h, ':', 2)::int) "
		. "FROM redis_lock_status('rw:split'), unnest(holders) AS h WHERE h ~ ':[0-9]+\$'"), '1-40',
	'... readers 1 to 40');

is($s->query('SELECT 1'), 1, 'the backend is still there');
no_crash_ok($node, 'redlock status with many holders');
$s->close;
$node->stop('fast');
done_testing();
