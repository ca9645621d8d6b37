# 380_encodings.pl — lock names in SQL_ASCII and LATIN1 databases: names
# are bytes, the 512 limit is in bytes, a name that is not valid in the
# database encoding is an error (not a crash), and text shown from another
# database or from Redis is always valid in the database that shows it:
# every such column and function result (redis_locks.name,
# redis_lock_waits.name and holders, redis_lock_status and redis_lock_nodes
# holders; redis_lock_blocking_pids gives pids only).
#
# One cluster (UTF8, as RedisLockTest::node makes them) with a SQL_ASCII and
# a LATIN1 database besides postgres. DBD::Pg passes bytes through unchanged
# when client_encoding is not UTF8 (SQL_ASCII and LATIN1 here, the database
# defaults), so the names below are the bytes the server sees.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('enc', $redis);
my $rc    = FakeRedisson::Conn->new(port => $redis->port);

my $u = RedisLockTest::Session->new($node);
is($u->query('SHOW server_encoding'), 'UTF8', 'the harness makes UTF8 clusters');
# the database's collation (lc_collate is no setting since PostgreSQL 16)
is($u->query('SELECT datcollate FROM pg_database WHERE datname = current_database()'),
	'C', '... with locale C');

my %s;
for my $enc ('SQL_ASCII', 'LATIN1')
{
	my $db = lc $enc;
	$node->safe_psql('postgres',
		"CREATE DATABASE $db TEMPLATE template0 ENCODING '$enc' LOCALE 'C'");
	$node->safe_psql($db, 'CREATE EXTENSION redislock');
	$s{$enc} = RedisLockTest::Session->new($node, dbname => $db);
	is($s{$enc}->query('SHOW server_encoding'), $enc, "$enc: database encoding");
	is($s{$enc}->query('SHOW client_encoding'), $enc, "$enc: bytes pass unconverted");
}

# try_ok($session, $sql, $want): $want is a value, or an SQLSTATE prefixed
# with "ERROR " (then the error text is returned for further checks).
sub try_ok
{
	my ($s, $sql, $want, $desc) = @_;
	my ($v, $err, $state) = $s->try($sql);
	if ($want =~ /^ERROR (\w{5})$/)
	{
		is($state, $1, $desc) or diag("got " . ($err // 'success: ' . ($v // 'NULL')));
		return $err // '';
	}
	is($v, $want, $desc) or diag("error [" . ($state // '') . "] " . ($err // ''));
	return $v;
}

sub held_in_redis
{
	my ($key, $s) = @_;
	my $owner = $s->query('SELECT redis_lock_owner_id()');
	return $rc->cmd('HEXISTS', $key, $owner);
}

my $e512 = "\xe9" x 512;
for my $enc ('SQL_ASCII', 'LATIN1')
{
	my $s = $s{$enc};

	# --- the limit is 512 bytes, and one byte is one character here
	try_ok($s, 'SELECT octet_length(repeat(chr(233), 512))', 512, "$enc: chr(233) is one byte");
	try_ok($s, "SELECT redis_lock_acquire(repeat(chr(233), 512), '0', '1 min')", 't',
		"$enc: a 512-byte name of bytes >= 0x80 is taken");
	is(held_in_redis($e512, $s), 1, "$enc: ... as those 512 bytes in Redis");
	try_ok($s, "SELECT hold_count FROM redis_lock_status(repeat(chr(233), 512))", 1,
		"$enc: ... redis_lock_status sees it");
	try_ok($s, "SELECT redis_lock_fencing_token(repeat(chr(233), 512)) > 0", 't',
		"$enc: ... with a fencing token");
	try_ok($s, "SELECT name = repeat(chr(233), 512) FROM redis_locks WHERE pid = pg_backend_pid()",
		't', "$enc: ... redis_locks shows the name as it was given");
	try_ok($s, "SELECT redis_lock_release(repeat(chr(233), 512))", 't', "$enc: ... released");
	is($rc->cmd('EXISTS', $e512), 0, "$enc: ... gone from Redis");

	# 257 characters of chr(233) are 514 bytes in UTF-8, but 257 here
	try_ok($s, "SELECT redis_lock_acquire(repeat(chr(233), 257), '0', '1 min')
	            AND redis_lock_release(repeat(chr(233), 257))", 't',
		"$enc: 257 x chr(233) is 257 bytes, within the limit");

	for my $fn ('redis_lock_acquire', 'redis_xact_lock_acquire', 'redis_read_lock_acquire',
		'redis_write_lock_acquire', 'redis_lock_release', 'redis_lock_fencing_token')
	{
		my $err = try_ok($s, "SELECT $fn(repeat(chr(233), 513))", 'ERROR 22023',
			"$enc: $fn(513 bytes) is refused");
		like($err, qr/The name is 513 bytes long; the limit is 512 bytes/, "$enc: ... counted in bytes");
	}
	try_ok($s, "SELECT (redis_lock_status(repeat(chr(233), 513))).locked", 'ERROR 22023',
		"$enc: redis_lock_status(513 bytes) is refused");
	try_ok($s, "SELECT redis_lock_acquire_all(ARRAY[repeat(chr(233), 513), 'enc:o'])", 'ERROR 22023',
		"$enc: acquire_all with a 513-byte name is refused");
	try_ok($s, "SELECT redis_lock_acquire_all(ARRAY[repeat(chr(233), 512), 'enc:o'], '0', '1 min')", 't',
		"$enc: acquire_all with a 512-byte name");
	is(held_in_redis($e512, $s), 1, "$enc: ... holds those 512 bytes in Redis");
	try_ok($s, 'SELECT redis_lock_release_all()', 2, "$enc: ... both released");

	# --- a name not valid in the database encoding: PostgreSQL's error,
	# before anything reaches Redis
	my %bad = (
		SQL_ASCII => [ [ "E'\\u00e9'", '0A000' ], [ "convert_from('\\xe9'::bytea, 'UTF8')", '22021' ] ],
		LATIN1    => [ [ "E'\\u2028'", '22P05' ], [ "convert_from('\\xe280'::bytea, 'UTF8')", '22021' ] ],
	);
	for my $b (@{ $bad{$enc} })
	{
		my ($expr, $code) = @$b;
		try_ok($s, "SELECT redis_lock_acquire($expr, '0', '1 min')", "ERROR $code",
			"$enc: redis_lock_acquire($expr) is an error");
	}
	try_ok($s, 'SELECT count(*) FROM redis_locks WHERE pid = pg_backend_pid()', 0,
		"$enc: ... nothing held");
	try_ok($s, 'SELECT 1', 1, "$enc: ... and the session goes on");
}

# --- names are bytes: chr(233) is the byte e9 in both one-byte databases
# (the same Redis key, so the same lock), and c3 a9 in the UTF8 one
try_ok($s{LATIN1}, "SELECT redis_lock_acquire(chr(233), '0', '1 min')", 't', 'LATIN1 holds chr(233)');
is(held_in_redis("\xe9", $s{LATIN1}), 1, '... as the one byte e9 in Redis');
try_ok($s{SQL_ASCII}, "SELECT redis_lock_acquire(chr(233), '0', '1 min')", 'f',
	'SQL_ASCII chr(233) is the same lock (the same byte)');
try_ok($u, "SELECT redis_lock_acquire(chr(233), '0', '1 min')", 't',
	'UTF8 chr(233) is another lock (two bytes)');
is(held_in_redis("\xc3\xa9", $u), 1, '... c3 a9 in Redis');

# --- text that came from elsewhere is valid where it is shown. The shared
# lock table holds every database's names: in the UTF8 database, LATIN1's
# e9 is not text, and is shown with its bytes written \xNN.
my $lpid = $s{LATIN1}->pid;
try_ok($u, "SELECT name FROM redis_locks WHERE pid = $lpid", '\xe9',
	"UTF8 redis_locks shows LATIN1's name e9 as \\xe9");
try_ok($u, "SELECT bool_and(convert_to(name, 'UTF8') IS NOT NULL) FROM redis_locks", 't',
	'UTF8 redis_locks: every name is valid UTF8');
try_ok($u, "SELECT count(*) FROM redis_locks WHERE upper(name) IS NOT NULL", 2,
	'UTF8 redis_locks: string functions work on every name');
# valid bytes are shown as they are: UTF8's c3 a9 is two characters in LATIN1
my $upid = $u->pid;
try_ok($s{LATIN1}, "SELECT encode(convert_to(name, 'LATIN1'), 'hex') FROM redis_locks WHERE pid = $upid",
	'c3a9', "LATIN1 redis_locks shows UTF8's name as its bytes c3 a9");
try_ok($s{SQL_ASCII}, "SELECT count(*) FROM redis_locks", 2, 'SQL_ASCII redis_locks shows both');
try_ok($s{LATIN1}, 'SELECT redis_lock_release(chr(233))', 't', 'LATIN1 releases chr(233)');
try_ok($u, 'SELECT redis_lock_release(chr(233))', 't', 'UTF8 releases chr(233)');

# A holder field that another client wrote into a lock hash, not UTF-8
$rc->cmd('HSET', 'enc:foreign', "\xff\xfe:1", 1);
$rc->cmd('PEXPIRE', 'enc:foreign', 600000);
try_ok($u, "SELECT holders[1] FROM redis_lock_status('enc:foreign')", '\xff\xfe:1',
	'UTF8 redis_lock_status shows a holder field ff fe as \\xff\\xfe');
try_ok($u, "SELECT convert_to(holders[1], 'UTF8') IS NOT NULL FROM redis_lock_status('enc:foreign')", 't',
	'... valid UTF8');
try_ok($s{LATIN1}, "SELECT encode(convert_to(holders[1], 'LATIN1'), 'hex') FROM redis_lock_status('enc:foreign')",
	'fffe3a31', '... and as its bytes in LATIN1');
try_ok($u, "SELECT holders[1] FROM redis_lock_nodes('enc:foreign')", '\xff\xfe:1',
	'UTF8 redis_lock_nodes shows the holder field ff fe as \\xff\\xfe');
try_ok($s{LATIN1}, "SELECT encode(convert_to(holders[1], 'LATIN1'), 'hex') FROM redis_lock_nodes('enc:foreign')",
	'fffe3a31', '... and as its bytes in LATIN1');

# --- redis_lock_waits: a wait in the LATIN1 database on 'caf' || e9, and
# one in the UTF8 database on a lock held by that foreign holder field
my $l2 = RedisLockTest::Session->new($node, dbname => 'latin1');
my $u2 = RedisLockTest::Session->new($node);
my ($l2pid, $u2pid) = ($l2->pid, $u2->pid);
my $lowner = $s{LATIN1}->query('SELECT redis_lock_owner_id()');
try_ok($s{LATIN1}, "SELECT redis_lock_acquire('caf' || chr(233), '0', '1 min')", 't',
	"LATIN1 A holds 'caf' || chr(233)");
$l2->start("SELECT redis_lock_acquire('caf' || chr(233), '1 min')");
waits_ok($l2, "LATIN1 B, on 'caf' || chr(233),");
$u2->start("SELECT redis_lock_acquire('enc:foreign', '1 min')");
waits_ok($u2, 'UTF8 C, on enc:foreign (held by the field ff fe),');
try_ok($u, "SELECT name FROM redis_lock_waits WHERE pid = $l2pid", 'caf\xe9',
	"UTF8 redis_lock_waits shows LATIN1's name caf e9 as caf\\xe9");
try_ok($u, "SELECT sum(length(name)) FROM redis_lock_waits WHERE upper(name) IS NOT NULL",
	length('caf\xe9') + length('enc:foreign'), 'UTF8 redis_lock_waits: string functions work on every name');
try_ok($u, "SELECT holders = ARRAY['$lowner'] AND holder_pids = ARRAY[$lpid] FROM redis_lock_waits WHERE pid = $l2pid",
	't', '... and its holder is LATIN1 A');
try_ok($u, "SELECT holders[1] FROM redis_lock_waits WHERE pid = $u2pid", '\xff\xfe:1',
	'UTF8 redis_lock_waits shows the holder field ff fe as \\xff\\xfe');
try_ok($u, "SELECT bool_and(convert_to(h, 'UTF8') IS NOT NULL) FROM redis_lock_waits, unnest(holders) h", 't',
	'UTF8 redis_lock_waits: every holder is valid UTF8');
try_ok($u, "SELECT redis_lock_blocking_pids($l2pid) = ARRAY[$lpid] AND redis_lock_blocking_pids($u2pid) = '{}'", 't',
	'UTF8 redis_lock_blocking_pids: the LATIN1 holder, none for the foreign field');
try_ok($s{LATIN1}, "SELECT name = 'caf' || chr(233) FROM redis_lock_waits WHERE pid = $l2pid", 't',
	'LATIN1 redis_lock_waits shows its own name as it was given');
try_ok($s{LATIN1}, "SELECT encode(convert_to(holders[1], 'LATIN1'), 'hex') FROM redis_lock_waits WHERE pid = $u2pid",
	'fffe3a31', '... and the holder field as its bytes');
try_ok($s{SQL_ASCII}, 'SELECT count(*) FROM redis_lock_waits WHERE name IS NOT NULL', 2,
	'SQL_ASCII redis_lock_waits shows both');
$u2->cancel;
try_ok($s{LATIN1}, "SELECT redis_lock_release('caf' || chr(233))", 't', 'LATIN1 A releases it');
is(($l2->finish($RedisLockTest::WAIT))[0], 't', '... and LATIN1 B takes it');
try_ok($l2, "SELECT redis_lock_release('caf' || chr(233))", 't', '... and releases it');
$_->close for ($l2, $u2);
$rc->cmd('DEL', 'enc:foreign');

$_->close for ($u, values %s);
no_crash_ok($node, 'encodings');
done_testing();
