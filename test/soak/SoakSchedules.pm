# SoakSchedules.pm — the soak's scripted fault schedules (test/soak/soak.pl):
# a hold lost under its session and then re-entered with varying leases
# ("reentry"), and a release that meets an error reply from Redis
# ("release-error").  Each round runs on names of its own (soak:Z:...) with
# sessions of its own, so that the forced losses never touch the workers'
# exclusion checks; the round is a list of steps that the driver's event
# loop calls (never blocking for long), and every decision of a round is
# drawn from the schedules' own stream of the seed when the round begins.
# The invariants (test/soak/README.md):
#   reentry          a re-entry that returns true is backed by Redis: right
#                    after it, Redis has this session's owner id, unless the
#                    session then sees its loss within the bound
#   loss-unreported  a hold whose loss Redis confirmed leaves state 'held' in
#                    redis_locks within one renewal period plus slack
#   two-holders      redis_locks shows two sessions 'held' on one exclusive or
#                    write lock for longer than that (sampled all the time)
#   released-held    what SQL released (or said was not held) is gone from
#                    Redis within one lease plus slack
package SoakSchedules;

use strict;
use warnings;
use Time::HiRes qw(time);
use RedisLockTest;
use FakeRedisson;

my $Z = 'soak:Z:';
# the lock kinds a reentry round covers; a semaphore has no lease, so it
# meets only release errors
my @REENTRY_KINDS = qw(lock fair xact read write multi permit);
my @RELERR_KINDS  = (@REENTRY_KINDS, 'sem');
my @LONGER = ("'30 s'", "'10 min'", "'1 hour'", "'1 day'");

# %c: node, redis (RedisLockTest::Redis), renew_s (renewal period), lease_s
# (watchdog lease), slack_s, violation => sub (category, detail),
# note => sub (text), lcmd => sub (redis command on the locks server),
# obs => sub (observer session), count => \%counts
sub new
{
	my ($class, %c) = @_;
	my $self = bless { %c, seen2 => {}, reported2 => {}, next2 => 0 }, $class;
	my $o = $c{obs}->();
	$o->query("SELECT redis_semaphore_try_set_permits('${Z}S', 1)");
	$o->query("SELECT redis_permit_try_set_permits('${Z}P', 1)");
	return $self;
}

# keys that persist by design (the end-of-run leftover check allows them)
sub persistent_keys { return ("${Z}S", "${Z}P"); }

# what --round may fix, and the values it may take
our %FIXABLE = (kind => [@RELERR_KINDS], loss => [qw(force delete lapse)], taker => [qw(sql redisson)],
	both => [ 0, 1 ]);

# how long a confirmed loss may go unreported: one renewal period and slack
sub bound { my ($self) = @_; return $self->{renew_s} + $self->{slack_s}; }
# how long two rows may say 'held' (2 s less: the rounds look once the
# loss bound has passed, and the samples come every 0.5 s)
sub bound2 { my ($self) = @_; return $self->bound - 2; }

sub names_of
{
	my ($kind) = @_;
	return ("${Z}m1", "${Z}m2") if $kind eq 'multi';
	return ("${Z}P") if $kind eq 'permit';
	return ("${Z}S") if $kind eq 'sem';
	return ("${Z}RW") if $kind eq 'read' || $kind eq 'write';
	return ("${Z}$kind");
}

sub lit { my ($s) = @_; $s =~ s/'/''/g; return "'$s'"; }

# the SQL that takes (or re-enters) kind's hold with wait and lease
sub acquire_sql
{
	my ($kind, $wait, $lease, @names) = @_;
	my @n = map { lit($_) } (@names ? @names : names_of($kind));
	return "SELECT redis_lock_acquire($n[0], $wait, $lease)" if $kind eq 'lock';
	return "SELECT redis_lock_acquire($n[0], $wait, $lease, true)" if $kind eq 'fair';
	return "SELECT redis_xact_lock_acquire($n[0], $wait, $lease)" if $kind eq 'xact';
	return "SELECT redis_read_lock_acquire($n[0], $wait, $lease)" if $kind eq 'read';
	return "SELECT redis_write_lock_acquire($n[0], $wait, $lease)" if $kind eq 'write';
	return "SELECT redis_lock_acquire_all(ARRAY[$n[0], $n[1]], $wait, $lease)" if $kind eq 'multi';
	return "SELECT redis_permit_acquire($n[0], $wait, $lease)" if $kind eq 'permit';
	return "SELECT redis_semaphore_acquire($n[0], 1, $wait)";
}

sub release_sql
{
	my ($kind, $permit_id) = @_;
	my @n = map { lit($_) } names_of($kind);
	return 'COMMIT' if $kind eq 'xact';
	return "SELECT redis_read_lock_release($n[0])" if $kind eq 'read';
	return "SELECT redis_write_lock_release($n[0])" if $kind eq 'write';
	return 'SELECT redis_lock_release_all() = 2' if $kind eq 'multi';
	return "SELECT redis_permit_release($n[0], " . lit($permit_id // '') . ')' if $kind eq 'permit';
	return "SELECT redis_semaphore_release($n[0], 1)" if $kind eq 'sem';
	return "SELECT redis_lock_release($n[0])";
}

# The names of kind on which Redis has the hold of owner (a session's owner
# id; a permit id for permits), read from the keys themselves.
sub backed_names
{
	my ($self, $kind, $owner) = @_;
	return () unless defined $owner;
	my @have;
	for my $n (names_of($kind))
	{
		if ($kind eq 'permit')
		{
			my $s = $self->{lcmd}->('ZSCORE', FakeRedisson::permit_timeout_key($n), FakeRedisson::permit_id_bytes($owner));
			push @have, $n if defined $s && $s > FakeRedisson::now_ms();
			next;
		}
		my $t = $self->{lcmd}->('TYPE', $n);
		next unless $t eq 'hash';
		my $h = $self->{lcmd}->('HGETALL', $n);
		my %h = @$h;
		push @have, $n if grep { $_ eq $owner || index($_, "$owner:") == 0 } keys %h;
	}
	return @have;
}

# who Redis says holds the round's names (the hash fields), for reports
sub redis_holders
{
	my ($self, $r) = @_;
	my @out;
	for my $n (names_of($r->{kind}))
	{
		next if $r->{kind} eq 'permit';
		my $t = $self->{lcmd}->('TYPE', $n);
		my @f = $t eq 'hash' ? grep { $_ ne 'mode' } keys %{ { @{ $self->{lcmd}->('HGETALL', $n) } } } : ();
		push @out, "$n: " . (join(' ', sort @f) || 'nobody');
	}
	return join('; ', @out) || 'permit ids not shown';
}

# this session's rows of the round's names: "name=state" each
sub rows_of
{
	my ($self, $r) = @_;
	my $in = join(',', map { lit($_) } names_of($r->{kind}));
	my @rows = $self->{obs}->()->rows("SELECT name, state FROM redis_locks WHERE pid = $r->{a}{pid} AND name IN ($in) ORDER BY name");
	return map { "$_->[0]=$_->[1]" } @rows;
}

# Loss of the round's hold in Redis, by the drawn way (force: what an
# operator does; delete: the keys vanish, as in a failover to a replica that
# had not got them)
sub force_loss
{
	my ($self, $r) = @_;
	my @n = names_of($r->{kind});
	if ($r->{kind} eq 'permit')
	{
		# what an expiry does: the permit leaves the zset, the pool gets it back
		$self->{lcmd}->('EVAL', "if redis.call('zrem', KEYS[2], ARGV[1]) == 1 then redis.call('incr', KEYS[1]) end return 1",
			2, $n[0], FakeRedisson::permit_timeout_key($n[0]), FakeRedisson::permit_id_bytes($r->{a_owner}));
	}
	elsif ($r->{loss} eq 'force' && $r->{kind} !~ /^(read|write)$/)
	{
		$self->{obs}->()->query('SELECT ' . join(', ', map { 'redis_lock_force_release(' . lit($_) . ')' } @n));
	}
	else { $self->{lcmd}->('DEL', @n); }
	$r->{loss_at} = time();
}

# --- rounds ---------------------------------------------------------------------------
# Draws every decision of a round at once (the same numbers whatever happens)
# and builds its steps; %fix overrides decisions (kind, loss, taker, both).
# Returns a description for the driver's log.
sub start
{
	my ($self, $sched, $rng, %fix) = @_;
	my %r = (sched => $sched);
	$r{kind}   = $rng->pick($sched eq 'reentry' ? @REENTRY_KINDS : @RELERR_KINDS);
	$r{loss}   = $rng->weighted({ force => 2, delete => 1, lapse => 1 });
	$r{taker}  = $rng->weighted({ sql => 2, redisson => 1 });
	$r{longer} = [ map { $rng->pick(@LONGER) } 1 .. 2 ];
	$r{nlonger} = 1 + $rng->int(2);
	$r{delay}  = $rng->between(0, 1.5);      # loss -> the first re-entry
	$r{pause}  = $rng->between(0, 4);        # before the lease-less re-entry
	$r{both}   = $rng->float < 0.5;          # multi: the taker takes both names
	$r{longer_wait} = $rng->float < 0.3 ? "'0.2 s'" : "'0'";
	# decisions fixed by hand (soak.pl --round), after the draws: the
	# stream goes on as it would (a semaphore has no lease to re-enter with)
	delete $fix{kind} if $sched eq 'reentry' && ($fix{kind} // '') eq 'sem';
	%r = (%r, %fix);
	# a release error needs a hold that is still there
	$r{loss} = 'force' if $r{loss} eq 'lapse' && $sched ne 'reentry';
	# Redisson has no multi-lock or transaction scope here
	$r{taker} = 'sql' if $r{kind} =~ /^(multi|xact|sem)$/;
	$r{i} = 0;
	$r{at} = 0;
	$r{steps} = $sched eq 'reentry' ? $self->reentry_steps : $self->relerr_steps;
	$self->{count}{"$sched:$r{kind}"}++;
	$self->{round} = \%r;
	return "$sched $r{kind}" . ($sched eq 'reentry' ? " (loss $r{loss}, taker $r{taker}, longer "
		  . join('/', @{ $r{longer} }[ 0 .. $r{nlonger} - 1 ]) . ')' : '');
}

sub busy { return defined $_[0]{round}; }

# Runs the round's current step if due. A step returns how long until the
# next step (>= 0), the negative of how long until it runs again (a poll), or
# undef to end the round.
sub step
{
	my ($self) = @_;
	my $r = $self->{round} or return;
	my $now = time();
	return if $now < $r->{at};
	my $code = $r->{steps}[ $r->{i} ];
	my $d = $code ? eval { $code->($r) } : undef;
	if ($@)
	{
		my $e = $@;
		chomp $e;
		$self->{note}->("$r->{sched} $r->{kind}: driver error: $e");
		$self->{count}{"$r->{sched}:driver_error"}++;
		$d = undef;
	}
	if (!defined $d) { $self->finish; return; }
	if ($d < 0) { $r->{at} = $now - $d; return; }
	$r->{i}++;
	$r->{at} = $now + $d;
}

# Ends the round (also when the run ends): Redis writable again, the
# sessions closed (what they held goes with them), the taker's holds given back.
sub finish
{
	my ($self) = @_;
	my $r = delete $self->{round} or return;
	$self->restore;
	for my $k (qw(a b))
	{
		my $s = $r->{$k} or next;
		eval { $s->close };
	}
	if ($r->{j} && $r->{j_held})
	{
		eval { $self->java_release($r) };
	}
	$r->{j}->conn->close if $r->{j};
	$self->{note}->("round end: $r->{sched} $r->{kind}: " . join(', ', @{ $r->{outcomes} // [] },
			defined $r->{reported_after} ? sprintf('loss reported after %.1f s', $r->{reported_after}) : ()));
}

# the error replies: Redis a replica of an address where nothing listens
# (every write answers -READONLY) until restore
sub inject
{
	my ($self) = @_;
	$self->{injected} = 1;
	$self->{lcmd}->('REPLICAOF', '127.0.0.1', $self->{dead_port} //= RedisLockTest::free_port());
}

sub restore
{
	my ($self) = @_;
	return unless delete $self->{injected};
	for (1 .. 5) { last if eval { $self->{lcmd}->('REPLICAOF', 'NO', 'ONE'); 1 }; }
}

sub session
{
	my ($self, $r, $k) = @_;
	my $s = RedisLockTest::Session->new($self->{node}, application_name => "soak-$r->{sched}-$k");
	$r->{$k} = $s;
	$r->{"${k}_owner"} = $s->query('SELECT redis_lock_owner_id()');
	$s->query('BEGIN') if $k eq 'a' && $r->{kind} eq 'xact';
	return $s;
}

# A's first hold: lease NULL (the watchdog), or a short fixed lease that is
# let lapse
sub take_a
{
	my ($self, $r) = @_;
	my $a = $self->session($r, 'a');
	my $lease = $r->{loss} eq 'lapse' ? "'1 s'" : 'NULL';
	my ($v, $err) = $a->try(acquire_sql($r->{kind}, "'0'", $lease));
	if (defined $err || !defined $v || $v eq 'f')
	{
		$self->{count}{"$r->{sched}:not_taken"}++;
		$self->{note}->("$r->{sched} $r->{kind}: first hold not taken: " . ($err // $v // 'NULL'));
		return undef;
	}
	$r->{a_owner} = $v if $r->{kind} eq 'permit';
	$r->{a_took} = time();
	return 0;
}

# the other client takes what A lost: a SQL session or a Redisson client
sub take_b
{
	my ($self, $r) = @_;
	my $kind = $r->{kind};
	my @n = names_of($kind);
	my $took;
	if ($r->{taker} eq 'redisson')
	{
		$r->{j} //= FakeRedisson->new(port => $self->{redis}->port, timeout => 5, lease => 60000);
		my $j = $r->{j};
		if ($kind eq 'lock') { $took = !defined $j->try_lock($n[0], 1); }
		elsif ($kind eq 'fair') { $took = !defined $j->fair_try_lock($n[0], 1); }
		elsif ($kind eq 'read' || $kind eq 'write') { $took = !defined $j->try_write_lock($n[0], 1); }
		elsif ($kind eq 'permit')
		{
			my $id = $j->try_acquire_permit($n[0], 60000);
			$took = defined $id && $id =~ /^[0-9a-f]{32}$/;
			$r->{j_permit} = $id if $took;
		}
		$r->{j_held} = 1 if $took;
	}
	else
	{
		my $b = $r->{b} // $self->session($r, 'b');
		# a reader's loss is taken by a writer
		my $bk = $kind eq 'read' ? 'write' : $kind eq 'xact' ? 'lock' : $kind;
		my $sql = acquire_sql($bk, "'0'", 'NULL', @n);
		$sql =~ s/ARRAY\[[^,]+, /ARRAY[/ if $kind eq 'multi' && !$r->{both};
		my ($v) = $b->try($sql);
		$took = defined $v && $v ne 'f';
	}
	$r->{b_took} = $took;
	return $took;
}

sub java_release
{
	my ($self, $r) = @_;
	my $j = $r->{j};
	my @n = names_of($r->{kind});
	my $k = $r->{kind};
	if ($k eq 'lock') { $j->unlock($n[0], 1); }
	elsif ($k eq 'fair') { $j->fair_unlock($n[0], 1); }
	elsif ($k eq 'read' || $k eq 'write') { $j->unlock_write($n[0], 1); }
	elsif ($k eq 'permit') { $j->release_permit($n[0], $r->{j_permit}); }
	$r->{j_held} = 0;
}

# A re-entry by A; true outcomes are checked against Redis at once
sub reenter
{
	my ($self, $r, $what, $wait, $lease) = @_;
	my ($v, $err, $state) = $r->{a}->try(acquire_sql($r->{kind}, $wait, $lease));
	my $res = defined $err ? 'error' : (!defined $v || $v eq 'f') ? 'refused' : 'true';
	$self->{count}{"$r->{sched}:$what=$res"}++;
	push @{ $r->{outcomes} }, "$what($lease, wait $wait)=$res";
	if ($res eq 'true')
	{
		my $owner = $r->{kind} eq 'permit' ? $v : $r->{a_owner};
		my @have = $self->backed_names($r->{kind}, $owner);
		my @names = names_of($r->{kind});
		if (@have < @names && $r->{b_took})
		{
			# the other client took the lock before this call and holds it
			# still: no loss can come after the call to excuse the answer
			$self->{violation}->('reentry', sprintf('%s %s (loss %s, %s taker): the %s re-entry of PID %d (lease %s, wait %s) returned true '
					. 'while the %s taker held the lock since before the call; Redis: %s; redis_locks: %s', $r->{sched}, $r->{kind},
					$r->{loss}, $r->{taker}, $what, $r->{a_pid}, $lease, $wait, $r->{taker}, $self->redis_holders($r),
					join(' ', $self->rows_of($r))));
		}
		elsif (@have < @names)
		{
			# not backed: only right if the session sees the loss in time
			push @{ $r->{unbacked} }, { what => "$what re-entry (lease $lease, wait $wait)", at => time(),
				redis => join(',', @have) || 'none' };
		}
	}
	return $res;
}

# the end of a round: A's session closed (the server releases what it
# held); then nothing of A's may stay in Redis past one lease, and once the
# taker gave back too, the round's names are free
sub closing_steps
{
	my ($self) = @_;
	return (
		sub {
			my ($r) = @_;
			$r->{a}->close;
			delete $r->{a};
			$r->{closed_at} = time();
			return 0;
		},
		sub {
			my ($r) = @_;
			my @have = $self->backed_names($r->{kind}, $r->{a_owner});
			return -0.2 if @have && time() - $r->{closed_at} < $self->{lease_s} + $self->{slack_s};
			$self->{violation}->('released-held', "$r->{sched} $r->{kind}: the session of PID $r->{a_pid} ended "
				  . sprintf('%.1f s ago', time() - $r->{closed_at}) . ' but Redis still has its hold of ' . join(',', @have))
			  if @have;
			if ($r->{b}) { $r->{b}->close; delete $r->{b}; }
			$self->java_release($r) if $r->{j} && $r->{j_held};
			$r->{closed_at} = time();
			return 0;
		},
		# and the pools have their permit again
		sub {
			my ($r) = @_;
			return undef unless $r->{kind} =~ /^(sem|permit)$/;
			my ($n) = names_of($r->{kind});
			my $f = $r->{kind} eq 'sem' ? 'redis_semaphore_available' : 'redis_permit_available';
			my $av = $self->{obs}->()->query("SELECT $f(" . lit($n) . ')') // '?';
			return -0.2 if $av ne '1' && time() - $r->{closed_at} < $self->{lease_s} + $self->{slack_s};
			$self->{violation}->('released-held', "$r->{sched} $r->{kind}: the pool $n has $av permits available "
				  . sprintf('%.1f s', time() - $r->{closed_at}) . ' after every session of the round ended, not 1') if $av ne '1';
			return undef;
		});
}

sub reentry_steps
{
	my ($self) = @_;
	my $B = $self->bound;
	return [
		sub { my ($r) = @_; my $d = $self->take_a($r); $r->{a_pid} = $r->{a}->pid; return $d; },
		# the loss: forced at once, or the fixed lease let lapse
		sub {
			my ($r) = @_;
			if ($r->{loss} ne 'lapse') { $self->force_loss($r); return 0; }
			return -0.1 if $self->backed_names($r->{kind}, $r->{a_owner}) && time() - $r->{a_took} < 1 + $B;
			$r->{loss_at} = time();
			return 0;
		},
		sub {
			my ($r) = @_;
			my $took = $self->take_b($r);
			return -0.1 if !$took && time() - $r->{loss_at} < 3;
			$self->{count}{"reentry:taker_" . ($took ? 'took' : 'refused')}++;
			push @{ $r->{outcomes} }, "$r->{taker} taker " . ($took ? 'took it' : 'refused');
			return $r->{delay};
		},
		# re-entries asking for a longer lease: the lock is another's
		sub {
			my ($r) = @_;
			$self->reenter($r, 'longer', $r->{longer_wait}, $r->{longer}[$_]) for 0 .. $r->{nlonger} - 1;
			return 0;
		},
		# a watchdog hold's loss is reported within one renewal period
		# (plus slack) of the loss
		sub {
			my ($r) = @_;
			return $r->{pause} if $r->{loss} eq 'lapse';
			my @held = grep { /=held$/ } $self->rows_of($r);
			return -0.2 if @held && time() - $r->{loss_at} < $B;
			if (@held)
			{
				$self->{violation}->('loss-unreported', sprintf('reentry %s: the hold of PID %d was lost in Redis %.1f s ago (%s), '
						. 'then re-entered with a longer lease (%s); redis_locks still says %s', $r->{kind}, $r->{a_pid},
						time() - $r->{loss_at}, $r->{loss}, join(', ', @{ $r->{longer} }[ 0 .. $r->{nlonger} - 1 ]),
						join(' ', $self->rows_of($r))));
			}
			else { $self->{count}{'reentry:loss_reported'}++; $r->{reported_after} = time() - $r->{loss_at}; }
			return 0;
		},
		# the lease-less re-entry without a wait must ask Redis
		sub {
			my ($r) = @_;
			$self->reenter($r, 'leaseless', "'0'", 'NULL');
			$self->two_holders(1);
			return 0;
		},
		# a true re-entry that Redis did not back: the session must see
		# its loss within the bound
		sub {
			my ($r) = @_;
			my $u = $r->{unbacked} or return 0;
			my @held = grep { /=held$/ } $self->rows_of($r);
			return -0.2 if @held && time() - $u->[0]{at} < $B;
			if (@held)
			{
				$self->{violation}->('reentry', sprintf('reentry %s (loss %s, taker %s): %s returned true, but Redis had the hold of PID %d on %s only (owner %s); '
						. '%.1f s later redis_locks still says %s', $r->{kind}, $r->{loss}, $r->{taker}, $_->{what}, $r->{a_pid},
						$_->{redis}, $r->{a_owner}, time() - $_->{at}, join(' ', $self->rows_of($r)))) for @$u;
			}
			return 0;
		},
		$self->closing_steps,
	];
}

sub relerr_steps
{
	my ($self) = @_;
	my $B = $self->bound;
	return [
		sub { my ($r) = @_; my $d = $self->take_a($r); $r->{a_pid} = $r->{a}->pid; return $d; },
		# the release meets -READONLY; Redis is writable again at once
		sub {
			my ($r) = @_;
			$self->inject;
			my ($v, $err, $state) = eval { $r->{a}->try(release_sql($r->{kind}, $r->{a_owner})) };
			$self->restore;
			$r->{rel} = defined $err ? 'error' : (defined $v && $v eq 't') || $r->{kind} eq 'xact' ? 'true' : 'false';
			($r->{rel_err} = $err // '') =~ s/\s+/ /g;
			$self->{count}{"release-error:release=$r->{rel}"}++;
			push @{ $r->{outcomes} }, "release=$r->{rel}";
			return 0;
		},
		# a hold the release failed on is still the session's: its loss
		# must be reported like any other
		sub {
			my ($r) = @_;
			if ($r->{rel} eq 'error' && $r->{kind} ne 'sem')
			{
				if (!$r->{loss_at})
				{
					if (!$self->backed_names($r->{kind}, $r->{a_owner}))
					{
						$self->{count}{'release-error:nothing_left'}++;
						$self->{note}->("release-error $r->{kind}: the failed release left nothing in Redis");
						return 0;
					}
					$self->force_loss($r);
				}
				my @held = grep { /=held$/ } $self->rows_of($r);
				return -0.2 if @held && time() - $r->{loss_at} < $B;
				if (@held)
				{
					$self->{violation}->('loss-unreported', sprintf('release-error %s: the release of PID %d met an error reply (%s); '
							. 'the hold was then lost in Redis (%s) %.1f s ago; redis_locks still says %s', $r->{kind}, $r->{a_pid},
							$r->{rel_err}, $r->{loss}, time() - $r->{loss_at}, join(' ', $self->rows_of($r))));
				}
				else { $self->{count}{'release-error:loss_reported'}++; $r->{reported_after} = time() - $r->{loss_at}; }
				return 0;
			}
			# released, said so (or said it was not held): nothing of the
			# session's may stay in Redis past one lease
			$r->{rel_at} //= time();
			my @have = $r->{kind} eq 'sem' ? () : $self->backed_names($r->{kind}, $r->{a_owner});
			return -0.2 if @have && time() - $r->{rel_at} < $self->{lease_s} + $self->{slack_s};
			$self->{violation}->('released-held', sprintf('release-error %s: the release of PID %d said %s (%s) but %.1f s later '
					. 'Redis still has its hold of %s', $r->{kind}, $r->{a_pid}, $r->{rel}, $r->{rel_err} || 'no error',
					time() - $r->{rel_at}, join(',', @have))) if @have;
			return 0;
		},
		$self->closing_steps,
	];
}

# (b) Every half second: two sessions 'held' on one exclusive or write lock
# for longer than the bound (a lost hold is seen at the holder's next
# renewal, so a moment of two rows is right).  $force: sample now.
sub two_holders
{
	my ($self, $force) = @_;
	my $now = time();
	return if !$force && $now < $self->{next2};
	$self->{next2} = $now + 0.5;
	my @rows = eval {
		$self->{obs}->()->rows("SELECT name, string_agg(pid::text, ',' ORDER BY pid) FROM redis_locks "
			  . "WHERE state = 'held' AND kind IN ('lock', 'write') GROUP BY name HAVING count(DISTINCT pid) > 1");
	};
	my %now = map { ("$_->[0] pids $_->[1]" => 1) } @rows;
	delete $self->{seen2}{$_} for grep { !$now{$_} } keys %{ $self->{seen2} };
	for my $k (keys %now)
	{
		my $since = $self->{seen2}{$k} //= $now;
		next if $now - $since <= $self->bound2 || $self->{reported2}{$k}++;
		$self->{violation}->('two-holders', sprintf('redis_locks shows lock %s held by two sessions for %.1f s', $k, $now - $since));
	}
}

1;
