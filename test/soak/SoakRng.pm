# SoakRng.pm — the soak's random streams (test/soak/soak.pl).
#
# One stream per actor (each SQL worker slot, each Redisson client, the
# fault driver), all drawn from the run's seed, so that a replay with the
# same seed gives every actor the same sequence of decisions however the
# actors' steps interleave.  Perl's own rand() is also used by the harness
# (free ports, Redisson ids) and would not replay.  xorshift64*: small,
# fast and good enough to pick operations.
package SoakRng;

use strict;
use warnings;
use integer;
no warnings qw(portable);

sub new
{
	my ($class, $seed, $stream) = @_;
	# splitmix64 of (seed, stream): distinct, well mixed starting states
	my $z = ($seed * 1000003 + $stream * 7919 + 0x632BE59B) & 0x7FFFFFFFFFFFFFFF;
	$z = ($z ^ (($z >> 30) & 0x3FFFFFFFF)) * 0x4F58476D1CE4E5B9;
	$z = ($z ^ (($z >> 27) & 0x1FFFFFFFFF)) * 0x14D049BB133111EB;
	$z ^= ($z >> 31) & 0x1FFFFFFFF;
	$z ||= 88172645463325252;
	my $self = bless { s => $z }, $class;
	$self->_next for 1 .. 8;
	return $self;
}

# 31 random bits
sub _next
{
	my ($self) = @_;
	my $x = $self->{s};
	$x ^= ($x >> 12) & 0xFFFFFFFFFFFFF;
	$x ^= $x << 25;
	$x ^= ($x >> 27) & 0x1FFFFFFFFF;
	$self->{s} = $x;
	return (($x * 0x2545F4914F6CDD1D) >> 33) & 0x7FFFFFFF;
}

# a float in [0, $n) (default [0, 1))
sub float
{
	my ($self, $n) = @_;
	no integer;
	return $self->_next / 2147483648.0 * ($n // 1);
}

# an integer in [0, $n)
sub int { my ($self, $n) = @_; no integer; return CORE::int($self->float($n)); }

# a float in [$lo, $hi)
sub between { my ($self, $lo, $hi) = @_; no integer; return $lo + $self->float($hi - $lo); }

# one of the list
sub pick { my ($self, @l) = @_; return $l[ $self->int(scalar @l) ]; }

# one key of {key => weight}, by weight (keys in sorted order: replayable)
sub weighted
{
	my ($self, $w) = @_;
	no integer;
	my @k = sort keys %$w;
	my $sum = 0;
	$sum += $w->{$_} for @k;
	my $r = $self->float($sum);
	for my $k (@k)
	{
		return $k if ($r -= $w->{$k}) < 0;
	}
	return $k[-1];
}

1;
