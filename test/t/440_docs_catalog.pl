# 440_docs_catalog.pl — docs/sql-reference.md says what the catalog has,
# no more and no less.  Takes about 10 s (one node, no Redis).
#
# The reference's checkable form:
#  - under "## Functions": one table row per function whose first cell is
#    `name([OUT ]arg type [DEFAULT ...], ...) → result`: the name with every
#    argument's mode, name and type, OUT ones included (they are the columns
#    of the result), must be a function of the extension as
#    pg_get_function_arguments() shows it (DEFAULTs dropped on both sides);
#  - under "## Views": a heading "### view `name`" per view, followed by a
#    table with one row per column, `column` in the first cell, in the
#    view's column order;
#  - under "## Settings": one table row per setting, `redislock.name` in the
#    first cell.
# The catalog: the functions and views that belong to the extension
# (pg_depend), and the redislock.* settings of a server with the library
# preloaded: those in pg_settings, and those kept out of it (the secrets, see
# docs/security.md), found as names in the library that current_setting()
# knows.  Each side is compared with the other, so an undocumented object
# and a documented one that does not exist both fail, each named.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use Test::More;

my $doc_path = "$FindBin::RealBin/../../docs/sql-reference.md";
open(my $fh, '<', $doc_path) or BAIL_OUT("cannot read $doc_path: $!");
my @lines = <$fh>;
close $fh;
chomp @lines;

# name(args) with each argument's DEFAULT dropped and spacing made uniform.
sub signature
{
	my ($name, $args) = $_[0] =~ /^(\w+)\((.*)\)$/s or return $_[0];
	my @args = map { s/\s+DEFAULT\s.*$//r } grep { length } split /\s*,\s*/, $args;
	return "$name(" . join(', ', @args) . ')';
}

# --- what the reference documents -------------------------------------------
my (%doc_func, %doc_view, %doc_setting, @doc_errors);
my ($section, $view) = ('', undef);
my $lineno = 0;
for my $line (@lines)
{
	$lineno++;
	if ($line =~ /^## (.*)$/)
	{
		($section, $view) = ($1, undef);
		next;
	}
	if ($section eq 'Views' && $line =~ /^### view `([^`]+)`\s*$/)
	{
		$view = $1;
		push @doc_errors, "view $view documented twice (line $lineno)" if $doc_view{$view};
		$doc_view{$view} = [];
		next;
	}
	$view = undef if $line =~ /^### /;
	next unless $line =~ /^\|\s*`([^`]+)`/;
	my $cell = $1;
	if ($section eq 'Functions')
	{
		my ($sig) = $cell =~ /^(\w+\(.*\))(?:\s*→.*)?$/
		  or do { push @doc_errors, "line $lineno: not a signature: $cell"; next };
		$sig = signature($sig);
		push @doc_errors, "function $sig documented twice (line $lineno)" if $doc_func{$sig};
		$doc_func{$sig} = $lineno;
	}
	elsif ($section eq 'Views' && defined $view)
	{
		push @{ $doc_view{$view} }, $cell;
	}
	elsif ($section eq 'Settings' && $cell =~ /^redislock\./)
	{
		push @doc_errors, "setting $cell documented twice (line $lineno)" if $doc_setting{$cell};
		$doc_setting{$cell} = $lineno;
	}
}
is_deeply(\@doc_errors, [], 'the reference is in its checkable form');
cmp_ok(scalar(keys %doc_func), '>', 0, 'the reference lists functions');

# --- what the catalog has ---------------------------------------------------
my $node = RedisLockTest::node('docs_catalog', undef);
my %cat_func = map { signature($_) => 1 } split /\n/, $node->safe_psql('postgres', qq{
	SELECT p.proname || '(' || pg_get_function_arguments(p.oid) || ')'
	  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
	  JOIN pg_extension e ON e.oid = d.refobjid
	 WHERE e.extname = 'redislock' AND d.deptype = 'e'});
my %cat_view;
for my $row (split /\n/, $node->safe_psql('postgres', q{
	SELECT c.relname, string_agg(a.attname, ',' ORDER BY a.attnum)
	  FROM pg_class c JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
	  JOIN pg_extension e ON e.oid = d.refobjid
	  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
	 WHERE e.extname = 'redislock' AND d.deptype = 'e' AND c.relkind = 'v'
	 GROUP BY c.relname}))
{
	my ($v, $cols) = split /\|/, $row, 2;
	$cat_view{$v} = [ split /,/, $cols ];
}
# Relations of other kinds would need a form of their own in the reference.
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_class c JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
	  JOIN pg_extension e ON e.oid = d.refobjid
	 WHERE e.extname = 'redislock' AND d.deptype = 'e' AND c.relkind <> 'v'}),
	'0', 'the extension has no relations but views');

my %cat_setting = map { $_ => 1 } split /\n/,
  $node->safe_psql('postgres', q{SELECT name FROM pg_settings WHERE name LIKE 'redislock.%'});

# Settings kept out of pg_settings: names in the library that the server
# knows as settings.
my $libdir = $node->safe_psql('postgres', q{SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR'});
my $lib = "$libdir/redislock.so";
open(my $so, '<:raw', $lib) or BAIL_OUT("cannot read $lib: $!");
my $bytes = do { local $/; <$so> };
close $so;
my %in_lib = map { $_ => 1 } $bytes =~ /\b(redislock\.[a-z_]+)\b/g;
my @hidden;
for my $name (sort keys %in_lib)
{
	next if $cat_setting{$name};
	my $known = $node->safe_psql('postgres',
		"SELECT current_setting('$name', true) IS NOT NULL");
	push @hidden, $name if $known eq 't';
}
ok((grep { $_ eq 'redislock.url' } @hidden),
	'the settings kept out of pg_settings are found (redislock.url among them): ' . join(' ', @hidden));
$cat_setting{$_} = 1 for @hidden;

# --- both ways ----------------------------------------------------------------
sub compare
{
	my ($what, $cat, $doc) = @_;
	my @undocumented = grep { !exists $doc->{$_} } sort keys %$cat;
	my @not_in_catalog = grep { !exists $cat->{$_} } sort keys %$doc;
	is_deeply(\@undocumented, [], "every $what of the catalog is in docs/sql-reference.md");
	diag("undocumented $what: $_") for @undocumented;
	is_deeply(\@not_in_catalog, [], "every $what in docs/sql-reference.md is in the catalog");
	diag("documented $what not in the catalog: $_") for @not_in_catalog;
}
compare('function', \%cat_func,    \%doc_func);
compare('view',     \%cat_view,    \%doc_view);
compare('setting',  \%cat_setting, \%doc_setting);

for my $v (sort grep { $doc_view{$_} } keys %cat_view)
{
	is(join(', ', @{ $doc_view{$v} }), join(', ', @{ $cat_view{$v} }),
		"view $v: the reference lists its columns in order");
}

$node->stop;
done_testing();
