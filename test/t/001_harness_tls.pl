# Self-test of the harness's TLS support (RedisLockTest::TLS, the tls
# options of RedisLockTest::Redis, ::Cluster and ::Redlock, FakeRedisson
# over TLS): needs redis-server, openssl and IO::Socket::SSL, but neither
# PostgreSQL nor the redislock extension, so the TLS tests' harness can be
# checked before / independently of the C code.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use Test::More;
use Time::HiRes qw(time);
use IPC::Run ();
use RedisLockTest;
use FakeRedisson;

# A redis-cli run without TLS options: ($status, $stdout + $stderr).
sub plain_cli
{
	my ($port, @args) = @_;
	my ($in, $out) = ('', '');
	IPC::Run::run([ $RedisLockTest::Redis::CLI, '-h', '127.0.0.1', '-p', $port, @args ],
		\$in, '>&', \$out, IPC::Run::timeout(30));
	return ($? >> 8, $out);
}

# Whether a FakeRedisson::Conn with these options can connect and PING.
sub conn_pings
{
	my (%o) = @_;
	my $c = eval { FakeRedisson::Conn->new(host => '127.0.0.1', timeout => 10, %o) };
	my $ok = $c && eval { $c->cmd('PING') eq 'PONG' };
	$c->close if $c;
	return $ok;
}

# --- certificates ---------------------------------------------------------------
my $t0 = time();
my $tls = RedisLockTest::TLS->new;
ok(-s $tls->ca_file, sprintf('certificates made (in %.2fs)', time() - $t0));
is(RedisLockTest::TLS->new, $tls, 'made once per test process');
my @keys = map { $tls->$_ } qw(ca_key server_key wrongname_key untrusted_ca_key
  untrusted_server_key client_key badclient_key);
my @certs = map { $tls->$_ } qw(ca_file server_cert wrongname_cert untrusted_ca_file
  untrusted_server_cert client_cert badclient_cert);
is(scalar(grep { -f $_ && -s _ } @keys, @certs), 14, 'every file is there');
is(scalar(grep { ((stat $_)[2] & 07777) == 0600 } @keys), 7, 'keys are mode 0600');
is(scalar(grep { (stat $_)[4] == $< } @keys), 7, 'keys belong to the user running the test');

sub openssl_out
{
	my ($in, $out) = ('', '');
	IPC::Run::run([ 'openssl', @_ ], \$in, '>&', \$out, IPC::Run::timeout(30));
	return $out;
}
like(openssl_out('verify', '-CAfile', $tls->ca_file, $tls->server_cert, $tls->wrongname_cert,
		$tls->client_cert),
	qr/server\.crt: OK\n.*wrongname\.crt: OK\n.*client\.crt: OK/s, 'the CA signed server, wrongname, client');
like(openssl_out('verify', '-CAfile', $tls->ca_file, $tls->untrusted_server_cert),
	qr/error/, 'the CA did not sign untrusted_server');
like(openssl_out('verify', '-CAfile', $tls->untrusted_ca_file, $tls->untrusted_server_cert,
		$tls->badclient_cert),
	qr/untrusted_server\.crt: OK\n.*badclient\.crt: OK/s, 'the untrusted CA signed untrusted_server, badclient');
my $san = openssl_out('x509', '-in', $tls->server_cert, '-noout', '-ext', 'subjectAltName');
like($san, qr/DNS:localhost, IP Address:127\.0\.0\.1/, 'server SAN: localhost, 127.0.0.1');
$san = openssl_out('x509', '-in', $tls->wrongname_cert, '-noout', '-ext', 'subjectAltName');
like($san, qr/DNS:wrong\.example/, 'wrongname SAN: wrong.example');
unlike($san, qr/IP Address|localhost/, '... and nothing else');

# --- one TLS server -------------------------------------------------------------
my $r = RedisLockTest::Redis->new(tls => $tls);
is($r->url, 'rediss://127.0.0.1:' . $r->port, 'url is rediss://');
is($r->plain_port, undef, 'no plain port');
is($r->cli('PING'), 'PONG', 'PING over TLS');
is($r->cli('SET', 'tls:k', 'v'), 'OK', 'SET over TLS');
is($r->cli('GET', 'tls:k'), 'v', 'GET over TLS');
is($r->cli('CONFIG', 'GET', 'port'), "port\n0", 'port 0: TLS only');
my ($st, $out) = plain_cli($r->port, 'PING');
ok($st != 0 && $out !~ /PONG/, 'a plain redis-cli gets nothing from it') or diag($out);
($st, $out) = plain_cli($r->port, '--tls', '--cacert', $tls->untrusted_ca_file, 'PING');
ok($st != 0 && $out =~ /certificate verify failed/, 'redis-cli trusting another CA is refused')
  or diag($out);
is(redis_cmd($r, 'GET', 'tls:k'), 'v', 'redis_cmd over TLS');
$r->restart;
is($r->cli('PING'), 'PONG', 'PING over TLS after restart');
is(redis_cmd($r, 'SET', 'tls:k', 'w'), 'OK', 'redis_cmd reconnects over TLS after restart');
ok(conn_pings(port => $r->port, tls => { ca_file => $tls->ca_file }),
	'a TLS connection without a client certificate is fine with tls-auth-clients no');

my $both = RedisLockTest::Redis->new(tls => $tls, tls_plain_port => 1);
ok($both->plain_port && $both->plain_port != $both->port, 'tls_plain_port: a second port');
is((plain_cli($both->plain_port, 'PING'))[1], "PONG\n", 'plain PING on the plain port');
is($both->cli('PING'), 'PONG', 'TLS PING on the TLS port');
$both->stop;

# client certificates
my $auth = RedisLockTest::Redis->new(tls => $tls, tls_auth_clients => 'yes', requirepass => 'pw');
is($auth->cli('PING'), 'PONG', 'tls_auth_clients yes: the harness presents the client certificate');
ok(conn_pings(port => $auth->port, password => 'pw', $auth->tls_opts),
	'FakeRedisson::Conn with tls_opts too');
ok(!conn_pings(port => $auth->port, password => 'pw', tls => { ca_file => $tls->ca_file }),
	'no client certificate: refused');
ok(!conn_pings(port => $auth->port, password => 'pw',
		tls => { ca_file => $tls->ca_file, cert_file => $tls->badclient_cert,
			key_file => $tls->badclient_key }),
	'a client certificate of the untrusted CA: refused');
$auth->stop;
my $opt = RedisLockTest::Redis->new(tls => $tls, tls_auth_clients => 'optional');
ok(conn_pings(port => $opt->port, tls => { ca_file => $tls->ca_file }),
	'tls_auth_clients optional: no client certificate is fine');
ok(!conn_pings(port => $opt->port,
		tls => { ca_file => $tls->ca_file, cert_file => $tls->badclient_cert,
			key_file => $tls->badclient_key }),
	'... a bad one is not');
$opt->stop;

# the other server certificates
my $wrong = RedisLockTest::Redis->new(tls => $tls, tls_server => 'wrongname');
is($wrong->cli('PING'), 'PONG', 'wrongname server: the harness reaches it');
ok(conn_pings(port => $wrong->port, $wrong->tls_opts), '... FakeRedisson with tls_opts too');
ok(!conn_pings(port => $wrong->port, tls => { ca_file => $tls->ca_file }),
	'... but a client checking the host name is refused');
ok(conn_pings(port => $r->port, tls => { ca_file => $tls->ca_file }),
	'(the right server passes that host name check)');
$wrong->stop;
my $untr = RedisLockTest::Redis->new(tls => $tls, tls_server => 'untrusted');
is($untr->cli('PING'), 'PONG', 'untrusted server: the harness reaches it');
ok(!conn_pings(port => $untr->port, tls => { ca_file => $tls->ca_file }),
	'... a client trusting the CA is refused');
$untr->stop;

# --- FakeRedisson over TLS ----------------------------------------------------------
my $java = FakeRedisson->new(port => $r->port, $r->tls_opts);
my $sub = $java->subscriber(FakeRedisson::channel('tls:lock'));
is($java->try_lock('tls:lock', 1, 30000), undef, 'FakeRedisson locks over TLS');
is($r->cli('HEXISTS', 'tls:lock', $java->owner(1)), 1, '... the hold is in Redis');
my $other = FakeRedisson->new(port => $r->port, $r->tls_opts);
cmp_ok($other->try_lock('tls:lock', 1, 30000), '>', 0, 'another client is refused (ttl)');
is($java->unlock('tls:lock', 1), 1, 'FakeRedisson unlocks over TLS');
is_deeply($sub->next_message(10), [ FakeRedisson::channel('tls:lock'), '0' ],
	'the subscriber gets the unlock message over TLS');
is($sub->next_message(0.2), undef, 'next_message is bounded on a TLS connection');
my $big = 'x' x 200000;
is($java->cmd('SET', 'tls:big', $big), 'OK', 'a 200 kB value written over TLS');
is(length($java->cmd('GET', 'tls:big')), 200000, '... and read back');
$sub->close;

# --- sentinel over TLS ---------------------------------------------------------------
my $master = RedisLockTest::Redis->new(tls => $tls);
my $replica = RedisLockTest::Redis->new(tls => $tls,
	extra => [ 'replicaof 127.0.0.1 ' . $master->port ]);
until_ok('the replica is in sync over TLS', sub {
	$replica->cli('INFO', 'replication') =~ /master_link_status:up/ });
my @sentinels = map {
	RedisLockTest::Redis->new(sentinel => 1, tls => $tls, requirepass => 'sent-secret', extra => [
		'sentinel sentinel-pass sent-secret',
		'sentinel monitor m 127.0.0.1 ' . $master->port . ' 2',
		'sentinel down-after-milliseconds m 1000',
		'sentinel failover-timeout m 4000',
	])
} 1 .. 3;
is($sentinels[0]->url, 'rediss://127.0.0.1:' . $sentinels[0]->port, 'a sentinel listens on TLS');
($st, $out) = plain_cli($sentinels[0]->port, 'PING');
ok($st != 0 && $out !~ /PONG/, '... only');
until_ok('the sentinels see each other and the replica over TLS', sub {
	my $m = join ' ', $sentinels[0]->cli('SENTINEL', 'master', 'm');
	$m =~ /num-other-sentinels\s+2\b/ && $m =~ /num-slaves\s+1\b/
});
is_deeply([ $sentinels[1]->cli('SENTINEL', 'get-master-addr-by-name', 'm') ],
	[ '127.0.0.1', $master->port ], 'get-master-addr-by-name over TLS names the master');
my %rep = $sentinels[2]->cli('SENTINEL', 'replicas', 'm');
is($rep{port}, $replica->port, 'the sentinels know the replica by its TLS port');
my %sen = $sentinels[0]->cli('SENTINEL', 'sentinels', 'm');
ok((grep { $_->port == ($sen{port} // 0) } @sentinels[1, 2]),
	'... and the other sentinels by theirs');
$master->kill9;
until_ok('after the master dies, the sentinels name the replica', sub {
	my @addr = $sentinels[1]->cli('SENTINEL', 'get-master-addr-by-name', 'm');
	($addr[1] // '') eq $replica->port
});
$_->stop for @sentinels, $replica;

# --- cluster over TLS ------------------------------------------------------------------
my $cl = RedisLockTest::Cluster->new(masters => 3, replicas => 1, tls => $tls);
my @nodes = $cl->nodes;
my %tls_port = map { $_->port => 1 } @nodes;
like(scalar($nodes[0]->cli('CLUSTER', 'INFO')), qr/^cluster_state:ok\r?$/m, 'CLUSTER INFO: ok');
is($nodes[0]->cli('CONFIG', 'GET', 'tls-cluster'), "tls-cluster\nyes", 'tls-cluster yes');
my @np = map { /^\S+ 127\.0\.0\.1:(\d+)@/ ? $1 : 'bad' } $nodes[1]->cli('CLUSTER', 'NODES');
is_deeply([ sort @np ], [ sort keys %tls_port ], 'CLUSTER NODES names the TLS ports');
my $slots = redis_cmd($nodes[2], 'CLUSTER', 'SLOTS');
my @sp = map { my $s = $_; map { $_->[1] } @$s[ 2 .. $#$s ] } @$slots;
my %in_slots = map { $_ => 1 } @sp;
ok(@sp && !(grep { !$tls_port{$_} } @sp) && !(grep { !$in_slots{ $_->port } } $cl->masters),
	'CLUSTER SLOTS names the TLS ports (every master\'s)')
  or diag explain \@sp;
my $cj = FakeRedisson->new(port => $nodes[0]->port, cluster => 1, $nodes[0]->tls_opts);
is(scalar(grep { !defined $cj->try_lock("tls:c$_", 1, 60000) } 1 .. 20), 20,
	'FakeRedisson locks 20 names over the cluster, following MOVED over TLS');
my %on = map { $cl->node_for_key("tls:c$_")->port => 1 } 1 .. 20;
is(scalar(keys %on), 3, '... on all 3 masters');
my $slot = $cl->slot_of('tls:c1');
my ($to) = grep { $_ != $cl->owner_of_slot($slot) } $cl->masters;
$cl->migrate_slot($slot, $to);
is($to->cli('HEXISTS', 'tls:c1', $cj->owner(1)), 1, 'a slot migrated over TLS (MIGRATE) with its lock');
is($cj->unlock('tls:c1', 1), 1, 'FakeRedisson follows the slot (MOVED) and unlocks');
my ($rep) = $cl->replicas_of($to);
my $new = $cl->kill9_master($to);
is($new, $rep, 'a master killed: its replica (TLS replication) takes over');

# --- Redlock over TLS --------------------------------------------------------------------
my $rl = RedisLockTest::Redlock->new(n => 3, tls => $tls);
is($rl->list, join(',', map { '127.0.0.1:' . $_->port } $rl->nodes), 'list names the TLS ports');
is(scalar(grep { $_->url =~ m{^rediss://} && $_->cli('PING') eq 'PONG' } $rl->nodes), 3,
	'3 Redlock masters answer over TLS');
is(scalar(grep { !defined FakeRedisson->new(port => $_->port, $_->tls_opts)->try_lock('tls:rl', 1) }
		$rl->nodes), 3, 'FakeRedisson locks on each');
is($rl->holders('tls:rl'), 3, 'holders counts them over TLS');
$rl->restart_empty(1);
is($rl->holders('tls:rl'), 2, 'restart_empty over TLS');

done_testing();
