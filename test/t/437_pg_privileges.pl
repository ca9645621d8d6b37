# 437_pg_privileges.pl — which PostgreSQL roles may call what, checked
# against the table of docs/security.md ("PostgreSQL roles"): every
# function, view and setting of the extension (from the catalog) has a row
# there and every row exists; a role with no grants may execute, select and
# set exactly what the table says (has_function_privilege,
# has_table_privilege, and SET ... TO DEFAULT for each setting, which a
# superuser-only setting refuses with 42501); no function is SECURITY
# DEFINER; force-release works once granted. Takes about 10 s.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use Test::More;

my $doc = "$FindBin::RealBin/../../docs/security.md";
my (%func, %view, %setting);
{
	open my $fh, '<', $doc or die "$doc: $!";
	my $in = 0;
	while (<$fh>)
	{
		$in = 1 if /^#+ PostgreSQL roles/;
		$in = 0 if $in && /^#+ / && !/PostgreSQL roles/;
		next unless $in && /^\| `([^`]+)` \| (function|view|setting) \| ([^|]+?) \|/;
		my ($name, $kind, $who) = ($1, $2, $3);
		($kind eq 'function' ? \%func : $kind eq 'view' ? \%view : \%setting)->{$name} = $who;
	}
}
ok(keys(%func) > 20 && keys(%view) >= 3 && keys(%setting) > 20, "the tables are read from the docs");

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('pgpriv', $redis);
my $su    = RedisLockTest::Session->new($node);
$su->query('CREATE ROLE plain LOGIN');

sub catalog
{
	my ($sql) = @_;
	return map { [ split /\|/ ] } split /\n/, $su->query(
		"SELECT string_agg(x, E'\\n' ORDER BY x) FROM ($sql) q(x)") // '';
}

# functions: from pg_depend, so every function CREATE EXTENSION made
my @fn = catalog(q{
	SELECT p.proname || '|' || p.oid || '|' || p.prosecdef::text || '|'
	       || has_function_privilege('plain', p.oid, 'EXECUTE')::text
	FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
	     AND d.deptype = 'e' JOIN pg_extension e ON e.oid = d.refobjid
	WHERE e.extname = 'redislock'});
my %seen;
for my $f (@fn)
{
	my ($name, $oid, $secdef, $may) = @$f;
	$seen{$name} = 1;
	is($secdef, 'false', "$name is not SECURITY DEFINER");
	ok(exists $func{$name}, "function $name has a row in the docs") or next;
	is($may eq 'true' ? 'yes' : 'no', $func{$name}, "function $name: PUBLIC may execute it: $func{$name}");
}
is_deeply([ grep { !$seen{$_} } sort keys %func ], [], 'every function of the docs exists');

my @vw = catalog(q{
	SELECT c.relname || '|' || has_table_privilege('plain', c.oid, 'SELECT')::text
	FROM pg_class c JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
	     AND d.deptype = 'e' JOIN pg_extension e ON e.oid = d.refobjid
	WHERE e.extname = 'redislock' AND c.relkind = 'v'});
%seen = ();
for my $v (@vw)
{
	my ($name, $may) = @$v;
	$seen{$name} = 1;
	ok(exists $view{$name}, "view $name has a row in the docs") or next;
	is($may eq 'true' ? 'yes' : 'no', $view{$name}, "view $name: PUBLIC may read it: $view{$name}");
}
is_deeply([ grep { !$seen{$_} } sort keys %view ], [], 'every view of the docs exists');

# settings: pg_settings hides the secret ones from everyone, so those come
# from the docs; every redislock.* row of pg_settings must be in the docs
my @guc = map { $_->[0] } catalog(q{SELECT name FROM pg_settings WHERE name LIKE 'redislock.%'});
is_deeply([ grep { !exists $setting{$_} } @guc ], [], 'every setting in pg_settings has a row in the docs');
my $plain = RedisLockTest::Session->new($node, user => 'plain');
is($plain->query('SELECT current_user'), 'plain', 'a session as the role with no grants');
my %state_of = ('superuser' => '42501', 'any user' => undef, 'server start' => '55P02');
for my $name (sort keys %setting)
{
	my ($v, $err, $state) = $plain->try("SET $name TO DEFAULT");
	my $want = $state_of{ $setting{$name} };
	ok(exists $state_of{ $setting{$name} }, "$name: the docs say one of: " . join(', ', sort keys %state_of)) or next;
	is($state, $want, "$name: a role with no grants " . (defined $want ? "may not set it ($want)" : 'may set it'))
	  or diag($err);
}

# what the table means, by calling
my ($v, $err, $state) = $plain->try("SELECT redis_lock_force_release('pp:x')");
is($state, '42501', 'force-release: permission denied to a role with no grants');
like($err // '', qr/permission denied for function redis_lock_force_release/, 'with PostgreSQL\'s own message');
($v, $err) = $plain->try("SELECT redis_lock_acquire('pp:x', '0', '1 min')");
is($v, 't', 'the role may take a lock') or diag($err);
$su->query('GRANT EXECUTE ON FUNCTION redis_lock_force_release(text) TO plain');
($v, $err) = $plain->try("SELECT redis_lock_force_release('pp:x')");
is($v, 't', 'once granted, force-release works') or diag($err);
($v, $err, $state) = $plain->try("SET redislock.url = 'redis://127.0.0.1:1'");
is($state, '42501', 'the role may not point the server at another Redis');

done_testing;
