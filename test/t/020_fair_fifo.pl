# 020_fair_fifo.pl — fair locks hand over in arrival order; non-fair locks
# go to one waiter at a time.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $T = 60;

my $redis = RedisLockTest::Redis->new;
# live waiters refresh their place; a long fair_wait_timeout keeps this test
# independent of how often they do
my $node = RedisLockTest::node('fifo', $redis,
	'redislock.fair_wait_timeout' => '120s');
my $rc = FakeRedisson::Conn->new(port => $redis->port);

sub fifo_round
{
	my ($name, $nwait, $label) = @_;
	my $qname = $name;
	my $a = RedisLockTest::Session->new($node);
	my $lit = $name;
	utf8::decode($lit);    # DBD::Pg wants characters; Redis sees the UTF-8 bytes
	$lit =~ s/'/''/g;
	is($a->query("SELECT redis_lock_acquire('$lit', '0', '10 min', true)"), 't',
		"$label: A holds the fair lock");

	my (@w, @ids);
	for my $i (1 .. $nwait)
	{
		my $s = RedisLockTest::Session->new($node);
		push @ids, $s->query('SELECT redis_lock_owner_id()');
		$s->start("SELECT redis_lock_acquire('$lit', NULL, '10 min', true)");
		until_ok("$label: waiter $i enqueued",
			sub { fair_queue_len($rc, $qname) == $i });
		push @w, $s;
	}
	is_deeply(fair_queue($rc, $qname), \@ids, "$label: queue holds the waiters in arrival order");
	is(fair_timeout_count($rc, $qname), $nwait, "$label: one timeout entry per waiter");
	is($a->query("SELECT queue_length FROM redis_lock_status('$lit')"), $nwait,
		"$label: redis_lock_status queue_length");
	for my $i (0 .. $#w)
	{
		waits_ok($w[$i]);
	}

	# a newcomer may not jump the queue
	my $n = RedisLockTest::Session->new($node);
	is($n->query("SELECT redis_lock_acquire('$lit', '0', '10 min', true)"), 'f',
		"$label: a fair newcomer with wait 0 does not jump the queue");
	is(fair_queue_len($rc, $qname), $nwait, "$label: ...and is not left in the queue");
	$n->close;

	is($a->query("SELECT redis_lock_release('$lit')"), 't', "$label: A releases");
	for my $i (0 .. $#w)
	{
		my $winner = first_done_ok("$label: a waiter returns after release $i",
			map { $_ < $i ? undef : $w[$_] } 0 .. $#w);
		last unless defined $winner;
		is($winner, $i, "$label: waiter " . ($i + 1) . " (next in arrival order) returns");
		my ($v, $err, $st) = $w[$winner]->finish($T);
		is($v, 't', "$label: waiter " . ($i + 1) . " got the lock")
		  or diag("err=$err state=$st");
		is($rc->cmd('HGET', $name, $ids[$i]), '1', "$label: Redis holder is waiter " . ($i + 1));
		is(scalar(@{ $rc->cmd('HGETALL', $name) }), 2, "$label: single holder field");
		is_deeply(fair_queue($rc, $qname), [ @ids[ $i + 1 .. $#ids ] ],
			"$label: the rest of the queue is unchanged");
		for my $j ($i + 1 .. $#w)
		{
			ok(!$w[$j]->is_done, "$label: waiter " . ($j + 1) . " still waiting");
		}
		is($w[$i]->query("SELECT redis_lock_release('$lit')"), 't',
			"$label: waiter " . ($i + 1) . " releases");
	}
	is($rc->cmd('EXISTS', $name), 0, "$label: lock free at the end");
	is(fair_queue_len($rc, $qname), 0, "$label: queue empty at the end");
	is(fair_timeout_count($rc, $qname), 0, "$label: timeout set empty at the end");
	$_->close for @w, $a;
}

fifo_round('fifo:1', 5, 'fair');
# unusual names: braces (no {} wrapping of the queue key), quote, space, UTF-8
fifo_round("job {7} it's \xc5\xbc\xc3\xb3\xc5\x82w", 3, 'fair, odd name');

# --- non-fair: one waiter per release -------------------------------------------
{
	my $name = 'nonfair:1';
	my $a = RedisLockTest::Session->new($node);
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't',
		'non-fair: A holds');
	my @w = map { RedisLockTest::Session->new($node) } 1 .. 4;
	for my $s (@w)
	{
		$s->start("SELECT redis_lock_acquire('$name', NULL, '10 min')");
		waits_ok($s);
	}
	is(fair_queue_len($rc, $name), 0, 'non-fair waiters use no queue');
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'non-fair: A releases');
	my %done;
	for my $round (1 .. @w)
	{
		my $winner = first_done_ok("non-fair round $round: a waiter returns",
			map { $done{$_} ? undef : $w[$_] } 0 .. $#w);
		last unless defined $winner;
		my ($v, $err) = $w[$winner]->finish($T);
		is($v, 't', "non-fair round $round: the returning waiter holds the lock")
		  or diag($err);
		$done{$winner} = 1;
		is(scalar(@{ $rc->cmd('HGETALL', $name) }), 2,
			"non-fair round $round: exactly one holder");
		my @still = grep { !$done{$_} } 0 .. $#w;
		is(scalar(grep { $w[$_]->is_done } @still), 0,
			"non-fair round $round: no other waiter returned");
		is($w[$winner]->query("SELECT redis_lock_release('$name')"), 't',
			"non-fair round $round: release");
	}
	is($rc->cmd('EXISTS', $name), 0, 'non-fair: lock free at the end');
	$_->close for @w, $a;
}

done_testing();
