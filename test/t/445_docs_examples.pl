# 445_docs_examples.pl — the documentation's examples, run as documentation.
#
# Every ```sql and ```sh block of README.md and docs/*.md is either run here
# against a real PostgreSQL (redislock preloaded) and Redis, or marked with
# the reason it is not.  A block is marked by an HTML comment on the line
# right before its fence (invisible on GitHub):
#
#   <!-- doctest: skip: REASON -->      not run, for REASON (counted "marked")
#   <!-- doctest: acl -->               docs/security.md's Redis ACL: the block
#                                       is run by bash as shown (redis-cli is
#                                       pointed at the test's Redis), then every
#                                       kind of lock is taken as that user
#   <!-- doctest: OPTION; OPTION ... --> run, with these options:
#       session NAME     in session NAME of the page (default "main"); a
#                        page's sessions last from its first block to its end
#       server unpreloaded  on a server without shared_preload_libraries
#                        (same Redis), in a session of its own
#       expect E | E ... one E per statement, in order: "*" (it succeeds),
#                        "ERROR 55P03" (it fails with that SQLSTATE), "waits"
#                        (it blocks: started, and seen waiting on Redis, then
#                        finished by a later "then"), or the value the
#                        statement returns (first column of the first row)
#       given NAME: SQL  before the block, session NAME runs SQL (what the
#                        prose around it describes: "while another session
#                        holds it"); it must succeed
#       meanwhile NAME: SQL  after the block's statements, session NAME runs
#                        SQL (what ends a wait the block started)
#       then NAME: E     then the statement session NAME started with
#                        "waits" ends with E
#
# An unmarked ```sql block runs in the page's "main" session, every statement
# of it must succeed.  An unmarked ```sh block, or a marker this test does
# not know, fails the test.  Each page runs in a database of its own (made
# with CREATE EXTENSION redislock); what a page's examples need first (its
# tables) is on the page, in a block run like any other.  Blocks with other
# languages (java, conf files, sample output) are not run: 440_docs_catalog,
# 050 and the real-Redisson tests check what they name.
#
# Prints, per page, the blocks run and the blocks marked.  About 20 s.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use Test::More;
use File::Temp ();

my $T = 30;
my $root = "$FindBin::RealBin/../..";
my @pages = ("$root/README.md", sort glob("$root/docs/*.md"));

# --- the blocks ---------------------------------------------------------------------
# Returns the blocks of a page: {line, lang, text, marker}.
sub blocks
{
	my ($path) = @_;
	open my $fh, '<', $path or die "$path: $!";
	my @lines = <$fh>;
	close $fh;
	my (@out, $cur, $prev);
	for my $i (0 .. $#lines)
	{
		my $l = $lines[$i];
		if ($cur)
		{
			if ($l =~ /^```\s*$/) { push @out, $cur; undef $cur; $prev = $l; chomp $prev; }
			else { $cur->{text} .= $l; }
			next;
		}
		if ($l =~ /^```(\S*)\s*$/)
		{
			my $lang = $1;
			my ($marker) = defined $prev ? $prev =~ /^<!-- doctest: (.*?) -->$/ : ();
			$cur = { line => $i + 1, lang => $lang, text => '', marker => $marker };
			next;
		}
		$prev = $l if $l =~ /\S/;
		chomp $prev if defined $prev;
	}
	return @out;
}

# Splits SQL into statements: on ";" outside quotes, dollar quotes and
# comments.  A trailing statement needs no ";".
sub statements
{
	my ($sql) = @_;
	my (@out, $cur);
	$cur = '';
	while (length $sql)
	{
		if ($sql =~ s/^(--[^\n]*)//) { next; }
		if ($sql =~ s/^('(?:[^']|'')*')//) { $cur .= $1; next; }
		if ($sql =~ s/^(\$(\w*)\$.*?\$\2\$)//s) { $cur .= $1; next; }
		if ($sql =~ s/^;//) { push @out, $cur if $cur =~ /\S/; $cur = ''; next; }
		$sql =~ s/^(.)//s;
		$cur .= $1;
	}
	push @out, $cur if $cur =~ /\S/;
	s/^\s+|\s+$//g for @out;
	return @out;
}

# Parses a marker into {skip, acl, session, expect => [...], then => [[s, e]]};
# undef with an error for what it does not know.
sub parse_marker
{
	my ($m) = @_;
	my %o = (session => 'main', expect => [], then => [], given => [], meanwhile => []);
	return (\%o) unless defined $m;
	return ({ skip => $1 }) if $m =~ /^skip:\s*(\S.*)$/;
	return ({ acl => 1 }) if $m eq 'acl';
	for my $opt (split /\s*;\s*/, $m)
	{
		if ($opt =~ /^session (\w+)$/) { $o{session} = $1; }
		elsif ($opt eq 'server unpreloaded') { $o{unpreloaded} = 1; }
		elsif ($opt =~ /^expect (.*)$/) { $o{expect} = [ split /\s*\|\s*/, $1 ]; }
		elsif ($opt =~ /^(then|given|meanwhile) (\w+):\s*(.*)$/) { push @{ $o{$1} }, [ $2, $3 ]; }
		else { return (undef, "unknown doctest option \"$opt\""); }
	}
	return (\%o);
}

# --- the servers ----------------------------------------------------------------------
my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('docs', $redis,
	'redislock.deadlock_timeout' => '200ms',
	'redislock.watchdog_timeout' => '3s');
my $obs = RedisLockTest::observer($node);
my $plain;    # the server without preloading, made when a page asks for it

# Does one statement's outcome match E?  Returns an error text or undef.
sub check
{
	my ($what, $e, $v, $err, $state) = @_;
	$e //= '*';
	if ($e =~ /^ERROR (\w{5})$/)
	{
		return "$what: succeeded (" . ($v // 'NULL') . "), the page says it fails with $1"
		  unless defined $err;
		return "$what: failed with $state, the page says $1: $err" unless $state eq $1;
		return undef;
	}
	return "$what: failed: $err" if defined $err;
	return undef if $e eq '*';
	my $got = $v // 'NULL';
	return "$what: returned $got, the page says $e" unless $got eq $e;
	return undef;
}

my %total = (run => 0, marked => 0);
my @summary;
for my $path (@pages)
{
	(my $page = $path) =~ s{^\Q$root\E/}{};
	my @blocks = grep { $_->{lang} =~ /^(?:sql|sh)$/ || defined $_->{marker} } blocks($path);
	my ($run, $marked) = (0, 0);
	(my $db = lc "doc_$page") =~ s/\W/_/g;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION redislock');
	my %sess;
	my $session = sub {
		my ($name) = @_;
		$sess{$name} //= RedisLockTest::Session->new($node, dbname => $db);
		return $sess{$name};
	};
	my $plain_session = sub {
		if (!$plain)
		{
			$plain = RedisLockTest::node('docs_plain', $redis, preload => 0, create_extension => 0);
		}
		if (!$sess{' plain'})
		{
			$plain->safe_psql('postgres', "CREATE DATABASE $db");
			$plain->safe_psql($db, 'CREATE EXTENSION redislock');
			$sess{' plain'} = RedisLockTest::Session->new($plain, dbname => $db);
		}
		return $sess{' plain'};
	};
	for my $b (@blocks)
	{
		my $where = "$page:$b->{line}";
		my ($o, $perr) = parse_marker($b->{marker});
		if (!$o)
		{
			fail("$where: $perr");
			next;
		}
		if (defined $o->{skip})
		{
			$marked++;
			note("$where: marked: $o->{skip}");
			next;
		}
		if ($o->{acl})
		{
			$run++;
			acl_block($where, $b->{text});
			next;
		}
		if ($b->{lang} ne 'sql')
		{
			fail("$where: a ```$b->{lang} block neither run nor marked (<!-- doctest: skip: REASON -->)");
			next;
		}
		$run++;
		my @st = statements($b->{text});
		my $s = $o->{unpreloaded} ? $plain_session->() : $session->($o->{session});
		my @errs;
		for my $g (@{ $o->{given} })
		{
			my $err = check("given $g->[0]: $g->[1]", '*', $session->($g->[0])->try($g->[1]));
			push @errs, $err if defined $err;
		}
		for my $i (0 .. $#st)
		{
			my $e = $o->{expect}[$i] // '*';
			my $what = "statement " . ($i + 1) . " ($st[$i])";
			if ($e eq 'waits')
			{
				$s->start($st[$i]);
				push @errs, "$what: did not wait"
				  unless RedisLockTest::wait_until($T, "$where waits", sub {
					  $s->is_done || $obs->query("SELECT count(*) FROM pg_stat_activity WHERE pid = "
						  . $s->pid . " AND wait_event_type = 'Extension'") == 1 })
				  && !$s->is_done;
				next;
			}
			my $err = check($what, $e, $s->try($st[$i]));
			push @errs, $err if defined $err;
		}
		for my $g (@{ $o->{meanwhile} })
		{
			my $err = check("meanwhile $g->[0]: $g->[1]", '*', $session->($g->[0])->try($g->[1]));
			push @errs, $err if defined $err;
		}
		for my $t (@{ $o->{then} })
		{
			my ($name, $e) = @$t;
			my $err = check("the waiting statement of session $name", $e, $session->($name)->finish($T));
			push @errs, $err if defined $err;
		}
		ok(!@errs, "$where: the ```sql block does what the page says")
		  or diag(join("\n", @errs));
	}
	$_->close for values %sess;
	push @summary, sprintf('%-24s %2d run, %2d marked', $page, $run, $marked);
	$total{run} += $run;
	$total{marked} += $marked;
}
# --- docs/install.md: the hint each function gets without preloading ---------------------
# What the page's table says is what the server says: each function's hint
# fits it (a semaphore has no lease to pass).
if ($plain)
{
	my $page = do { local (@ARGV, $/) = ("$root/docs/install.md"); <> };
	my $x = RedisLockTest::Session->new($plain, dbname => 'doc_docs_install_md');
	my $preload = 'Add redislock to shared_preload_libraries and restart';
	for my $t (
		[ "SELECT redis_lock_acquire('np:h1')", "$preload, or pass a fixed lease." ],
		[ "SELECT redis_xact_lock_acquire('np:h2')", "$preload, or pass a fixed lease." ],
		[ "SELECT redis_read_lock_acquire('np:h3')", "$preload, or pass a fixed lease." ],
		[ "SELECT redis_lock_acquire_all(ARRAY['np:h4'])", "$preload, or pass a fixed lease." ],
		[ "SELECT redis_permit_acquire('np:h5')", "$preload, or pass a fixed lease." ],
		[ "SELECT redis_semaphore_acquire('np:h6')", "$preload." ],
		[ "SELECT redis_xact_semaphore_acquire('np:h7')", "$preload." ],
		[ "SELECT count(*) FROM redis_lock_stats", "$preload." ])
	{
		my ($sql, $hint) = @$t;
		my (undef, $err, $state) = $x->try($sql);
		is($state, '55000', "without preloading, $sql: 55000");
		like($err // '', qr/\nHINT:  \Q$hint\E$/, "... hint \"$hint\"") or diag($err);
		ok(index($page, "hint `$hint`") >= 0, "... as docs/install.md says");
	}
	$x->close;
}

diag("the documentation's ```sql and ```sh blocks, per page:");
diag($_) for @summary;
diag("all pages: $total{run} run, $total{marked} marked");
ok($total{run} > 0, 'some blocks run');

# --- docs/security.md's ACL ---------------------------------------------------------------
# Runs the block with bash as the page shows it (redis-cli, a function here,
# adds the test's port), then takes every kind of lock as that user, through
# a server whose sessions, listener and watchdog all log in as it.
sub acl_block
{
	my ($where, $text) = @_;
	my $port = $redis->port;
	my $cli = $RedisLockTest::Redis::CLI;
	my ($fh, $script) = File::Temp::tempfile('aclXXXX', TMPDIR => 1, UNLINK => 1);
	print $fh "redis-cli() { command $cli -h 127.0.0.1 -p $port \"\$@\"; }\n", $text;
	close $fh;
	my $out = `bash $script 2>&1` // '';
	is($out =~ s/\s+$//r, 'OK', "$where: the ACL block runs in a shell as shown") or return;
	my ($pw) = $text =~ /'>([^']*)'/;
	my ($user) = $text =~ /ACL SETUSER (\S+)/;
	my ($prefix) = $text =~ /'~(\w+:)\*'/;
	my $P = $prefix;
	my $acl = RedisLockTest::node('docs_acl', undef,
		'redislock.url' => "redis://$user:$pw\@127.0.0.1:$port",
		'redislock.deadlock_timeout' => '200ms',
		'redislock.watchdog_timeout' => '1s');
	my $ao = RedisLockTest::Session->new($acl);
	my $a = RedisLockTest::Session->new($acl);
	my $b = RedisLockTest::Session->new($acl);
	my @steps = (
		[ 'lock', "SELECT redis_lock_acquire('${P}a', '0', '1 min')" ],
		[ 'reentry', "SELECT redis_lock_acquire('${P}a', '0', '1 min')" ],
		[ 'status', "SELECT hold_count FROM redis_lock_status('${P}a')", '2' ],
		[ 'release', "SELECT redis_lock_release('${P}a') AND redis_lock_release('${P}a')" ],
		[ 'fair lock', "SELECT redis_lock_acquire('${P}f', '0', fair => true) AND redis_lock_release('${P}f')" ],
		[ 'transaction lock', "SELECT redis_xact_lock_acquire('${P}x', '0')" ],
		[ 'read and write lock',
		  "SELECT redis_read_lock_acquire('${P}rw', '0') AND redis_write_lock_acquire('${P}rw', '0')"
		  . " AND redis_write_lock_release('${P}rw') AND redis_read_lock_release('${P}rw')" ],
		[ 'multi-lock', "SELECT redis_lock_acquire_all(ARRAY['${P}m1', '${P}m2'], '0')"
		  . " AND redis_lock_release('${P}m1') AND redis_lock_release('${P}m2')" ],
		[ 'semaphore', "SELECT redis_semaphore_try_set_permits('${P}s', 2) IS NOT NULL"
		  . " AND redis_semaphore_acquire('${P}s', 1, '0') AND redis_semaphore_release('${P}s')"
		  . " AND redis_semaphore_available('${P}s') = 2" ],
		[ 'expiring permit', "SELECT redis_permit_try_set_permits('${P}p', 1) IS NOT NULL"
		  . " AND redis_permit_release('${P}p', redis_permit_acquire('${P}p', '0', '1 min'))"
		  . " AND redis_permit_available('${P}p') = 1" ],
		[ 'count-down latch', "SELECT redis_latch_try_set_count('${P}l', 1) IS NOT NULL"
		  . " AND redis_latch_count_down('${P}l') = 0 AND redis_latch_await('${P}l', '1 s')" ],
		[ 'plain lock and reentry', "SELECT redis_lock_acquire('${P}pl', '0', '1 min', layout => 'plain')"
		  . " AND redis_lock_acquire('${P}pl', '0', layout => 'plain')" ],
		[ 'plain status', "SELECT layout || ' ' || (holders[1] = redis_lock_owner_id()) FROM redis_lock_status('${P}pl')",
		  'plain true' ],
		[ 'plain release', "SELECT redis_lock_release('${P}pl') AND redis_lock_release('${P}pl')" ],
		[ 'plain multi-lock', "SELECT redis_lock_acquire_all(ARRAY['${P}pm1', '${P}pm2'], '0', layout => 'plain')"
		  . " AND redis_lock_release('${P}pm1') AND redis_lock_release('${P}pm2')" ],
	);
	for my $st (@steps)
	{
		my ($v, $err) = $a->try($st->[1]);
		is($v, $st->[2] // 't', "$where: as Redis user $user: $st->[0]") or diag($err);
	}
	# a wait, woken through the listener (logged in as the same user)
	is($a->query("SELECT redis_lock_acquire('${P}w', '0')"), 't', "$where: as $user: A holds ${P}w");
	$b->start("SELECT redis_lock_acquire('${P}w', '30 s')");
	ok(RedisLockTest::wait_for_extension_wait($acl, $b->pid, $T), "$where: as $user: B waits for it");
	$a->query("SELECT redis_lock_release('${P}w')");
	my ($v, $err) = $b->finish($T);
	is($v, 't', "$where: as $user: B is woken when A releases") or diag($err);
	# the watchdog renews as the same user
	ok(RedisLockTest::wait_until($T, 'renewed', sub {
		$ao->query("SELECT count(*) FROM redis_locks WHERE name = '${P}w' AND renewed_at > acquired_at") == 1 }),
		"$where: as $user: the watchdog renews B's lock");
	$b->query('SELECT redis_lock_release_all()');
	# a plain wait, woken by a SQL release through the listener; the user
	# has no +config|get, so the waiter cannot ask about keyspace
	# notifications and polls as well: that must not fail
	is($a->query("SELECT redis_lock_acquire('${P}pw', '0', layout => 'plain')"), 't',
		"$where: as $user: A holds plain ${P}pw");
	$b->start("SELECT redis_lock_acquire('${P}pw', '30 s', layout => 'plain')");
	ok(RedisLockTest::wait_for_extension_wait($acl, $b->pid, $T), "$where: as $user: B waits for plain ${P}pw");
	$a->query("SELECT redis_lock_release('${P}pw')");
	($v, $err) = $b->finish($T);
	is($v, 't', "$where: as $user: B gets plain ${P}pw when A releases") or diag($err);
	$b->query('SELECT redis_lock_release_all()');
	# with keyspace notifications on and +config|get (the optional row),
	# a plain waiter subscribes to the name's keyspace channel: the ACL's
	# channel pattern must let it; another client's DEL then ends the wait.
	# A new session: B asked about notifications above (refused) and goes
	# by that answer for a while
	my $c = RedisLockTest::Session->new($acl);
	$redis->cli('ACL', 'SETUSER', $user, '+config|get');
	$redis->cli('CONFIG', 'SET', 'notify-keyspace-events', 'Kgx');
	$redis->cli('SET', "${P}pk", 'another-client', 'PX', '60000');
	$c->start("SELECT redis_lock_acquire('${P}pk', '30 s', layout => 'plain')");
	ok(RedisLockTest::wait_for_extension_wait($acl, $c->pid, $T),
		"$where: as $user with +config|get: C waits for plain ${P}pk, held by another client");
	ok(RedisLockTest::wait_until($T, 'keyspace subscription', sub {
		scalar($redis->cli('PUBSUB', 'NUMSUB', "__keyspace\@0__:${P}pk")) =~ /\b1\s*$/ }),
		"$where: as $user: the keyspace channel of ${P}pk is subscribed");
	$redis->cli('DEL', "${P}pk");
	($v, $err) = $c->finish($T);
	is($v, 't', "$where: as $user: C gets ${P}pk when the other client deletes it") or diag($err);
	$c->query('SELECT redis_lock_release_all()');
	$c->close;
	$redis->cli('CONFIG', 'SET', 'notify-keyspace-events', '');
	$_->close for ($a, $b, $ao);
	$acl->stop;
}

done_testing();
