# 545_plain_shedlock_spring.pl — SQL sessions under the plain layout against
# the real ShedLock Redis provider (default mode and safeUpdate) and Spring
# Integration's RedisLockRegistry (spin and pub/sub types), through
# test/peers/java (one JVM per client mode, LockPeer):
#   counter    an exact counter bumped under the lock by the client's own
#              counter op and by two SQL sessions (the test's GET/SET while
#              the session holds), each side starting its next round only
#              once the other has made one, so the lock changes hands every
#              round; counted hand-offs;
#   wake       a SQL waiter is woken when the client unlocks (by keyspace
#              notifications, by polling without them, and by Spring's own
#              unlock channel with redislock.spring_registries) and when the
#              client's lease runs out; the client holds on a 10-minute lease
#              where only its unlock can explain a wake;
#   refused    the client is refused while SQL holds (a session's or a
#              transaction's lock), and its waiting lock gets it at COMMIT
#              and when the SQL session ends (a Spring pub/sub waiter told by
#              the release's message on its channel);
#   watchdog   SQL's watchdog (redislock.watchdog_timeout 1 s) keeps its key
#              while the client tries for 6 of its own leases;
#   foreign    after the client's own hold ran out and SQL took the key, the
#              client's unlock and extend leave SQL's key alone — except
#              ShedLock's default mode: its unlock is a plain DEL and its
#              extend and lockAtLeastFor unlock a SET XX, which delete or
#              overwrite SQL's key (asserted as the documented hazard;
#              safeUpdate(true) compares first and cannot);
#   spring     with SET redislock.spring_registries = 'reg' a SQL release
#              publishes on reg-channel:reg:<name> and wakes a pub/sub-type
#              Spring waiter at once; without it the waiter sleeps out its
#              wait.
# Wake-up latencies per path are printed (diag) at the end: for a SQL waiter
# from the moment the lock became free (the client's unlock answered, or the
# key's expiry from its PTTL) to clock_timestamp() after redis_lock_acquire
# returned, a polling waiter having waited 1 s first (as 540); for a client
# waiter from the SQL release to its answer.  REDISLOCK_INTEROP_OUT=DIR:
# DIR/545_plain_shedlock_spring.clients, per mode and check (540's columns).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use LockPeer;
use Test::More;
use Time::HiRes qw(time);
use IPC::Run ();

my $T    = 60;        # bound for what should happen at once
my $LONG = 600000;    # a 10-minute lease, ms

my $why = LockPeer::check_build('shedlock');
$why //= 'the java peer driver is built from other sources (run: bash test/peers/build.sh java)'
  unless RedisLockTest::slurp(LockPeer::driver_dir('shedlock') . '/stamp') =~ /^\Q${\LockPeer::source_stamp('java')}\E$/m;
if ($why)
{
	fail('java peer driver available');
	diag($why);
	done_testing();
	exit;
}

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('plain_java', $redis, 'redislock.watchdog_timeout' => '1s');
my $rc    = FakeRedisson::Conn->new(port => $redis->port);
my $url   = $redis->url;

# MONITOR into a file: when a Spring pub/sub waiter is waiting
my $monf = ($PostgreSQL::Test::Utils::log_path // '/tmp') . "/615_monitor_$$.txt";
my $mon = IPC::Run::start([ $RedisLockTest::Redis::CLI, '-h', '127.0.0.1', '-p', $redis->port, 'MONITOR' ],
	'<', \undef, '>', $monf, '2>', '/dev/null');
END { local $?; $mon->kill_kill if $mon }
until_ok('MONITOR up', sub { $rc->cmd('CLIENT', 'LIST') =~ /cmd=monitor/ });

# how many MONITOR lines match $re, once everything Redis ran before this
# call is in the file (an ECHO of a marker has come through after it)
my $marks = 0;

sub monitor_count
{
	my ($re) = @_;
	my $mark = 'monitor-mark-' . ++$marks;
	$rc->cmd('ECHO', $mark);
	my @l;
	RedisLockTest::wait_until($T, "MONITOR shows $mark", sub {
		open my $fh, '<', $monf or return 0;
		@l = <$fh>;
		return grep { /"ECHO" "$mark"/ } @l;
	}) or die "MONITOR stopped";
	return scalar grep { $_ =~ $re } @l;
}

sub notifications
{
	my ($on) = @_;
	$rc->cmd('CONFIG', 'SET', 'notify-keyspace-events', $on ? 'Kgx' : '');
}

# a SQL session under the plain layout; spring => 1: with the registry named
sub sql_session
{
	my (%o) = @_;
	my $s = RedisLockTest::Session->new($node);
	$s->query("SET redislock.layout = 'plain'");
	$s->query("SET redislock.spring_registries = 'reg'") if $o{spring};
	return $s;
}

my %P = (
	'shedlock'      => LockPeer->new(client => 'shedlock', urls => [$url]),
	'shedlock-safe' => LockPeer->new(client => 'shedlock', urls => [$url], options => ['safe=true']),
	'spring-spin'   => LockPeer->new(client => 'spring', urls => [$url], options => [ 'registry=sreg', 'type=spin' ]),
	'spring-pubsub' => LockPeer->new(client => 'spring', urls => [$url], options => [ 'registry=reg', 'type=pubsub' ]),
);
my @MODES = ('shedlock', 'shedlock-safe', 'spring-spin', 'spring-pubsub');
my %lat;    # path => [ [mode, ms], ... ]

sub key_of { $P{ $_[0] }->key($_[1]) }

sub lat
{
	my ($path, $m, $ms) = @_;
	push @{ $lat{$path} }, [ $m, $ms ];
	note(sprintf('wake %-58s %-14s %7.1f ms', $path, $m, $ms));
	return sprintf('%.1f ms', $ms);
}

# A SQL acquire that returns the server's clock when it got the lock (else f)
sub acquire_ts
{
	my ($key, $wait, $lease) = @_;
	return "SELECT CASE WHEN redis_lock_acquire('$key', '$wait', '$lease') "
	  . "THEN extract(epoch FROM clock_timestamp())::text ELSE 'f' END";
}

# Each mode's outcome per check, for REDISLOCK_INTEROP_OUT (the columns of
# 540's file, test/peers/README.md): works when no test failed during the
# check, else fails; "the client cannot extend or delete SQL's key" says what
# the client did, which for ShedLock's default mode is the hazard asserted.
my %outcome;
sub failures { scalar grep { !$_ } Test::More->builder->summary }

sub checked
{
	my ($m, $check, $failed_before, $detail, $result) = @_;
	push @{ $outcome{$m} }, [ $check, $result // (failures() > $failed_before ? 'fails' : 'works'), $detail // '' ];
}

# --- counter: both sides, the lock changing hands all the time -----------------
# The client's rounds are its counter op, one round at a time; the SQL
# sessions' are acquire, GET, SET, release.  A side starts its next round
# only once the counter's last writer is the other side (or the other side
# is done), while the other side's round may be waiting for the lock: so
# every client round but the last ones is followed by a SQL round, a
# hand-off from the client to SQL, counted; and one SQL session's round
# races the client's for the lock most of the time.  Each side holds 3 ms
# between its GET and SET: a lock that did not exclude would lose updates.
notifications(1);
for my $m (@MODES)
{
	my ($peer_rounds, $sql_rounds) = (40, 40);
	my $f    = failures();
	my $name = "ctr-$m";
	my $key  = key_of($m, $name);
	my $ck   = "count:$m";
	$rc->cmd('DEL', $ck);
	my @s = map { sql_session(spring => 1) } 1 .. 2;
	my $acq = "SELECT redis_lock_acquire('$key', '30 s', '30 s')";
	my %sql_wrote;                     # the values the SQL side wrote
	my ($peer_done, $peer_running, $handoffs, @err) = (0, 0, 0);
	my @left    = ($sql_rounds) x @s;
	my @running = (0) x @s;
	my $deadline = time() + 6 * $T;
	while (time() < $deadline && ($peer_done < $peer_rounds || grep { $_ } @left))
	{
		my $c = $rc->cmd('GET', $ck) // 0;
		my $sql_last = $sql_wrote{$c};
		if (!$peer_running && $peer_done < $peer_rounds && ($c == 0 || $sql_last || !grep { $_ } @left))
		{
			$P{$m}->start('c', 'counter', $name, $ck, 1, 30000, 2000, 3);
			$peer_running = 1;
		}
		if ($peer_running && (my $r = $P{$m}->poll('c')))
		{
			push @err, "peer: $r->[1]" if $r->[0] ne 'ok';
			$P{$m}->result('c', 0);
			$peer_running = 0;
			$peer_done++;
		}
		for my $i (0 .. $#s)
		{
			next unless $left[$i];
			if (!$running[$i])
			{
				next unless $c == 0 || !$sql_last || $peer_done == $peer_rounds;
				$s[$i]->start($acq);
				$running[$i] = 1;
				next;
			}
			next unless $s[$i]->is_done;
			$running[$i] = 0;
			my ($v, $e) = $s[$i]->finish($T);
			if (($v // '') ne 't')
			{
				push @err, 'sql: ' . ($e // "acquire gave $v");
				next;
			}
			my $n = $rc->cmd('GET', $ck) // 0;
			$handoffs++ if $n > 0 && !$sql_wrote{$n};
			Time::HiRes::sleep(0.003);    # widen the window a second holder would hit
			$rc->cmd('SET', $ck, $n + 1);
			$sql_wrote{ $n + 1 } = 1;
			$s[$i]->query("SELECT redis_lock_release('$key')");
			$left[$i]--;
		}
		select(undef, undef, undef, 0.002);
	}
	is(join('; ', @err), '', "$m counter: no errors");
	is($rc->cmd('GET', $ck), $peer_rounds + @s * $sql_rounds,
		"$m counter: exact (" . ($peer_rounds + @s * $sql_rounds) . ") with the client and 2 SQL sessions");
	ok($handoffs >= $peer_rounds - 1, "$m counter: the lock went from the client to SQL $handoffs times");
	checked($m, 'exact counter with SQL sessions', $f,
		($peer_rounds + @s * $sql_rounds) . " rounds, $handoffs hand-offs client to SQL");
	$_->close for @s;
}

# --- a SQL waiter woken when the client unlocks ---------------------------------
# path: keyspace (notify-keyspace-events Kgx), poll (none), spring (none, but
# the Spring pub/sub registry's own unlock message on reg-channel)
my @wake = ((map { [ $_, 'keyspace' ] } @MODES), (map { [ $_, 'poll' ] } @MODES), [ 'spring-pubsub', 'spring' ]);
my %WAKE_CHECK = (
	keyspace => 'a SQL waiter wakes when the client unlocks',
	poll     => 'without keyspace notifications: a SQL waiter wakes when the client unlocks',
	spring   => "without keyspace notifications, with spring_registries: a SQL waiter wakes on Spring's unlock message",
);
for my $w (@wake)
{
	my ($m, $path) = @$w;
	my $f = failures();
	notifications($path eq 'keyspace');
	my $name = "wake-$path-$m";
	my $key  = key_of($m, $name);
	my $s    = sql_session(spring => $path eq 'spring');
	is($P{$m}->run('lock', $name, $LONG, 0), 'true', "$m holds $key on a 10-minute lease");
	$s->start(acquire_ts($key, '60 s', '10 min'));
	waits_ok($s);
	# a polling waiter backs off to its longest pause within its first
	# second: let it get there, so that the figure is that of a wait in its
	# stride (as 540)
	until_ok('the SQL waiter has waited 1 s', sub { RedisLockTest::observer($node)->query(
			"SELECT clock_timestamp() - query_start > interval '1 s' FROM pg_stat_activity WHERE pid = " . $s->pid) eq 't' });
	my $t0 = time();
	is($P{$m}->run('unlock', $name), 'true', "$m unlocks");
	my $t1 = time();
	my ($v, $e) = $s->finish($T);
	ok(defined $v && $v ne 'f', "wake on $m unlock ($path): the SQL waiter gets it") or diag($e);
	my $d = defined $v && $v ne 'f' ? lat("SQL waiter, client unlocks, $path", $m, 1000 * ($v - ($t0 + $t1) / 2)) : undef;
	checked($m, $WAKE_CHECK{$path}, $f, $d);
	$s->query("SELECT redis_lock_release('$key')");
	$s->close;
}

# --- a SQL waiter woken when the client's lease runs out ------------------------
for my $path ('keyspace', 'poll')
{
	notifications($path eq 'keyspace');
	for my $m (@MODES)
	{
		my $f    = failures();
		my $name = "expire-$path-$m";
		my $key  = key_of($m, $name);
		my $s    = sql_session();
		is($P{$m}->run('lock', $name, 1500, 0), 'true', "$m holds $key for 1.5 s");
		my $t0   = time();
		my $pttl = $rc->cmd('PTTL', $key);
		my $ends = ($t0 + time()) / 2 + $pttl / 1000;
		$s->start(acquire_ts($key, '60 s', '10 min'));
		my ($v, $e) = $s->finish($T);
		ok(defined $v && $v ne 'f', "wake on $m lease end ($path): the SQL waiter gets it") or diag($e);
		my $d = defined $v && $v ne 'f' ? lat("SQL waiter, client's lease ends, $path", $m, 1000 * ($v - $ends)) : undef;
		checked($m, ($path eq 'poll' ? 'without keyspace notifications: ' : '')
			  . "a SQL waiter wakes when the client's lease ends", $f, $d);
		$s->query("SELECT redis_lock_release('$key')");
		$P{$m}->try_run('unlock', $name);    # Spring's thread-bound hold; ShedLock: a DEL of nothing
		$s->close;
	}
}
notifications(1);

# --- the client refused while SQL holds; SQL's watchdog keeps the key -----------
for my $m (@MODES)
{
	my $f    = failures();
	my $name = "held-$m";
	my $key  = key_of($m, $name);
	my $s    = sql_session();
	my $me   = $s->query('SELECT redis_lock_owner_id()');
	is($s->query("SELECT redis_lock_acquire('$key')"), 't', "SQL holds $key on its watchdog (1 s)");
	is($rc->cmd('GET', $key), $me, "$key holds the session's owner id");
	is($P{$m}->run('lock', $name, 500, 0), 'false', "$m refused while SQL holds");
	checked($m, 'the client is refused while SQL holds', $f);
	$f = failures();
	is($P{$m}->run('lock', $name, 500, 3000), 'false',
		"$m refused through a 3 s wait: 6 of its 500 ms leases, 3 of SQL's watchdog leases");
	is($rc->cmd('GET', $key), $me, "$key is still SQL's");
	is($s->query("SELECT state FROM redis_locks WHERE name = '$key'"), 'held', 'SQL still holds it');
	checked($m, "SQL's watchdog keeps the key through 6 of the client's leases", $f);
	is($s->query("SELECT redis_lock_release('$key')"), 't', 'SQL releases');
	is($P{$m}->run('lock', $name, 500, 0), 'true', "then $m gets it");
	$P{$m}->run('unlock', $name);
	$s->close;
}

# --- a transaction's hold ends at COMMIT, a session's with the session: a
# client waiting then gets it.  The SQL side names the registry, so that a
# pub/sub-type Spring waiter is told (its 60 s wait is longer than the bound
# here: only the message explains its getting it).
for my $m (@MODES)
{
	my $f    = failures();
	my $name = "end-$m";
	my $key  = key_of($m, $name);
	my $x    = sql_session(spring => 1);
	$x->query('BEGIN');
	is($x->query("SELECT redis_xact_lock_acquire('$key', '0')"), 't', "SQL takes $key for a transaction");
	is($P{$m}->run('lock', $name, 30000, 0), 'false', "$m refused while the transaction holds");
	# a Spring pub/sub waiter waits for the message once it has tried twice
	my $obtain = qr/"EVAL(?:SHA)?" "[^"]+" "1" "\Q$key\E" "[0-9a-f-]{36}" "\d+"/;
	my $n0 = monitor_count($obtain);
	$P{$m}->start('x', 'lock', $name, 30000, 60000);
	until_ok('the Spring waiter waits', sub { monitor_count($obtain) >= $n0 + 2 }) if $m eq 'spring-pubsub';
	my $t0 = time();
	$x->query('COMMIT');
	is_deeply([ $P{$m}->result('x', $T / 2) ], [ 'ok', 'true' ], "$m: its waiting lock gets $key after COMMIT");
	my $d = lat('client waiter, SQL COMMIT', $m, 1000 * (time() - $t0));
	is($P{$m}->run('unlock', $name), 'true', "$m unlocks");
	is($x->query("SELECT redis_lock_acquire('$key', '0')"), 't', "a SQL session takes $key");
	$n0 = monitor_count($obtain);
	$P{$m}->start('e', 'lock', $name, 30000, 60000);
	until_ok('the Spring waiter waits', sub { monitor_count($obtain) >= $n0 + 2 }) if $m eq 'spring-pubsub';
	$t0 = time();
	$x->close;
	is_deeply([ $P{$m}->result('e', $T / 2) ], [ 'ok', 'true' ], "$m: its waiting lock gets $key when the SQL session ends");
	$d .= ', session end ' . lat('client waiter, SQL session ends', $m, 1000 * (time() - $t0));
	is($P{$m}->run('unlock', $name), 'true', "$m unlocks");
	checked($m, 'the client gets it after COMMIT and after the SQL session ends', $f, "COMMIT $d");
}

# --- after the client's hold ran out: its unlock and extend against SQL's key ---
# what each does to SQL's key: kept, deleted or overwritten
my %EXPECT = (
	'shedlock'      => { unlock => 'deleted', extend => 'overwritten', least => 'overwritten' },
	'shedlock-safe' => { unlock => 'kept',    extend => 'kept',        least => 'kept' },
	'spring-spin'   => { unlock => 'kept',    extend => 'kept' },
	'spring-pubsub' => { unlock => 'kept',    extend => 'kept' },
);
for my $m (@MODES)
{
	my $f = failures();
	my @did;
	for my $how (sort keys %{ $EXPECT{$m} })
	{
		my $name = "late-$how-$m";
		my $key  = key_of($m, $name);
		my $s    = sql_session();
		my $me   = $s->query('SELECT redis_lock_owner_id()');
		if ($how eq 'least')
		{
			# lockAtLeastFor: the key goes early (here a DEL by someone else,
			# as another default-mode ShedLock's late unlock does in 532)
			is($P{$m}->run('lock', $name, 60000, 0, 30000), 'true', "$m holds $name (lockAtLeastFor 30 s)");
			$rc->cmd('DEL', $key);
		}
		else
		{
			is($P{$m}->run('lock', $name, 300, 0), 'true', "$m holds $name for 300 ms");
			until_ok("$m: its hold ran out", sub { !$rc->cmd('EXISTS', $key) });
		}
		is($s->query("SELECT redis_lock_acquire('$key')"), 't', "SQL takes $key");
		my ($v, $e) = $P{$m}->try_run($how eq 'extend' ? ('extend', $name, 60000) : ('unlock', $name));
		my $now = $rc->cmd('GET', $key);
		my $got = !defined $now ? 'deleted' : $now eq $me ? 'kept' : 'overwritten';
		my $when = $how eq 'least' ? 'unlock inside lockAtLeastFor, its key gone early' : "$how after its hold ran out";
		is($got, $EXPECT{$m}{$how}, "$m $when: SQL's key $EXPECT{$m}{$how}"
			  . ' (' . ($v // "err $e") . ')');
		push @did, ($how eq 'least' ? 'unlock inside lockAtLeastFor' : "late $how") . ": $got";
		if ($got eq 'kept')
		{
			is($s->query("SELECT redis_lock_release('$key')"), 't', 'SQL releases its key');
		}
		else
		{
			# ShedLock's default mode broke SQL's hold: the watchdog finds it
			# lost, and another session can take the name meanwhile
			until_ok("SQL finds $key lost", sub {
				($s->query("SELECT state FROM redis_locks WHERE name = '$key' AND pid = pg_backend_pid()") // '') eq 'lost' });
			if ($got eq 'deleted')
			{
				my $o = sql_session();
				is($o->query("SELECT redis_lock_acquire('$key', '0', '10 min')"), 't',
					'another SQL session took the name while the first thought it held it');
				$o->query("SELECT redis_lock_release('$key')");
				$o->close;
			}
			$s->try("SELECT redis_lock_release('$key')");
			$rc->cmd('DEL', $key);
		}
		$P{$m}->try_run('unlock', $name) if $how eq 'extend';    # Spring's thread-bound hold
		$s->close;
	}
	checked($m, "the client cannot extend or delete SQL's key", $f, join('; ', @did),
		(grep { !/: kept$/ } @did) ? 'fails' : undef);
}

# --- a SQL release wakes a Spring pub/sub waiter: with spring_registries at once,
# without it after the waiter's whole wait --------------------------------------
notifications(0);
my $ps = $P{'spring-pubsub'};
for my $reg (1, 0)
{
	my $f      = failures();
	my $name   = "ps-wake-$reg";
	my $key    = key_of('spring-pubsub', $name);
	my $s      = sql_session(spring => $reg);
	my $wait   = $reg ? 60000 : 3000;
	my $obtain = qr/"EVAL(?:SHA)?" "[^"]+" "1" "\Q$key\E" "[0-9a-f-]{36}" "\d+"/;
	is($s->query("SELECT redis_lock_acquire('$key', '0', '10 min')"), 't', "SQL holds $key");
	my $n0 = monitor_count($obtain);
	my $ts = time();
	$ps->start('w', 'lock', $name, 60000, $wait);
	# two tries: it has registered for the message and is waiting (532)
	until_ok('the Spring waiter waits', sub { monitor_count($obtain) >= $n0 + 2 });
	my $t0 = time();
	is($s->query("SELECT redis_lock_release('$key')"), 't', 'SQL releases' . ($reg ? ' (spring_registries = reg)' : ''));
	my ($st, $v) = $ps->result('w', $T);
	my $now = time();
	is("$st $v", 'ok true', "the Spring pub/sub waiter gets $key");
	if ($reg)
	{
		ok($now - $ts < $wait / 1000, 'woken before its 60 s wait ended: by the SQL release\'s message');
		checked('spring-pubsub', 'with spring_registries: a SQL release wakes the Spring pub/sub waiter', $f,
			lat('Spring pub/sub waiter, SQL release, spring_registries', 'spring-pubsub', 1000 * ($now - $t0)));
	}
	else
	{
		ok($now - $ts >= $wait / 1000, sprintf('without spring_registries it slept out its 3 s wait (%.0f ms)', 1000 * ($now - $ts)));
		checked('spring-pubsub', 'without spring_registries the Spring pub/sub waiter sleeps out its wait', $f,
			lat('Spring pub/sub waiter, SQL release, no spring_registries (3 s wait)', 'spring-pubsub', 1000 * ($now - $t0)));
	}
	$ps->run('unlock', $name);
	$s->close;
}

# the client-side waits the other way round, without keyspace notifications
for my $m ('shedlock', 'spring-spin')
{
	my $f    = failures();
	my $name = "cw-$m";
	my $key  = key_of($m, $name);
	my $s    = sql_session();
	is($s->query("SELECT redis_lock_acquire('$key', '0', '10 min')"), 't', "SQL holds $key");
	$P{$m}->start('w', 'lock', $name, 60000, 60000);
	until_ok("$m tries", sub { monitor_count(qr/"\Q$key\E" "(?:ADDED:[^"]*|[0-9a-f-]{36})"/) >= 2 });
	my $t0 = time();
	$s->query("SELECT redis_lock_release('$key')");
	my ($st, $v) = $P{$m}->result('w', $T);
	is("$st $v", 'ok true', "$m waiter gets $key after the SQL release");
	checked($m, 'without keyspace notifications: a SQL release lets the waiting client in (it polls)', $f,
		lat('client waiter (polls every 100 ms), SQL release', $m, 1000 * (time() - $t0)));
	$P{$m}->run('unlock', $name);
	$s->close;
}

for my $path (sort keys %lat)
{
	my @v = sort { $a <=> $b } map { $_->[1] } @{ $lat{$path} };
	diag(sprintf('wake-up latency, %-60s n=%d  min %.1f  median %.1f  max %.1f ms  (%s)',
			$path, scalar @v, $v[0], $v[ $#v / 2 ], $v[-1],
			join(', ', map { sprintf('%s %.1f', @$_) } @{ $lat{$path} })));
}
my %versions = map { $_ => $P{$_}->versions } @MODES;
diag("versions: $_: $versions{$_}") for @MODES;

# REDISLOCK_INTEROP_OUT=DIR: every mode's outcome per check (540's columns)
if (my $dir = $ENV{REDISLOCK_INTEROP_OUT})
{
	my $file = "$dir/545_plain_shedlock_spring.clients";
	open(my $fh, '>', $file) or die "$file: $!";
	print $fh join("\t", qw(case client versions check result detail)), "\n";
	for my $m (@MODES)
	{
		for my $o (@{ $outcome{$m} })
		{
			print $fh join("\t", map { (my $x = $_) =~ s/[\t\n]+/ /g; $x } $m, $P{$m}->client, $versions{$m}, @$o), "\n";
		}
	}
	close $fh or die "$file: $!";
}
$_->quit for values %P;

done_testing();
