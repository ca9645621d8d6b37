# Redlock: a master that answers after the majority keeps its connection.
# One of 3 masters is stopped (SIGSTOP) while a session releases a lock: the
# other two answer, the call returns, and the stopped master's request is
# left in flight.  Once it resumes (SIGCONT) the release must still apply
# there (the hold disappears long before its 1 min lease), and the backend's
# connection to it must survive: same CLIENT ID, not killed, and the late
# replies are read and skipped on the next use, which then works on all 3.
use strict;
use warnings;
use Test::More;
use RedisLockTest;

my $rl = RedisLockTest::Redlock->new(n => 3);
my $node = RedisLockTest::node('redlock_slow', undef,
	'redislock.redlock_nodes' => $rl->list);
my $slow = $rl->node(2);

my $a = RedisLockTest::Session->new($node);
my $owner = $a->query('SELECT redis_lock_owner_id()');

# The ids of the connections that ran our scripts on the slow master.
sub script_clients
{
	return sort map { /\bid=(\d+)\b/ ? $1 : () }
	  grep { /\bcmd=eval(sha)?\b/ } split /\n/, scalar $slow->cli('CLIENT', 'LIST');
}

is($a->query("SELECT redis_lock_acquire('rs:k', '0', '1 min')"), 't', 'A acquires rs:k on 3 masters');
is($slow->cli('HEXISTS', 'rs:k', $owner), 1, 'the slow-to-be master has the hold');
my @ids = script_clients();
is(scalar(@ids), 1, 'one backend connection ran scripts on that master') or diag("@ids");

$slow->pause;
is($a->query("SELECT redis_lock_release('rs:k')"), 't',
	'with the master stopped, the release succeeds on the majority');
$slow->resume;

until_ok('the release applies on the resumed master, well before the lease ends',
	sub { $slow->cli('HEXISTS', 'rs:k', $owner) eq '0' }, 20);

is($a->query("SELECT redis_lock_acquire('rs:j', '0', '1 min')"), 't', 'the next call works');
is($a->query("SELECT masters FROM redis_locks WHERE name = 'rs:j'"), '3/3',
	'... on all 3 masters, the resumed one included');
is($slow->cli('HEXISTS', 'rs:j', $owner), 1, '... which has the new hold');
is_deeply([ script_clients() ], \@ids, 'the connection to the slow master is the same one (CLIENT ID)');
is($a->query("SELECT redis_lock_release('rs:j')"), 't', 'A releases rs:j');
is($rl->holders('rs:j'), 0, '... from every master');

no_crash_ok($node, 'redlock slow master');

done_testing();
