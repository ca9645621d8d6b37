# The real-client peer drivers (test/peers: redsync, node redlock, redis-py)
# against real redis-servers, no SQL: each client's key, value and lease on
# the wire, its lock refused while another driver holds, its wait ending when
# the holder unlocks, its unlock and extend refused on a key whose value is
# not its own (it never deletes another holder's key), Redlock over 3
# masters (quorum, clean-up of a minority), node redlock's several resources
# at once, and an exact counter raced by two drivers of different clients —
# both libraries exclude each other on the wire.  This proves the drivers
# before test 540 pits them against SQL sessions.
use strict;
use warnings;
use Test::More;
use RedisLockTest;
use LockPeer;

my @CLIENTS = qw(redsync redlock redispy);
# the value each library writes (test/peers/README.md)
my %VALUE = (
	redsync => qr{^[A-Za-z0-9+/]{22}==$},    # base64 of 16 random bytes
	redlock => qr{^[0-9a-f]{32}$},           # 16 random bytes, hex
	redispy => qr{^[0-9a-f]{32}$},           # uuid1().hex
);
my $T = 60;    # bound for anything that should end at once

my @usable;
for my $c (@CLIENTS)
{
	my $why = LockPeer::check_build($c);
	ok(!$why, "$c: driver built") or diag $why;
	push @usable, $c unless $why;
}

my $r  = RedisLockTest::Redis->new;
my $rl = RedisLockTest::Redlock->new(n => 3);

for my $c (@usable)
{
	my $a = LockPeer->new(client => $c, urls => [ $r->url ]);
	my $b = LockPeer->new(client => $c, urls => [ $r->url ]);
	note "$c: " . $a->versions;
	my $k = "st:$c:a";

	is($a->key($k), $k, "$c: the key is the name");
	is($a->run('lock', $k, 30000, 0), 'true', "$c: lock");
	like($r->cli('GET', $k), $VALUE{$c}, "$c: the value's shape");
	my $pttl = $r->cli('PTTL', $k);
	ok($pttl > 0 && $pttl <= 30000, "$c: the lease is the key's PX ($pttl ms)");
	is($b->run('lock', $k, 30000, 0), 'false', "$c: a second driver is refused (one try)");
	is($b->run('lock', $k, 30000, 400), 'false', "$c: and refused after waiting 400 ms");

	my $held = $r->cli('GET', $k);
	$b->start('w', 'lock', $k, 30000, 30000);
	ok(!defined $b->poll('w'), "$c: a second driver waits");
	is($a->run('unlock', $k), 'true', "$c: unlock");
	is_deeply([ $b->result('w', $T) ], [ 'ok', 'true' ], "$c: the waiter got it when the holder unlocked");
	my $bval = $r->cli('GET', $k);
	like($bval, $VALUE{$c}, "$c: held by the waiter");
	isnt($bval, $held, "$c: with a value of its own");
	is($b->run('unlock', $k), 'true', "$c: the waiter unlocks");
	is($r->cli('EXISTS', $k), 0, "$c: unlock deletes the key");

	# extend: the library's, to a new lease
	is($a->run('lock', $k, 2000, 0), 'true', "$c: lock with a 2 s lease");
	is($a->run('extend', $k, 60000), 'true', "$c: extend");
	ok($r->cli('PTTL', $k) > 2000, "$c: extend set the new lease");
	is($a->run('unlock', $k), 'true', "$c: unlock after extend");

	# another holder's value (as SQL's): never deleted, never extended
	is($a->run('lock', $k, 30000, 0), 'true', "$c: lock, then the key changes hands");
	$r->cli('SET', $k, 'someone-else', 'PX', 60000);
	my ($v, $err) = $a->try_run('unlock', $k);
	ok(defined $err, "$c: unlock of a key now someone else's fails") and note "$c: $err";
	is($r->cli('GET', $k), 'someone-else', "$c: and leaves it alone");
	is($a->run('lock', $k, 30000, 0), 'false', "$c: lock refused while someone else holds");
	$r->cli('DEL', $k);

	is($a->run('lock', $k, 30000, 0), 'true', "$c: lock again");
	$r->cli('SET', $k, 'someone-else', 'PX', 60000);
	is($a->run('extend', $k, 90000), 'false', "$c: extend of a key now someone else's is refused");
	ok($r->cli('PTTL', $k) <= 60000, "$c: and its lease is left alone");
	$r->cli('DEL', $k);

	# a lease runs out: the key expires and another driver gets it
	is($a->run('lock', $k, 300, 0), 'true', "$c: lock with a 300 ms lease");
	until_ok("$c: the key expires with its lease", sub { $r->cli('EXISTS', $k) == 0 });
	is($b->run('lock', $k, 30000, 0), 'true', "$c: another driver gets it after the lease");
	is($b->run('unlock', $k), 'true', "$c: and unlocks");
	$a->quit;
	$b->quit;
}

# --- Redlock over 3 masters -------------------------------------------------
my @urls = map { $_->url } $rl->nodes;
for my $c (grep { $LockPeer::REDLOCK{$_} } @usable)
{
	my $a = LockPeer->new(client => $c, urls => \@urls);
	my $b = LockPeer->new(client => $c, urls => \@urls);
	my $k = "st:$c:rl";
	is($a->run('lock', $k, 30000, 0), 'true', "$c Redlock: lock");
	my @vals = map { $_->cli('GET', $k) } $rl->nodes;
	like($vals[0], $VALUE{$c}, "$c Redlock: the value's shape");
	is_deeply(\@vals, [ ($vals[0]) x 3 ], "$c Redlock: the same key and value on every master");
	is($b->run('lock', $k, 30000, 0), 'false', "$c Redlock: a second driver is refused");
	is($a->run('unlock', $k), 'true', "$c Redlock: unlock");
	is($rl->holders($k), 0, "$c Redlock: unlock deletes it on every master");

	# one master's key is someone else's: a quorum of 2 of 3 still locks,
	# and unlock leaves that master's key alone
	$rl->node(0)->cli('SET', $k, 'someone-else', 'PX', 60000);
	is($a->run('lock', $k, 30000, 0), 'true', "$c Redlock: locks with 2 of 3 masters");
	is($a->run('unlock', $k), 'true', "$c Redlock: unlocks on its quorum");
	is($rl->node(0)->cli('GET', $k), 'someone-else', "$c Redlock: the third master's key untouched");
	is($rl->holders($k), 1, "$c Redlock: its own keys deleted");

	# two masters' keys are someone else's: refused, and the key it set
	# on the free master is cleaned up
	$rl->node(1)->cli('SET', $k, 'someone-else', 'PX', 60000);
	is($a->run('lock', $k, 30000, 0), 'false', "$c Redlock: refused with 2 of 3 masters taken");
	is($rl->node(2)->cli('EXISTS', $k), 0, "$c Redlock: a refused lock leaves no key behind");
	$_->cli('DEL', $k) for $rl->nodes;
	$a->quit;
	$b->quit;
}

# --- node redlock: several resources in one lock -----------------------------
if (grep { $_ eq 'redlock' } @usable)
{
	my $a = LockPeer->new(client => 'redlock', urls => [ $r->url ]);
	my $b = LockPeer->new(client => 'redlock', urls => [ $r->url ]);
	is($a->key('st:m1,st:m2'), 'st:m1,st:m2', 'redlock multi: the keys are the names');
	is($a->run('lock', 'st:m1,st:m2', 30000, 0), 'true', 'redlock multi: lock two resources');
	my ($v1, $v2) = map { $r->cli('GET', $_) } qw(st:m1 st:m2);
	like($v1, $VALUE{redlock}, 'redlock multi: first key set');
	is($v2, $v1, 'redlock multi: both keys with one value');
	is($b->run('lock', 'st:m2', 30000, 0), 'false', 'redlock multi: one of them alone is refused');
	is($b->run('lock', 'st:m3,st:m2', 30000, 0), 'false', 'redlock multi: a set overlapping it is refused');
	is($r->cli('EXISTS', 'st:m3'), 0, 'redlock multi: all or nothing (st:m3 not taken)');
	is($a->run('unlock', 'st:m1,st:m2'), 'true', 'redlock multi: unlock by the joined name');
	is($r->cli('EXISTS', 'st:m1', 'st:m2'), 0, 'redlock multi: unlock deletes every key');
	$r->cli('SET', 'st:m2', 'someone-else', 'PX', 60000);
	is($a->run('lock', 'st:m1,st:m2', 30000, 0), 'false', 'redlock multi: refused when one key is taken');
	is($r->cli('EXISTS', 'st:m1'), 0, 'redlock multi: and takes none of them');
	$r->cli('DEL', 'st:m2');
	$a->quit;
	$b->quit;
}

# --- an exact counter raced by two clients -----------------------------------
# Each round reads the counter, sleeps hold_ms holding the lock, writes it
# + 1: without mutual exclusion the two sides' rounds overlap and updates
# are lost.  gap_ms after each unlock lets the other side in (hand-offs).
my $N = 25;
my @pairs = ([ 'redsync', 'redispy' ], [ 'redlock', 'redsync' ], [ 'redispy', 'redlock' ]);
for my $pair (@pairs)
{
	my ($x, $y) = @$pair;
	next unless (grep { $_ eq $x } @usable) && (grep { $_ eq $y } @usable);
	my $ck = "st:count:$x:$y";
	my @p = map { LockPeer->new(client => $_, urls => [ $r->url ]) } $x, $y;
	$_->start('c', 'counter', 'st:counted', $ck, $N, 30000, 30000, 5, 10) for @p;
	is_deeply([ $p[$_]->result('c', 120) ], [ 'ok', $N ], "counter $x vs $y: $pair->[$_] did $N rounds")
	  for 0 .. 1;
	is($r->cli('GET', $ck), 2 * $N, "counter $x vs $y: exactly " . 2 * $N . ' (no update lost)');
	$_->quit for @p;
}
if ((grep { $_ eq 'redsync' } @usable) && (grep { $_ eq 'redlock' } @usable))
{
	my @p = map { LockPeer->new(client => $_, urls => \@urls) } qw(redsync redlock);
	$_->start('c', 'counter', 'st:counted', 'st:count:rl', $N, 30000, 30000, 5, 10) for @p;
	is_deeply([ $p[$_]->result('c', 120) ], [ 'ok', $N ], "counter Redlock redsync vs redlock: side $_ did $N rounds")
	  for 0 .. 1;
	is($rl->node(0)->cli('GET', 'st:count:rl'), 2 * $N, 'counter Redlock redsync vs redlock: exactly ' . 2 * $N);
	$_->quit for @p;
}

done_testing();
