# 381_renewal_race.pl — a renewal that the watchdog built from its snapshot
# of the shared table must not cut Redis's TTL back below a longer lease
# that a re-entry set in between.  The watchdog is held by gdb after it took
# its snapshot and before its renewal reaches Redis; meanwhile the session
# re-enters with a one-hour lease.  Before, the renewal then set the lease
# back to the watchdog's 3 s while the session's slot showed an hour: the
# next renewal came a third of an hour later, and the lock expired in Redis
# after 3 s under a session that held it.  For each kind whose re-entry
# sets the lease and whose renewal is renew.lua's: lock and write.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use File::Temp qw(tempdir);
use IPC::Run;
use RedisLockTest;
use Test::More;

if (system('gdb --version >/dev/null 2>&1') != 0)
{
	plan skip_all => 'gdb is not installed (test/setup-deps.sh installs it)';
}
{
	my $so = `pg_config --pkglibdir`;
	chomp $so;
	$so .= '/redislock.so';
	my $info = `gdb -q -batch -iex 'set debuginfod enabled off' -ex 'info address rl_run_agreed' '$so' 2>&1`;
	plan skip_all => "gdb finds no symbol rl_run_agreed in $so (a stripped build: install its debug symbols, postgresql-NN-redislock-dbgsym)"
	  unless $info =~ /Symbol "rl_run_agreed" is/;
}

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('renewrace', $redis,
	'redislock.watchdog_timeout' => '3s');
my $obs = RedisLockTest::observer($node);
my $dir = tempdir(CLEANUP => 1);

# Stops the watchdog at its next round trip (the renewal of the one lock
# held), under gdb, until let_go.
sub hold_watchdog
{
	my ($tag) = @_;
	my $pid = RedisLockTest::watchdog_pids($obs);
	my $go  = "$dir/go-$tag";
	my $out = "$dir/gdb-$tag.out";
	open my $fh, '>', "$dir/gdb-$tag.cmd" or die $!;
	print $fh <<"GDB";
set pagination off
set confirm off
handle SIGUSR1 SIGUSR2 SIGURG SIGINT SIGTERM SIGQUIT SIGALRM SIGPIPE SIGHUP nostop noprint pass
break rl_run_agreed
continue
echo HELD-AT-RENEWAL\\n
bt 3
delete
shell timeout 300 sh -c 'while [ ! -e $go ]; do sleep 0.05; done'
detach
quit
GDB
	close $fh;
	my $h = IPC::Run::start(
		[ 'gdb', '-q', '-batch', '-iex', 'set debuginfod enabled off',
			'-p', $pid, '-x', "$dir/gdb-$tag.cmd" ],
		'<', \undef, '>', $out, '2>&1');
	return { h => $h, go => $go, out => $out };
}

sub let_go
{
	my ($g) = @_;
	open my $fh, '>', $g->{go} or die $!;
	close $fh;
	eval { $g->{h}->finish; 1 } or $g->{h}->kill_kill;
}

for my $k ([ lock => 'redis_lock_acquire' ], [ write => 'redis_write_lock_acquire' ])
{
	my ($kind, $f) = @$k;
	my $name = "race:$kind";
	my $a = RedisLockTest::Session->new($node);
	is($a->query("SELECT $f('$name')"), 't', "$kind: A takes it (watchdog lease 3 s)");
	my $g = hold_watchdog($kind);
	until_ok("$kind: the watchdog is held at a renewal", sub { slurp($g->{out}) =~ /^HELD-AT-RENEWAL$/m })
	  or diag(slurp($g->{out}));
	like(slurp($g->{out}), qr/renew_batch|run_cycle/, "$kind: ... built from its snapshot (renew_batch)");
	is($a->query("SELECT $f('$name', '0', '1 hour')"), 't', "$kind: A re-enters with a one-hour lease");
	cmp_ok($redis->cli('PTTL', $name), '>', 60_000, "$kind: Redis has the hour");
	my $r0 = lock_stats($obs)->{renewals};
	let_go($g);
	until_ok("$kind: the held renewal is answered", sub { lock_stats($obs)->{renewals} > $r0 });
	cmp_ok($redis->cli('PTTL', $name), '>', 60_000, "$kind: Redis still has the hour after that renewal");
	is($obs->query("SELECT state || ' ' || lease FROM redis_locks WHERE name = '$name'"), 'held 01:00:00',
		"$kind: redis_locks shows the hour, held");
	is($a->query("SELECT redis_lock_release_all()"), '1', "$kind: A gives it back");
	$a->close;
}

no_crash_ok($node, 'renewal race');
done_testing();
