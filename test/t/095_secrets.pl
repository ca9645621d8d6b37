# The Redis secrets (redislock.password, redislock.sentinel_password and the
# password inside redislock.url) are seen by superusers only:
#   - a role granted pg_monitor (so pg_read_all_settings) sees them masked in
#     SHOW, SHOW ALL, current_setting() and pg_settings (every column); a
#     plain role may not read them at all; a superuser still SHOWs them;
#   - the server log never shows them: log_statement = 'all' lines, reload
#     lines, error messages and their CONTEXT, whatever the case of the
#     setting's name and whether the value is quoted or not;
#   - redislock.password_file keeps the password in a file: it works (AUTH
#     against a Redis with requirepass, for sessions and the watchdog), it
#     beats a password in the URL and loses to redislock.password, and a file
#     that group or others may read, or that is not a regular file, is
#     refused with a clear error.
use strict;
use warnings;
use Test::More;
use RedisLockTest;

my $redis_pw = 'RedisPass1';
my $redis = RedisLockTest::Redis->new(requirepass => $redis_pw);
my $port = $redis->port;
my %secret = (
	url      => 'UrlSecret9',
	password => 'PwSecret7',
	sentinel => 'SentSecret5',
);
my $node = RedisLockTest::node('secrets', undef,
	'redislock.url' => "redis://default:$secret{url}\@127.0.0.1:$port",
	'redislock.password' => $secret{password},
	'redislock.sentinel_password' => $secret{sentinel},
	'redislock.watchdog_timeout' => '3s',
	log_statement => 'all');
my $any_secret = qr/\Q$secret{url}\E|\Q$secret{password}\E|\Q$secret{sentinel}\E/;

my $su = RedisLockTest::Session->new($node);
$su->query('CREATE ROLE monitor LOGIN IN ROLE pg_monitor');
$su->query('CREATE ROLE plain LOGIN');

# --- who sees what ------------------------------------------------------------
is($su->query('SHOW redislock.password'), $secret{password}, 'a superuser SHOWs redislock.password');
is($su->query('SHOW redislock.sentinel_password'), $secret{sentinel},
	'... and redislock.sentinel_password');
is($su->query('SHOW redislock.url'), "redis://default:$secret{url}\@127.0.0.1:$port",
	'... and redislock.url with its password');

my $mon = RedisLockTest::Session->new($node, user => 'monitor');
is($mon->query('SHOW redislock.password'), '********', 'pg_monitor: SHOW redislock.password is masked');
is($mon->query('SHOW redislock.sentinel_password'), '********',
	'pg_monitor: SHOW redislock.sentinel_password is masked');
is($mon->query('SHOW redislock.url'), "redis://default:********\@127.0.0.1:$port",
	'pg_monitor: SHOW redislock.url masks just the password');
is($mon->query("SELECT current_setting('redislock.password')"), '********',
	'pg_monitor: current_setting(redislock.password) is masked');
is($mon->query("SELECT current_setting('redislock.sentinel_password')"), '********',
	'pg_monitor: current_setting(redislock.sentinel_password) is masked');
is($mon->query("SELECT current_setting('redislock.url')"), "redis://default:********\@127.0.0.1:$port",
	'pg_monitor: current_setting(redislock.url) masks the password');
is($mon->query("SELECT pg_has_role('pg_read_all_settings', 'USAGE')"), 't',
	'(monitor has the privileges of pg_read_all_settings)');

for my $who ([ monitor => $mon ], [ plain => RedisLockTest::Session->new($node, user => 'plain') ])
{
	my ($role, $s) = @$who;
	my $rows = $s->query(q{SELECT string_agg(row_to_json(s)::text, E'\n') FROM pg_settings s});
	like($rows, qr/"redislock\.connect_timeout"/, "$role: pg_settings lists redislock settings");
	unlike($rows, $any_secret, "$role: no pg_settings column of any row shows a secret");
	my $all = $node->safe_psql('postgres', 'SHOW ALL', extra_params => [ '-U', $role ]);
	unlike($all, $any_secret, "$role: SHOW ALL shows no secret");
	my ($v, $err) = $s->try(q{SELECT string_agg(row_to_json(f)::text, E'\n') FROM pg_file_settings f});
	unlike(($v // '') . ($err // ''), $any_secret, "$role: pg_file_settings shows no secret");
	for my $g (qw(password sentinel_password url))
	{
		($v, $err) = $s->try("SHOW redislock.$g");
		unlike(($v // '') . ($err // ''), $any_secret, "$role: SHOW redislock.$g shows no secret");
	}
}
{
	my $plain = RedisLockTest::Session->new($node, user => 'plain');
	# PostgreSQL words the refusal, differently by version: its SQLSTATE and
	# the secret's absence are what count
	my ($v, $err, $state) = $plain->try('SHOW redislock.password');
	is($state, '42501', 'a plain role may not read redislock.password (42501)');
	unlike(($v // '') . ($err // ''), $any_secret, '... and the refusal shows no secret');
	($v, $err, $state) = $plain->try("SELECT current_setting('redislock.url')");
	is($state, '42501', '... nor redislock.url (42501)');
	unlike(($v // '') . ($err // ''), $any_secret, '... and the refusal shows no secret');
}

# --- the log -------------------------------------------------------------------
# Every statement is logged (log_statement = 'all'); each carries its own
# token, none of which may reach the log.
my @statements = (
	[ $su, q{SET redislock.password = 'quotedA1'} ],
	[ $su, q{SET REDISLOCK.PASSWORD = 'MixedB2'} ],
	[ $su, q{SET redislock.password = unquotedC3} ],
	[ $su, q{SET redislock.password TO unquotedD4} ],
	[ $su, q{SET redislock.password TO'nospaceP16'} ],
	[ $su, q{set Redislock.Sentinel_Password to 'sentE5'} ],
	[ $su, q{SELECT set_config('redislock.password', 'setcfgF6', false)} ],
	[ $su, qq{SET redislock.url = 'redis://default:urlG7\@127.0.0.1:$port'} ],
	[ $su, qq{SET REDISLOCK.URL = 'redis://default:urlH8\@127.0.0.1:$port'} ],
	[ $su, q{SET redislock.url = 'redis://default:urlI9@127.0.0.1:99999'} ],
	[ $su, q{SET redislock.password = 'two''quotesJ10'} ],
	[ $su, qq{SET redislock.url = 'redis://default:at\@signO15\@127.0.0.1:$port'} ],
	[ $mon, q{SET redislock.password = unquotedK11} ],
	[ $mon, q{DO $$BEGIN PERFORM set_config('redislock.password', 'ctxL12', false); END$$} ],
	[ $mon, q{DO $$BEGIN EXECUTE 'SET REDISLOCK.PASSWORD TO ctxM13'; END$$} ],
	[ $su, q{ALTER SYSTEM SET redislock.password = 'altN14'} ],
	[ $su, q{SELECT pg_reload_conf()} ],
);
my @tokens = qw(quotedA1 MixedB2 unquotedC3 unquotedD4 nospaceP16 sentE5 setcfgF6 urlG7 urlH8
  urlI9 quotesJ10 signO15 unquotedK11 ctxL12 ctxM13 altN14);
my %client_errors;
for my $st (@statements)
{
	my ($s, $sql) = @$st;
	my (undef, $err) = $s->try($sql);
	$client_errors{$sql} = $err if defined $err;
}
ok(exists $client_errors{ $statements[9][1] }, 'an invalid URL is refused');
ok(exists $client_errors{ $statements[12][1] }, 'pg_monitor may not set redislock.password');
until_ok('the reload that changed redislock.password is logged',
	sub { slurp($node->logfile) =~ /parameter "redislock.password" changed to/ });
my $log = slurp($node->logfile);
for my $t (@tokens)
{
	unlike($log, qr/\Q$t\E/i, "the log does not show $t");
	my @leaks = grep { /\Q$t\E/i } values %client_errors;
	ok(!@leaks, "no error sent to the client shows $t") or diag(join("\n", @leaks));
}
like($log, qr/statement: SET REDISLOCK\.PASSWORD = '\*\*\*'/, 'log_statement lines are redacted, not dropped');
like($log, qr/statement: SET redislock\.password TO \*\*\*/, '... also with TO and an unquoted value');
like($log, qr/statement: SELECT set_config\('redislock\.password', '\*\*\*', false\)/,
	'... and in set_config() calls');
like($log, qr{statement: SET REDISLOCK\.URL = 'redis://default:\*\*\*\@127\.0\.0\.1:$port'},
	'... and a URL keeps all but its password');
like($log, qr/parameter "redislock.password" changed to "\*\*\*"/, 'the reload line hides the value');
$su->query('ALTER SYSTEM RESET redislock.password');
$su->query('SELECT pg_reload_conf()');
$su->query('RESET ALL');

# --- redislock.password_file ----------------------------------------------------
my $dir = PostgreSQL::Test::Utils::tempdir();
my $pwfile = "$dir/redis.pw";
sub write_file
{
	my ($path, $text, $mode) = @_;
	open my $fh, '>', $path or die "cannot write $path: $!";
	print $fh $text;
	close $fh;
	chmod $mode, $path or die "chmod $path: $!";
}
write_file($pwfile, "$redis_pw\n", 0600);

# Settings changed by a reload; waits until new sessions see them.
sub reconfigure
{
	my (%conf) = @_;
	$node->append_conf('postgresql.conf',
		join('', map { "$_ = '$conf{$_}'\n" } sort keys %conf));
	$node->reload;
	my $want = join('|', map { $conf{$_} } sort keys %conf);
	my $cols = join(q{ || '|' || }, map { "current_setting('$_')" } sort keys %conf);
	return RedisLockTest::wait_until($RedisLockTest::WAIT, 'settings reloaded', sub {
		my $s = RedisLockTest::Session->new($node);
		my $got = $s->try("SELECT $cols");
		$s->close;
		return defined $got && $got eq $want;
	});
}

# Without the setting nothing below can work: stop here.
ok(reconfigure(
		'redislock.url' => "redis://default:WrongUrlPw\@127.0.0.1:$port",
		'redislock.password' => '',
		'redislock.password_file' => $pwfile),
	'redislock.password_file is a setting')
  or do { done_testing(); exit 1; };
my $s = RedisLockTest::Session->new($node);
my ($v, $err, $state) = $s->try("SELECT redis_lock_acquire('pf:lock')");
is($v, 't', 'the password from the file authenticates (and beats the URL password)') or diag($err);
is($redis->cli('HEXISTS', 'pf:lock', $s->query('SELECT redis_lock_owner_id()')), 1,
	'the lock is in Redis');
until_ok('the watchdog renews with the password from the file',
	sub { RedisLockTest::lock_stats($s)->{renewals} > 0 });
is(RedisLockTest::lock_stats($s)->{renewal_failures}, 0, '... without failures');
is($s->query("SELECT redis_lock_release('pf:lock')"), 't', 'and releases');
$s->close;

{
	my $plain = RedisLockTest::Session->new($node, user => 'plain');
	($v, $err, $state) = $plain->try('SHOW redislock.password_file');
	is($state, '42501', 'a plain role may not read redislock.password_file (42501)');
	(undef, $err) = $plain->try("SET redislock.password_file = '/tmp/x'");
	like($err // '', qr/permission denied to set parameter/, '... nor set it');
	unlike(slurp($node->logfile), qr/\Q$redis_pw\E/, 'the log never shows the password from the file');
}

ok(reconfigure('redislock.password' => 'WrongPassword'), 'redislock.password set as well');
$s = RedisLockTest::Session->new($node);
(undef, $err, $state) = $s->try("SELECT redis_lock_acquire('pf:pw', '0')");
is($state, '08001', 'redislock.password takes precedence over the file');
$s->close;
ok(reconfigure('redislock.password' => ''), 'redislock.password cleared again');

# A file that cannot be used: SQLSTATE 22023, the message says what is wrong
# with it (not "redislock is not configured"), the hint what to do (not "Set
# redislock.url", which is set). [what, set-up, message, hint]
my $empty = "$dir/empty.pw";
write_file($empty, "\n", 0600);
for my $t (
	[ 'readable by others (0644)', sub { chmod 0644, $pwfile or die },
	  qr/redislock\.password_file "\Q$pwfile\E" has group or world access; permissions should be u=rw \(0600\) or less/,
	  qr/chmod 0600/ ],
	[ 'readable by the group (0640)', sub { chmod 0640, $pwfile or die },
	  qr/redislock\.password_file "\Q$pwfile\E" has group or world access/, qr/chmod 0600/ ],
	[ 'a directory', sub { chmod 0600, $pwfile or die; reconfigure('redislock.password_file' => $dir) },
	  qr/redislock\.password_file "\Q$dir\E" is not a regular file/, qr/Name a regular file/ ],
	[ 'no such file', sub { reconfigure('redislock.password_file' => "$dir/missing") },
	  qr/could not open redislock\.password_file "\Q$dir\E\/missing": No such file/, qr/Create the file/ ],
	[ 'an empty first line', sub { reconfigure('redislock.password_file' => $empty) },
	  qr/the first line of redislock\.password_file "\Q$empty\E" is empty/, qr/Write the password on the file's first line/ ])
{
	my ($what, $setup, $msg, $hint) = @$t;
	$setup->();
	$s = RedisLockTest::Session->new($node);
	(undef, $err, $state) = $s->try("SELECT redis_lock_acquire('pf:bad', '0')");
	is($state, '22023', "password file $what: refused (22023)");
	like($err // '', qr/^ERROR:  $msg/, "password file $what: the message says what is wrong") or diag($err);
	like($err // '', qr/\nHINT:  .*$hint/, "password file $what: the hint says what to do") or diag($err);
	unlike($err // '', qr/not configured|Set redislock\.url/, "password file $what: no word of an unset redislock.url");
	$s->close;
}

write_file($pwfile, "$redis_pw\r\nignored second line\n", 0600);
ok(reconfigure('redislock.password_file' => $pwfile), 'back to the file');
$s = RedisLockTest::Session->new($node);
($v, $err) = $s->try("SELECT redis_lock_acquire('pf:crlf', '0')");
is($v, 't', 'only the first line counts, its CR LF stripped') or diag($err);
$s->close;

# rotation: Redis gets a new password, the file too; a reload is enough,
# even for a session that is connected already
my $keep = RedisLockTest::Session->new($node);
is($keep->query("SELECT redis_lock_acquire('pf:before', '0')"), 't', 'a session connects with the file');
$redis->cli('CONFIG', 'SET', 'requirepass', 'RotatedPw2');
$redis->{password} = 'RotatedPw2';
$redis->cli('CLIENT', 'KILL', 'TYPE', 'normal');
write_file($pwfile, "RotatedPw2\n", 0600);
$node->reload;
until_ok('after a reload, the connected session authenticates with the new password',
	sub { $keep->query("SELECT redis_lock_acquire('pf:after', '0')") eq 't' });
$keep->close;

no_crash_ok($node, 'secrets');
done_testing();
