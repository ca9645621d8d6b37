# A DNS server that never answers must not hold a backend beyond
# redislock.connect_timeout, nor make it deaf to cancel.  The postmaster
# runs in user, mount and network namespaces of its own (no root needed,
# nothing global changes): its /etc/resolv.conf names 127.0.0.1, where a
# UDP socket takes queries and never answers, and redislock.url names a
# host that only DNS could resolve.  An acquisition must then fail with
# 08001 once connect_timeout has passed, saying that the lookup did not
# finish; one with a long connect_timeout must wait observably (wait event
# Extension) and end at once on pg_cancel_backend.
use strict;
use warnings;
use File::Copy qw(copy);
use Test::More;
use RedisLockTest;

plan skip_all => 'needs unprivileged user namespaces (unshare --user --map-root-user)'
  unless system('unshare --user --map-root-user --mount --net true >/dev/null 2>&1') == 0;

my $HOST = 'redis.slow-dns.test';
my $tmp = PostgreSQL::Test::Utils::tempdir();
chomp(my $realbin = `pg_config --bindir`);

# The resolver waits 30 s per try, 5 tries: far longer than any bound below.
open my $rc, '>', "$tmp/resolv.conf" or die $!;
print $rc "nameserver 127.0.0.1\noptions timeout:30 attempts:5\n";
close $rc;

# Binds 127.0.0.1:53/udp (root of its own user namespace may), then leaves
# a child holding the socket, never reading, until the postmaster is gone.
open my $dns, '>', "$tmp/mute_dns.pl" or die $!;
print $dns <<'EOF';
use strict;
use IO::Socket::INET;
my $pm = shift;
my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1:53', Proto => 'udp')
  or die "mute dns: cannot bind 127.0.0.1:53: $!\n";
exit 0 if fork();
open STDIN, '<', '/dev/null';
open STDOUT, '>', '/dev/null';
open STDERR, '>', '/dev/null';
sleep 1 while kill 0, $pm;
EOF
close $dns;

# pg_ctl runs the "postgres" next to itself: a copy of pg_ctl beside this
# wrapper starts the real one in the namespaces (same pid all along: exec).
mkdir "$tmp/bin" or die $!;
copy("$realbin/pg_ctl", "$tmp/bin/pg_ctl") or die "copy pg_ctl: $!";
chmod 0755, "$tmp/bin/pg_ctl";
my ($uid, $gid) = ($<, (split ' ', $()[0]);
open my $w, '>', "$tmp/bin/postgres" or die $!;
print $w <<"EOF";
#!/bin/sh
case "\$1" in -V|--version|-C|--describe-config) exec "$realbin/postgres" "\$@" ;; esac
exec unshare --user --map-root-user --mount --net sh -c '
  mount --bind "$tmp/resolv.conf" /etc/resolv.conf || exit 1
  /usr/sbin/ip link set lo up || exit 1
  perl "$tmp/mute_dns.pl" \$\$ || exit 1
  exec unshare --user --map-user=$uid --map-group=$gid -- "$realbin/postgres" "\$@"' sh "\$@"
EOF
close $w;
chmod 0755, "$tmp/bin/postgres";

my $node = RedisLockTest::node('slow_dns', undef, start => 0,
	'redislock.url' => "redis://$HOST:6379",
	'redislock.connect_timeout' => '2s');
{
	local $ENV{PATH} = "$tmp/bin:$ENV{PATH}";
	$node->start;
}
$node->safe_psql('postgres', 'CREATE EXTENSION redislock');

# --- bounded by connect_timeout ------------------------------------------------
my $s = RedisLockTest::Session->new($node);
$s->start("SELECT redis_lock_acquire('dns:k', '0', '1 min')");
my ($v, $err, $state) = $s->finish(30);
is($state, '08001', 'a DNS server that never answers: 08001 within the wait bound')
  or diag($err);
like($err // '', qr/could not connect to Redis server "\Q$HOST\E:6379"\nDETAIL:  the DNS lookup of "\Q$HOST\E" did not finish within redislock\.connect_timeout \(2000 ms\)/,
	'... saying that the lookup did not finish within connect_timeout');

# --- cancel reaches a backend waiting for the resolver --------------------------
my $c = RedisLockTest::Session->new($node);
$c->query("SET redislock.connect_timeout = '60s'");
$c->query("SET redislock.command_timeout = '60s'");
$c->start("SELECT redis_lock_acquire('dns:k', '0', '1 min')");
ok(RedisLockTest::wait_for_extension_wait($node, $c->pid, 20),
	'while the lookup runs, the backend waits observably (wait_event_type Extension)');
($v, $err, $state) = $c->cancel(20);
is($state, '57014', 'pg_cancel_backend ends it') or diag($err);
is($c->query('SELECT 1'), 1, 'the session is usable afterwards');

no_crash_ok($node, 'slow dns');

done_testing();
