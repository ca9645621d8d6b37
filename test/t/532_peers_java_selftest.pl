# 532_peers_java_selftest.pl — the ShedLock and Spring Integration peer
# driver (test/peers/java) against a real redis-server, no SQL: that it
# speaks the peer protocol, and that the pinned libraries do on the wire what
# ../shared/reference/lock-clients.md (and test/peers/java/README.md) says,
# seen with MONITOR and PSUBSCRIBE:
#   keys       ShedLock job-lock:<env>:<name> (prefix and env options), value
#              ADDED:<time>@<host>:<uuid>; Spring <registry>:<name>, value the
#              registry's one client id;
#   exclusion  a second instance is refused while one holds; two drivers'
#              exact counter on one name;
#   ShedLock   never waits (tries every 100 ms here); default mode's unlock is
#              a plain DEL and its lockAtLeastFor path and extend a SET XX, so
#              after its own hold ran out they hit whatever key is there;
#              safeUpdate compares first and leaves another's key alone;
#   Spring     unlock/renew compare first (Lua, UNLINK; Redis 7 has no
#              DELEX/SET IFEQ, so the CAS/CAD try falls back); the pub/sub
#              type PUBLISHes <registry>-channel:<registry>:<name> on unlock,
#              its waiter PSUBSCRIBEs <registry>-channel:* and wakes on anyone's
#              publish there, else sleeps out its wait; the spin type polls.
# The driver is built by test/peers/java/build.sh (test/peers/java/README.md).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use Test::More;
use Time::HiRes qw(time sleep);
use IPC::Run ();
use LockPeer;

my $T = 60;    # bound for what should happen at once

# LockPeer checks only that the java build exists: check it is built from
# these sources (test/peers/java/build.sh writes the same stamp)
my $why = LockPeer::check_build('shedlock');
$why //= 'the java peer driver is built from other sources (run: bash test/peers/build.sh java)'
  unless (RedisLockTest::slurp(LockPeer::driver_dir('shedlock') . '/stamp') // '') =~ /^\Q${\LockPeer::source_stamp('java')}\E$/m;
if ($why)
{
	fail('java peer driver available');
	diag($why);
	done_testing();
	exit;
}

my $r   = RedisLockTest::Redis->new;
my $url = $r->url;

# MONITOR and PSUBSCRIBE 'reg-channel:*' into files for the whole test
my $logdir = $PostgreSQL::Test::Utils::log_path // '/tmp';
my ($monf, $subf) = ("$logdir/605_monitor_$$.txt", "$logdir/605_psubscribe_$$.txt");
my @cli = ($RedisLockTest::Redis::CLI, '-h', '127.0.0.1', '-p', $r->port);
my $mon = IPC::Run::start([ @cli, 'MONITOR' ], '<', \undef, '>', $monf, '2>', '/dev/null');
my $sub = IPC::Run::start([ @cli, 'PSUBSCRIBE', 'reg-channel:*' ], '<', \undef, '>', $subf, '2>', '/dev/null');
ok(RedisLockTest::wait_until($T, 'MONITOR and PSUBSCRIBE up', sub {
	$r->cli('CLIENT', 'LIST') =~ /cmd=monitor/ && $r->cli('PUBSUB', 'NUMPAT') >= 1 }), 'MONITOR and PSUBSCRIBE up');
END { local $?; for ($mon, $sub) { $_->kill_kill if $_ } }

# the MONITOR lines matching $re, once everything Redis ran before this call
# is in the file (an ECHO of a marker has come through after it)
my $marks = 0;

sub monitor_lines
{
	my ($re) = @_;
	my $mark = 'monitor-mark-' . ++$marks;
	$r->cli('ECHO', $mark);
	my @l;
	RedisLockTest::wait_until($T, "MONITOR shows $mark", sub {
		open my $fh, '<', $monf or return 0;
		@l = <$fh>;
		return grep { /"ECHO" "$mark"/ } @l;
	}) or die "MONITOR stopped";
	return grep { $_ =~ $re } @l;
}

sub pmessages
{
	open my $fh, '<', $subf or return ();
	my @l = map { chomp; $_ } <$fh>;
	my @m;
	for my $i (0 .. $#l)
	{
		push @m, [ $l[ $i + 2 ], $l[ $i + 3 ] ] if $l[$i] eq 'pmessage' && defined $l[ $i + 3 ];
	}
	return @m;
}

# Spring's CAS/CAD fallback is logged at info by RedisLockRegistry
my %P = (
	shed     => LockPeer->new(client => 'shedlock', urls => [$url]),
	shed2    => LockPeer->new(client => 'shedlock', urls => [$url], options => ['env=default']),
	shedsafe => LockPeer->new(client => 'shedlock', urls => [$url], options => ['safe=true']),
	custom   => LockPeer->new(client => 'shedlock', urls => [$url], options => [ 'env=prod', 'prefix=jobs' ]),
	spin     => LockPeer->new(client => 'spring', urls => [$url], options => [ 'registry=reg', 'type=spin', 'log=info' ]),
	pubsub   => LockPeer->new(client => 'spring', urls => [$url], options => [ 'registry=reg', 'type=pubsub', 'log=info' ]),
);
is($P{shed}->version, '7.10.1', 'ShedLock provider version read from its jar');
is($P{spin}->version, '7.1.2', 'spring-integration-redis version read from its jar');

# --- keys and values ----------------------------------------------------------
is($P{shed}->key('nightly'), 'job-lock:default:nightly', 'ShedLock key: job-lock:<env>:<name>');
is($P{custom}->key('nightly'), 'jobs:prod:nightly', 'ShedLock key with prefix= and env=');
is($P{spin}->key('orders'), 'reg:orders', 'Spring key: <registry>:<name>');
for my $c ([ shed => 'job-lock:default:k1' ], [ custom => 'jobs:prod:k1' ], [ spin => 'reg:k1' ])
{
	my ($p, $key) = @$c;
	is($P{$p}->run('lock', 'k1', 60000, 0), 'true', "$p: lock k1");
	is($r->cli('TYPE', $key), 'string', "$p: $key is a string");
	my $pttl = $r->cli('PTTL', $key);
	ok($pttl > 50000 && $pttl <= 60000, "$p: its PTTL is the lease ($pttl)");
	like($r->cli('GET', $key), qr/^ADDED:\d{4}-\d\d-\d\dT[\d:.]+Z@[^:]+:[0-9a-f-]{36}$/, "$p: value ADDED:<time>\@<host>:<uuid>")
	  if $p ne 'spin';
	is($P{$p}->run('unlock', 'k1'), 'true', "$p: unlock k1");
	is($r->cli('EXISTS', $key), '0', "$p: $key gone after unlock");
}
is($P{spin}->run('lock', 'k2', 60000, 0), 'true', 'spin: lock k2');
is($P{spin}->run('lock', 'k3', 60000, 0), 'true', 'spin: lock k3');
my $cid = $r->cli('GET', 'reg:k2');
like($cid, qr/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, 'Spring value: a UUID');
is($r->cli('GET', 'reg:k3'), $cid, 'Spring value: the same client id for every lock of the registry');
$P{spin}->run('unlock', $_) for qw(k2 k3);
# (PX is lockAtMostUntil less ShedLock's clock now: the lease or a ms less)
ok(monitor_lines(qr/"SET" "job-lock:default:k1" "ADDED:[^"]+" "PX" "(60000|5999\d)" "NX"/),
	'MONITOR: ShedLock acquires with SET key value PX lease NX');
ok(monitor_lines(qr/\[0 lua\] "SET" "reg:k1" "$cid" "PX" "60000"/) || monitor_lines(qr/\[0 lua\] "SET" "reg:k1" "[0-9a-f-]{36}" "PX" "60000"/),
	'MONITOR: Spring acquires with a script: GET, then SET key clientId PX lease');

# --- a second instance is refused while one holds -----------------------------
is($P{shed}->run('lock', 'x', 60000, 0), 'true', 'shed holds x');
is($P{shed2}->run('lock', 'x', 60000, 0), 'false', 'another ShedLock instance is refused (one try)');
my $t0 = time();
my $before = () = monitor_lines(qr/"SET" "job-lock:default:x" .* "NX"/);
is($P{shed2}->run('lock', 'x', 60000, 1000), 'false', 'and refused within wait_ms 1000');
my $tries = (() = monitor_lines(qr/"SET" "job-lock:default:x" .* "NX"/)) - $before;
ok($tries >= 3, "ShedLock never waits: the driver tried again every 100 ms ($tries SET NX in 1 s)");
is($P{shed}->run('lock', 'x', 60000, 0), 'false', 'ShedLock is not reentrant: its own second lock is refused');
is($P{shed}->run('unlock', 'x'), 'true', 'shed unlocks x');
is($P{shed2}->run('lock', 'x', 60000, 0), 'true', 'then shed2 gets x');
is($P{shed2}->run('unlock', 'x'), 'true', 'shed2 unlocks x');

is($P{spin}->run('lock', 'x', 60000, 0), 'true', 'spin holds reg:x');
is($P{pubsub}->run('lock', 'x', 60000, 0), 'false', 'the pub/sub registry (another client id) is refused');
is($P{spin}->run('lock', 'x', 60000, 0), 'true', 'Spring is reentrant in its JVM (same thread, same client id)');
is($P{spin}->run('unlock', 'x'), 'true', 'inner unlock');
is($r->cli('EXISTS', 'reg:x'), '1', 'the key stays after the inner unlock');
is($P{spin}->run('unlock', 'x'), 'true', 'outer unlock');
is($r->cli('EXISTS', 'reg:x'), '0', 'the key is gone after the outer unlock');

# --- exact counter: two instances on one name ----------------------------------
for my $pair ([qw(shed shedsafe)], [qw(spin pubsub)])
{
	my ($a, $b) = @$pair;
	my $ck = "count:$a";
	$P{$a}->start('ca', 'counter', 'ctr', $ck, 100, 60000, 2000);
	$P{$b}->start('cb', 'counter', 'ctr', $ck, 100, 60000, 2000);
	my ($sa, $va) = $P{$a}->result('ca', 4 * $T);
	my ($sb, $vb) = $P{$b}->result('cb', 4 * $T);
	is("$sa $va / $sb $vb", 'ok 100 / ok 100', "$a and $b: 100 rounds each");
	is($r->cli('GET', $ck), 200, "$a and $b: the counter is exactly 200");
}

# --- ShedLock after its hold ran out: default mode hits whatever is there ------
# shed's hold (lease 300 ms) runs out; shed2 takes the job with a
# lockAtLeastFor; shed's late unlock is a plain DEL and deletes shed2's key; a
# third party (SQL, say) takes the key; shed2's unlock, inside its
# lockAtLeastFor, is SET XX with its own value and overwrites the third's.
is($P{shed}->run('lock', 'late', 300, 0), 'true', 'shed holds late for 300 ms');
ok(RedisLockTest::wait_until($T, 'the hold ran out', sub { $r->cli('EXISTS', 'job-lock:default:late') eq '0' }),
	"shed's hold ran out");
is($P{shed2}->run('lock', 'late', 60000, 0, 30000), 'true', 'shed2 takes late (lockAtMostFor 60 s, lockAtLeastFor 30 s)');
my $v2 = $r->cli('GET', 'job-lock:default:late');
is($P{shed}->run('unlock', 'late'), 'true', "shed's late unlock says nothing wrong");
is($r->cli('EXISTS', 'job-lock:default:late'), '0', "default mode: shed's unlock DELeted shed2's key");
ok(monitor_lines(qr/"DEL" "job-lock:default:late"/), 'MONITOR: a plain DEL');
$r->cli('SET', 'job-lock:default:late', 'third-party', 'PX', 600000);
is($P{shed2}->run('unlock', 'late'), 'true', "shed2's unlock inside its lockAtLeastFor says nothing wrong");
is($r->cli('GET', 'job-lock:default:late'), $v2, "default mode: its SET XX overwrote the third party's value with its own");
my $pttl = $r->cli('PTTL', 'job-lock:default:late');
ok($pttl > 0 && $pttl <= 30000, "and gave it the rest of lockAtLeastFor ($pttl ms)");
ok(monitor_lines(qr/"SET" "job-lock:default:late" "\Q$v2\E" "PX" "\d+" "XX"/), 'MONITOR: SET key value PX rest XX');

# extend after the hold ran out: SET XX too
$r->cli('DEL', 'job-lock:default:late');
is($P{shed}->run('lock', 'late', 300, 0), 'true', 'shed holds late for 300 ms again');
my $v1 = $r->cli('GET', 'job-lock:default:late');
ok(RedisLockTest::wait_until($T, 'the hold ran out', sub { $r->cli('EXISTS', 'job-lock:default:late') eq '0' }),
	"shed's hold ran out");
$r->cli('SET', 'job-lock:default:late', 'third-party', 'PX', 600000);
is($P{shed}->run('extend', 'late', 60000), 'true', 'default mode: extend after the hold ran out says true');
is($r->cli('GET', 'job-lock:default:late'), $v1, "and its SET XX overwrote the third party's value");
$r->cli('DEL', 'job-lock:default:late');

# safeUpdate: the same three steps leave the third party's key alone
for my $case ([ 'unlock', [] ], [ 'unlock-least', [30000] ], [ 'extend', [] ])
{
	my ($what, $least) = @$case;
	my $lease = @$least ? 60000 : 300;
	is($P{shedsafe}->run('lock', 'safe', $lease, 0, @$least), 'true', "safe $what: holds safe");
	if (@$least)
	{
		$r->cli('DEL', 'job-lock:default:safe');    # lost early (as shed2's above)
	}
	else
	{
		ok(RedisLockTest::wait_until($T, 'the hold ran out', sub { $r->cli('EXISTS', 'job-lock:default:safe') eq '0' }),
			"safe $what: the hold ran out");
	}
	$r->cli('SET', 'job-lock:default:safe', 'third-party', 'PX', 600000);
	if ($what eq 'extend')
	{
		is($P{shedsafe}->run('extend', 'safe', 60000), 'false', 'safe extend: false');
	}
	else
	{
		is($P{shedsafe}->run('unlock', 'safe'), 'true', "safe $what: unlock says true (ShedLock reports nothing)");
	}
	is($r->cli('GET', 'job-lock:default:safe'), 'third-party', "safe $what: the third party's key is untouched");
	my $t = $r->cli('PTTL', 'job-lock:default:safe');
	ok($t > 300000, "safe $what: and its TTL too ($t ms)");
	$r->cli('DEL', 'job-lock:default:safe');
}
ok(monitor_lines(qr/\[0 lua\] "get" "job-lock:default:safe"/), 'MONITOR: safeUpdate compares in a script first');
is(scalar(monitor_lines(qr/(\[0 lua\] "del" "job-lock:default:safe"|"SET" "job-lock:default:safe" .* "XX")/)), 0,
	'MONITOR: so no delete and no SET XX of it');

# --- Spring: never deletes or renews another's key ------------------------------
for my $p (qw(spin pubsub))
{
	is($P{$p}->run('lock', "gone-$p", 300, 0), 'true', "$p: holds gone-$p for 300 ms");
	ok(RedisLockTest::wait_until($T, 'the hold ran out', sub { $r->cli('EXISTS', "reg:gone-$p") eq '0' }),
		"$p: its hold ran out");
	$r->cli('SET', "reg:gone-$p", 'third-party', 'PX', 600000);
	is($P{$p}->run('extend', "gone-$p", 60000), 'false', "$p: renew after the hold ran out: false");
	my (undef, $e) = $P{$p}->try_run('unlock', "gone-$p");
	like($e // '', qr/ConcurrentModificationException: Lock was released in the store due to expiration/,
		"$p: unlock after the hold ran out: Spring's exception");
	is($r->cli('GET', "reg:gone-$p"), 'third-party', "$p: the third party's key is untouched");
	ok($r->cli('PTTL', "reg:gone-$p") > 300000, "$p: and its TTL too");
}
ok(!grep({ $_->[0] eq 'reg-channel:reg:gone-pubsub' } pmessages()), 'pubsub: a failed unlock publishes nothing');
ok(monitor_lines(qr/\[0 lua\] "UNLINK" "reg:k1"/), 'MONITOR: Spring unlocks with a compare-and-UNLINK script');
ok(RedisLockTest::wait_until($T, 'Spring logged its fallback', sub {
	RedisLockTest::slurp($P{spin}->logfile) =~ /CAS\/CAD for value operations not supported, falling back to Lua script/ }),
	'spin: Redis 7 has no DELEX/SET IFEQ: Spring tried them and fell back to Lua (its log)');

# --- Spring pub/sub: its unlock publishes; its waiter listens -------------------
is($P{spin}->run('lock', 'quiet', 60000, 0), 'true', 'spin holds quiet');
is($P{spin}->run('unlock', 'quiet'), 'true', 'spin unlocks quiet');
is($P{pubsub}->run('lock', 'loud', 60000, 0), 'true', 'pubsub holds loud');
is($P{pubsub}->run('unlock', 'loud'), 'true', 'pubsub unlocks loud');
ok(RedisLockTest::wait_until($T, 'the unlock message', sub { grep { $_->[0] eq 'reg-channel:reg:loud' } pmessages() }),
	'pubsub unlock: PUBLISH reg-channel:reg:loud');
is_deeply([ map { $_->[1] } grep { $_->[0] eq 'reg-channel:reg:loud' } pmessages() ], ['reg:loud'],
	'... once, with the key as the message');
ok(!grep({ $_->[0] =~ /quiet/ } pmessages()), 'spin unlock publishes nothing');

# a pub/sub waiter on a key someone else holds (10-minute TTL): woken by
# that someone's DEL + PUBLISH on the registry's channel.  Its listener
# (PSUBSCRIBE reg-channel:*, a connection of its own) started at its first
# wait (the refused try on x above) and stays; it is listening for reg:w once
# it has tried twice: it registers its wake-up, then tries again, then waits.
ok(scalar(monitor_lines(qr/"PSUBSCRIBE" "reg-channel:\*"/)), 'MONITOR: the pub/sub registry PSUBSCRIBEd reg-channel:*');
ok(RedisLockTest::wait_until($T, 'two psubscribers', sub { (() = $r->cli('CLIENT', 'LIST') =~ /psub=1/g) >= 2 }),
	'... and stays subscribed (ours and its)');
my $obtain_w = qr/"EVAL(?:SHA)?" "[^"]+" "1" "reg:w"/;
my $n0 = () = monitor_lines($obtain_w);
$r->cli('SET', 'reg:w', 'third-party', 'PX', 600000);
$P{pubsub}->start('w1', 'lock', 'w', 60000, 120000);
ok(RedisLockTest::wait_until($T, 'the Spring waiter waits', sub { (() = monitor_lines($obtain_w)) >= $n0 + 2 }),
	'pubsub waiter: tried twice, now waits');
$r->cli('DEL', 'reg:w');
my $tp = time();
$r->cli('PUBLISH', 'reg-channel:reg:w', 'reg:w');
my ($s, $v) = $P{pubsub}->result('w1', $T);
my $at = time();
is("$s $v", 'ok true', 'pubsub waiter: woken by a third party\'s PUBLISH, within its 120 s wait');
diag(sprintf('wake-up: Spring pub/sub waiter after an outside PUBLISH: %.0f ms', 1000 * ($at - $tp))) if $at;
$P{pubsub}->run('unlock', 'w');

# without the PUBLISH it sleeps out its whole wait (then one last try)
$r->cli('SET', 'reg:w', 'third-party', 'PX', 600000);
$n0 = () = monitor_lines($obtain_w);
my $ts = time();
$P{pubsub}->start('w2', 'lock', 'w', 60000, 3000);
ok(RedisLockTest::wait_until($T, 'its tries', sub { (() = monitor_lines($obtain_w)) >= $n0 + 2 }),
	'pubsub waiter: tried twice, now waits');
$r->cli('DEL', 'reg:w');
($s, $v) = $P{pubsub}->result('w2', $T);
$at = time();
is("$s $v", 'ok true', 'pubsub waiter: got it in the end');
ok($at - $ts >= 3.0, sprintf('... only after sleeping out its 3 s wait (%.0f ms): a DEL alone wakes no pub/sub waiter', 1000 * ($at - $ts)));
$P{pubsub}->run('unlock', 'w');

# the spin type polls every 100 ms: a DEL alone lets it in
$r->cli('SET', 'reg:s', 'third-party', 'PX', 600000);
$P{spin}->start('s1', 'lock', 's', 60000, 120000);
ok(RedisLockTest::wait_until($T, 'it polls', sub { (() = monitor_lines(qr/"EVALSHA" "\w+" "1" "reg:s"/)) >= 5 }),
	'spin waiter: polls (5 tries seen)');
my @ts = map { /^(\d+\.\d+)/ ? $1 : () } monitor_lines(qr/"EVALSHA" "\w+" "1" "reg:s"/);
diag(sprintf('spin poll intervals: %s ms', join(' ', map { sprintf('%.0f', 1000 * ($ts[$_] - $ts[ $_ - 1 ])) } 1 .. $#ts)));
$tp = time();
$r->cli('DEL', 'reg:s');
($s, $v) = $P{spin}->result('s1', $T);
$at = time();
is("$s $v", 'ok true', 'spin waiter: in after the DEL, within its 120 s wait');
diag(sprintf('wake-up: Spring spin waiter after an outside DEL: %.0f ms', 1000 * ($at - $tp))) if $at;
$P{spin}->run('unlock', 's');
ok(!grep({ $_->[0] =~ /reg:s$/ } pmessages()), 'spin: no publish');

# --- the protocol -------------------------------------------------------------
my (undef, $e) = $P{shed}->try_run('unlock', 'never');
like($e, qr/holds no lock named never/, 'unlock of a name not held: err');
(undef, $e) = $P{shed}->try_run('frob');
like($e, qr/unknown op frob/, 'unknown op: err');
(undef, $e) = $P{spin}->try_run('lock', 'z', 1000, 0, 500);
like($e, qr/no lockAtLeastFor/, 'Spring: a least_ms is refused');
(undef, $e) = $P{shed}->try_run('lock', 'z', 1000, 0, 5000);
like($e, qr/lockAtLeastFor is longer than lockAtMostFor/, "ShedLock's own check of least_ms");

done_testing();
