# SQL sessions under the plain layout against the real lock clients
# (test/peers: redsync single and Redlock over 3 masters, node redlock with
# one resource and with several at once, redis-py), table-driven over them:
# - the client is refused while SQL holds (a session's or a transaction's
#   lock), gets it when the transaction commits or the session ends, and
#   never deletes or extends SQL's key (its stale lock's unlock fails, the
#   key keeps SQL's token);
# - a SQL waiter wakes when the client unlocks and when the client's lease
#   runs out, with keyspace notifications on (notify-keyspace-events Kgx)
#   and off (polling), and on Redlock (polling); and when a SQL session
#   releases (redislock's own channel);
# - SQL's watchdog (redislock.watchdog_timeout 3 s) keeps the key while the
#   client waits through seven of its 1 s leases;
# - an exact counter: the client and two SQL sessions each loop lock, GET,
#   SET + 1, unlock on the same name concurrently, with many hand-offs, and
#   no update is lost.
# The SQL waiter's wake-up latency is printed (diag) per wake path: measured
# from the moment the lock became free (the client's unlock answered, the
# SQL release returned, or the key's expiry time from its PTTL) to
# clock_timestamp() right after redis_lock_acquire returned.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use List::Util qw(max min);
use Test::More;
use Time::HiRes qw(time);
use RedisLockTest;
use FakeRedisson;
use LockPeer;

my $WD   = 3;     # redislock.watchdog_timeout, seconds
my $WAIT = $RedisLockTest::WAIT;

my @CASES = (
	{ id => 'redsync',         client => 'redsync', redlock => 0 },
	{ id => 'redsync-redlock', client => 'redsync', redlock => 1 },
	{ id => 'redlock',         client => 'redlock', redlock => 0 },
	{ id => 'redlock-multi',   client => 'redlock', redlock => 0, multi => 1 },
	{ id => 'redispy',         client => 'redispy', redlock => 0 },
);

my %built;
for my $c (qw(redsync redlock redispy))
{
	my $why = LockPeer::check_build($c);
	ok(!$why, "$c: driver built") or diag $why;
	$built{$c} = !$why;
}
@CASES = grep { $built{ $_->{client} } } @CASES;

my $r  = RedisLockTest::Redis->new(extra => ['notify-keyspace-events Kgx']);
my $rl = RedisLockTest::Redlock->new(n => 3);
my %node = (
	single => RedisLockTest::node('peers_single', $r, 'redislock.watchdog_timeout' => "${WD}s"),
	redlock => RedisLockTest::node('peers_redlock', undef,
		'redislock.redlock_nodes' => $rl->list, 'redislock.watchdog_timeout' => "${WD}s"),
);

my %latency;    # wake path => [ [case, seconds], ... ]

sub servers { $_[0]{redlock} ? ($rl->nodes) : ($r) }
sub node_of { $node{ $_[0]{redlock} ? 'redlock' : 'single' } }
sub names   { my ($c, $base) = @_; return $c->{multi} ? ("$base:a", "$base:b") : ($base); }
sub q_names { join(', ', map { "'$_'" } @_) }

# the SQL that takes the case's names (all of them at once for several;
# xact => 1: for the transaction)
sub acquire_sql
{
	my ($c, $base, %o) = @_;
	my @n = names($c, $base);
	my $args = join('', map { ", $_ => " . (defined $o{$_} ? "'$o{$_}'" : 'NULL') } qw(wait lease));
	$args .= ", layout => 'plain'" unless $o{no_layout};
	my $x = $o{xact} ? 'xact_' : '';
	return $c->{multi}
	  ? "redis_${x}lock_acquire_all(ARRAY[" . q_names(@n) . "]$args)"
	  : "redis_${x}lock_acquire('$n[0]'$args)";
}

# acquire, then the time it returned (epoch seconds), or 'f'
sub acquire_ts_sql
{
	return 'SELECT CASE WHEN ' . acquire_sql(@_)
	  . q{ THEN extract(epoch FROM clock_timestamp())::text ELSE 'f' END};
}

sub release_all
{
	my ($c, $s, $base) = @_;
	return join(',', map { $s->query("SELECT redis_lock_release('$_')") } names($c, $base));
}

# every server's value of every name, "name=value" joined
sub values_of
{
	my ($c, $base) = @_;
	return join(' ', map { my $n = $_; map { "$n=" . ($_->cli('GET', $n) // '') } servers($c) } names($c, $base));
}

sub held_by
{
	my ($c, $base, $owner) = @_;
	return join(' ', map { my $n = $_; map { "$n=$owner" } servers($c) } names($c, $base));
}

# When the lock becomes free by its lease: per name the time a quorum of
# servers has expired it (the median PTTL of 3; the one PTTL of 1), and of
# several names the last.
sub expiry_time
{
	my ($c, $base) = @_;
	my $t0 = time();
	my @per_name;
	for my $n (names($c, $base))
	{
		my @p = sort { $a <=> $b } map { $_->cli('PTTL', $n) } servers($c);
		push @per_name, $p[ int(@p / 2) ];
	}
	return ($t0 + time()) / 2 + max(@per_name) / 1000;
}

# The client unlocks: the key goes between sending the unlock and its
# answer; the midpoint is taken as the moment it became free.
sub unlock_time
{
	my ($p, $pname) = @_;
	my $t0 = time();
	$p->run('unlock', $pname);
	return ($t0 + time()) / 2;
}

# Each case's outcome per check, for REDISLOCK_INTEROP_OUT: a check passes
# when no test failed while it ran.
my %outcome;    # case id => [ [check, result, detail], ... ]
my %last_wake;  # case id => latency of its last wake, ms

sub failures { scalar grep { !$_ } Test::More->builder->summary }

sub checked
{
	my ($c, $check, $failed_before, $detail) = @_;
	push @{ $outcome{ $c->{id} } },
	  [ $check, failures() > $failed_before ? 'fails' : 'works', $detail // '' ];
}

sub record
{
	my ($path, $c, $secs) = @_;
	push @{ $latency{$path} }, [ $c->{id}, $secs ];
	$last_wake{ $c->{id} } = sprintf('%s: %.1f ms', $path, $secs * 1000);
	note sprintf('wake %-22s %-16s %7.1f ms', $path, $c->{id}, $secs * 1000);
}

# A SQL waiter for the case's names: started, seen waiting, woken by
# $free->() (which frees the lock and returns when it became free); the
# latency is recorded under $path.  Returns the session (it holds the lock).
sub wake_ok
{
	my ($c, $s, $base, $path, $free, $what, $settle) = @_;
	$s->start(acquire_ts_sql($c, $base, wait => '60 s'));
	waits_ok($s, "$c->{id}: the SQL waiter ($what)");
	# a polling waiter backs off from 25 ms to its longest pause (200 ms)
	# within its first second: let it get there, so that the figure is that
	# of a wait in its stride
	until_ok("$c->{id}: the SQL waiter has waited 1 s",
		sub { RedisLockTest::observer(node_of($c))->query(
				'SELECT clock_timestamp() - query_start > interval \'1 s\' FROM pg_stat_activity WHERE pid = ' . $s->pid) eq 't' })
	  if $settle;
	my $t_free = $free->();
	my ($v, $err) = $s->finish($WAIT);
	ok(defined $v && $v ne 'f', "$c->{id}: the SQL waiter gets the lock when $what") or diag($err // 'no error');
	record($path, $c, max(0, $v - $t_free)) if defined $v && $v ne 'f';
	return $s;
}

my %peer = map { $_->{id} => LockPeer->new(client => $_->{client}, urls => [ map { $_->url } servers($_) ]) } @CASES;
note "$_->{id}: " . $peer{ $_->{id} }->versions for @CASES;

# --- refused while SQL holds; SQL's key never deleted; SQL woken --------------
for my $c (@CASES)
{
	my $p = $peer{ $c->{id} };
	my $base = "pp:$c->{id}";
	my $pname = join(',', names($c, $base));
	my ($h, $w) = map { RedisLockTest::Session->new(node_of($c)) } 1 .. 2;
	my $owner_h = $h->query('SELECT redis_lock_owner_id()');
	my $owner_w = $w->query('SELECT redis_lock_owner_id()');

	my $f = failures();
	is($p->key($pname), $pname, "$c->{id}: the client's key is the name");
	is($h->query('SELECT ' . acquire_sql($c, $base, wait => '0')), 't', "$c->{id}: SQL takes it (watchdog lease)");
	is(values_of($c, $base), held_by($c, $base, $owner_h), "$c->{id}: the key(s) hold SQL's owner id on every server");
	is($p->run('lock', $pname, 30000, 0), 'false', "$c->{id}: the client is refused while SQL holds (one try)");
	is($p->run('lock', $pname, 30000, 500), 'false', "$c->{id}: and after waiting 500 ms");
	if ($c->{multi})
	{
		my ($a, $b) = names($c, $base);
		is(release_all($c, $h, $base), 't,t', "$c->{id}: SQL releases both");
		is($h->query("SELECT redis_lock_acquire('$b', '0', layout => 'plain')"), 't', "$c->{id}: SQL holds $b alone");
		is($p->run('lock', $pname, 30000, 0), 'false', "$c->{id}: the client's lock of both is refused");
		is($r->cli('EXISTS', $a), 0, "$c->{id}: and takes none ($a left free)");
		$h->query("SELECT redis_lock_release('$b')");
	}
	else
	{
		is(release_all($c, $h, $base), 't', "$c->{id}: SQL releases");
	}
	checked($c, 'the client is refused while SQL holds', $f);

	# a transaction's hold ends at COMMIT, a session's with the session: a
	# client waiting then gets it
	$f = failures();
	my $x = RedisLockTest::Session->new(node_of($c));
	$x->query('BEGIN');
	is($x->query('SELECT ' . acquire_sql($c, $base, wait => '0', xact => 1)), 't',
		"$c->{id}: SQL takes it for a transaction");
	is($p->run('lock', $pname, 30000, 0), 'false', "$c->{id}: the client is refused while the transaction holds");
	$p->start('x', 'lock', $pname, 30000, 30000);
	$x->query('COMMIT');
	is_deeply([ $p->result('x', $WAIT) ], [ 'ok', 'true' ], "$c->{id}: the client's waiting lock gets it after COMMIT");
	is($p->run('unlock', $pname), 'true', "$c->{id}: the client unlocks");
	is($x->query('SELECT ' . acquire_sql($c, $base, wait => '0')), 't', "$c->{id}: a SQL session takes it");
	$p->start('e', 'lock', $pname, 30000, 30000);
	$x->close;
	is_deeply([ $p->result('e', $WAIT) ], [ 'ok', 'true' ],
		"$c->{id}: the client's waiting lock gets it when the SQL session ends");
	is($p->run('unlock', $pname), 'true', "$c->{id}: the client unlocks");
	checked($c, 'the client gets it after COMMIT and after the SQL session ends', $f);

	# the client holds; a SQL waiter wakes when it unlocks
	$f = failures();
	is($p->run('lock', $pname, 60000, 0), 'true', "$c->{id}: the client locks");
	my $path = $c->{redlock} ? 'unlock, Redlock' : 'unlock, notifications on';
	wake_ok($c, $w, $base, $path, sub { unlock_time($p, $pname) }, 'the client unlocks', 1);
	is(values_of($c, $base), held_by($c, $base, $owner_w), "$c->{id}: now SQL's");
	release_all($c, $w, $base);
	checked($c, 'a SQL waiter wakes when the client unlocks', $f, $last_wake{ $c->{id} });

	# the client's lease runs out; a SQL waiter wakes; the client's stale
	# lock can neither extend nor delete SQL's key
	$f = failures();
	is($p->run('lock', $pname, 2500, 0), 'true', "$c->{id}: the client locks with a 2.5 s lease");
	my $t_exp = expiry_time($c, $base);
	$path = $c->{redlock} ? 'lease end, Redlock' : 'lease end, notifications on';
	wake_ok($c, $w, $base, $path, sub { $t_exp }, "the client's lease ends");
	checked($c, "a SQL waiter wakes when the client's lease ends", $f, $last_wake{ $c->{id} });
	$f = failures();
	is($p->run('extend', $pname, 60000), 'false', "$c->{id}: the client's stale lock cannot extend SQL's key");
	my ($v, $err) = $p->try_run('unlock', $pname);
	ok(defined $err, "$c->{id}: the client's stale unlock fails") and note "$c->{id}: $err";
	is(values_of($c, $base), held_by($c, $base, $owner_w), "$c->{id}: SQL's key is intact");
	my @pttl = map { my $n = $_; map { $_->cli('PTTL', $n) } servers($c) } names($c, $base);
	ok(!grep({ $_ <= 0 } @pttl), "$c->{id}: with its lease (PTTL @pttl)");
	release_all($c, $w, $base);
	checked($c, "the client cannot extend or delete SQL's key", $f, $err);
	$_->close for ($h, $w);
}

# --- a SQL release wakes a SQL waiter (redislock's own channel) ---------------
for my $c (grep { $_->{id} eq 'redsync' || $_->{id} eq 'redsync-redlock' } @CASES)
{
	my $base = "pp:sqlrel:$c->{id}";
	my ($h, $w) = map { RedisLockTest::Session->new(node_of($c)) } 1 .. 2;
	is($h->query('SELECT ' . acquire_sql($c, $base, wait => '0')), 't', "$c->{id}: SQL holds");
	wake_ok($c, $w, $base, 'SQL release', sub { my $t0 = time(); release_all($c, $h, $base); return ($t0 + time()) / 2; }, 'SQL releases');
	release_all($c, $w, $base);
	$_->close for ($h, $w);
}

# --- notifications off: the SQL waiter polls -----------------------------------
$r->cli('CONFIG', 'SET', 'notify-keyspace-events', '');
for my $c (grep { !$_->{redlock} } @CASES)
{
	my $p = $peer{ $c->{id} };
	my $base = "pp:poll:$c->{id}";
	my $pname = join(',', names($c, $base));
	# a new session asks the server afresh whether it notifies
	my $w = RedisLockTest::Session->new(node_of($c));
	my $f = failures();
	is($p->run('lock', $pname, 60000, 0), 'true', "$c->{id} polling: the client locks");
	wake_ok($c, $w, $base, 'unlock, notifications off', sub { unlock_time($p, $pname) }, 'the client unlocks (polling)', 1);
	release_all($c, $w, $base);
	checked($c, 'without keyspace notifications: a SQL waiter wakes when the client unlocks', $f, $last_wake{ $c->{id} });
	$f = failures();
	is($p->run('lock', $pname, 2500, 0), 'true', "$c->{id} polling: the client locks with a 2.5 s lease");
	my $t_exp = expiry_time($c, $base);
	wake_ok($c, $w, $base, 'lease end, notifications off', sub { $t_exp }, "the client's lease ends (polling)");
	release_all($c, $w, $base);
	checked($c, "without keyspace notifications: a SQL waiter wakes when the client's lease ends", $f,
		$last_wake{ $c->{id} });
	$w->close;
}
$r->cli('CONFIG', 'SET', 'notify-keyspace-events', 'Kgx');

# --- SQL's watchdog keeps the key through the client's waits -------------------
# The client waits 7 s with 1 s leases (seven of its leases, two of SQL's
# 3 s watchdog leases) for every case at once.
{
	my %h;
	for my $c (@CASES)
	{
		my $base = "pp:wd:$c->{id}";
		my $s = $h{ $c->{id} } = RedisLockTest::Session->new(node_of($c));
		is($s->query('SELECT ' . acquire_sql($c, $base, wait => '0')), 't', "$c->{id}: SQL holds with the watchdog");
		$peer{ $c->{id} }->start('wd', 'lock', join(',', names($c, $base)), 1000, 7000);
	}
	for my $c (@CASES)
	{
		my $base = "pp:wd:$c->{id}";
		my $f = failures();
		is_deeply([ $peer{ $c->{id} }->result('wd', $WAIT) ], [ 'ok', 'false' ],
			"$c->{id}: the client waited 7 s (7 of its leases) in vain");
		my $s = $h{ $c->{id} };
		my $owner = $s->query('SELECT redis_lock_owner_id()');
		is(values_of($c, $base), held_by($c, $base, $owner), "$c->{id}: the watchdog kept SQL's key(s)");
		is($s->query("SELECT held_by_me FROM redis_lock_status('" . (names($c, $base))[0] . "')"), 't',
			"$c->{id}: and SQL still holds");
		release_all($c, $s, $base);
		$s->close;
		checked($c, "SQL's watchdog keeps the key through 7 of the client's leases", $f);
	}
}

# --- an exact counter: the client and two SQL sessions -------------------------
# The client runs N_PEER rounds (holding 5 ms between GET and SET, 30 ms
# between rounds); two SQL sessions (SET redislock.layout = 'plain', no
# layout argument) run N_SQL rounds each, GET and SET through redis, and
# start their next round only once the client wrote again (or finished), so
# that the lock changes hands many times.  Any overlap would lose an update.
my ($N_PEER, $N_SQL) = (20, 10);
for my $c (@CASES)
{
	my $p = $peer{ $c->{id} };
	my $base = "pp:cnt:$c->{id}";
	my $ck = "pp:counter:$c->{id}";
	my $cr = (servers($c))[0];
	my @st = map {
		my $s = RedisLockTest::Session->new(node_of($c));
		$s->query("SET redislock.layout = 'plain'");
		{ s => $s, rounds => 0, busy => 0, seen => -1 }
	} 1 .. 2;
	my (%sql_wrote, $sql_writes, $peer_res, $err);
	my $f = failures();
	$sql_writes = 0;
	$p->start('c', 'counter', join(',', names($c, $base)), $ck, $N_PEER, 30000, 30000, 5, 30);
	my $deadline = time() + 120;
  LOOP:
	while (time() < $deadline)
	{
		$peer_res //= $p->poll('c');
		my $peer_writes = (redis_cmd($cr, 'GET', $ck) // 0) - $sql_writes;
		my $active = 0;
		for my $x (@st)
		{
			if ($x->{busy})
			{
				$active = 1;
				next unless $x->{s}->is_done;
				my ($v, $e) = $x->{s}->finish(1);
				$x->{busy} = 0;
				if (!defined $v || $v ne 't') { $err = $e // "acquire returned " . ($v // 'NULL'); last LOOP; }
				my $n = (redis_cmd($cr, 'GET', $ck) // 0) + 1;
				redis_cmd($cr, 'SET', $ck, $n);
				$sql_wrote{$n} = 1;
				$sql_writes++;
				release_all($c, $x->{s}, $base);
				$x->{rounds}++;
				$x->{seen} = $peer_writes;
			}
			elsif ($x->{rounds} < $N_SQL)
			{
				$active = 1;
				next unless $peer_res || $peer_writes > $x->{seen};
				$x->{s}->start('SELECT ' . acquire_sql($c, $base, wait => '60 s', no_layout => 1));
				$x->{busy} = 1;
			}
		}
		last if !$active && $peer_res;
		select(undef, undef, undef, 0.002);
	}
	is($err, undef, "$c->{id} counter: the SQL sessions' rounds all acquired");
	is_deeply($peer_res, [ 'ok', $N_PEER ], "$c->{id} counter: the client did $N_PEER rounds");
	my $total = $N_PEER + 2 * $N_SQL;
	is(redis_cmd($cr, 'GET', $ck), $total, "$c->{id} counter: exactly $total (no update lost)");
	my ($handoffs, $prev) = (0, '');
	for my $i (1 .. $total)
	{
		my $who = $sql_wrote{$i} ? 'sql' : 'peer';
		$handoffs++ if $prev ne '' && $who ne $prev;
		$prev = $who;
	}
	ok($handoffs >= 2, "$c->{id} counter: the lock changed hands between the client and SQL ($handoffs times)");
	$_->{s}->close for @st;
	checked($c, 'exact counter with SQL sessions', $f, "$total rounds, $handoffs hand-offs");
}

# --- the wake-up latencies, per path --------------------------------------------
for my $path (sort keys %latency)
{
	my @l = map { $_->[1] * 1000 } @{ $latency{$path} };
	my @sorted = sort { $a <=> $b } @l;
	diag(sprintf('wake-up latency, %-22s n=%d  min %.1f  median %.1f  max %.1f ms  (%s)',
		$path, scalar(@l), $sorted[0], $sorted[ int(@sorted / 2) ], $sorted[-1],
		join(', ', map { sprintf('%s %.1f', $_->[0], $_->[1] * 1000) } @{ $latency{$path} })));
}

# REDISLOCK_INTEROP_OUT=DIR: every case's outcome per check, for the docs'
# table of clients (test/peers/README.md says what the columns are)
if (my $dir = $ENV{REDISLOCK_INTEROP_OUT})
{
	my $file = "$dir/540_plain_peers.clients";
	open(my $fh, '>', $file) or die "$file: $!";
	print $fh join("\t", qw(case client versions check result detail)), "\n";
	for my $c (@CASES)
	{
		my $versions = $peer{ $c->{id} }->versions;
		for my $o (@{ $outcome{ $c->{id} } })
		{
			print $fh join("\t", map { (my $x = $_) =~ s/[\t\n]+/ /g; $x } $c->{id}, $c->{client}, $versions, @$o), "\n";
		}
	}
	close $fh or die "$file: $!";
}

$_->quit for values %peer;
done_testing();
