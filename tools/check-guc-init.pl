#!/usr/bin/perl
# check-guc-init.pl: every setting's C variable must start out equal to the
# boot value its DefineCustom*Variable call gives.  Assert-enabled
# PostgreSQL 16+ builds check that when the library loads (check_GUC_init)
# and abort on a mismatch.
#
# Usage: perl tools/check-guc-init.pl src/*.c
# Prints one line per setting that differs, then a summary line; exits 1 on
# any difference, or when it finds no settings or a variable it cannot
# place (so that a change of style cannot make it pass vacuously).
use strict;
use warnings;

my %kind_default = (Bool => 'false', Int => '0', Real => '0', Enum => '0', String => 'NULL');

# Splits the argument list that starts after the "(" at $pos of $text;
# returns the arguments, whitespace-trimmed.
sub call_args
{
	my ($text, $pos) = @_;
	my ($depth, $cur, @args) = (0, '');
	while ($pos < length $text)
	{
		my $rest = substr($text, $pos);
		if ($rest =~ /^("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')/s)
		{
			$cur .= $1;
			$pos += length $1;
			next;
		}
		if ($rest =~ m{^(/\*.*?\*/|//[^\n]*)}s)
		{
			$pos += length $1;
			next;
		}
		my $c = substr($text, $pos++, 1);
		if ($c eq '(') { $depth++; }
		elsif ($c eq ')')
		{
			if ($depth-- == 0)
			{
				push @args, $cur;
				last;
			}
		}
		elsif ($c eq ',' && $depth == 0)
		{
			push @args, $cur;
			$cur = '';
			next;
		}
		$cur .= $c;
	}
	s/^\s+|\s+$//g for @args;
	return @args;
}

sub same_value
{
	my ($kind, $init, $boot) = @_;
	if ($kind eq 'String')
	{
		return 1 if $init eq 'NULL';
		return $init eq $boot;
	}
	my $num = qr/^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/;
	return $init == $boot if $init =~ $num && $boot =~ $num;
	return $init eq $boot;
}

my (%init, %where, @settings);
for my $file (@ARGV)
{
	open my $fh, '<', $file or die "check-guc-init: cannot read $file: $!\n";
	my $text = do { local $/; <$fh> };
	close $fh;

	# file-scope definitions start in column 0
	my $line = 0;
	for (split /\n/, $text)
	{
		$line++;
		next
		  unless /^(?:static\s+)?(?:bool|int|double|char|uint64|int64)\b[\s*]+(\w+)\s*(?:=\s*([^;]+?))?\s*;/;
		($init{$1}, $where{$1}) = ($2, "$file:$line");
	}
	while ($text =~ /\bDefineCustom(Bool|Int|Real|String|Enum)Variable\s*\(/g)
	{
		my $kind = $1;
		my $at = "$file:" . (1 + (substr($text, 0, pos $text) =~ tr/\n//));
		my @args = call_args($text, pos $text);
		my ($name) = ($args[0] // '') =~ /^"([^"]*)"$/;
		my ($var) = ($args[3] // '') =~ /^&\s*(\w+)$/;
		die "check-guc-init: $at: cannot read this DefineCustom${kind}Variable call\n"
		  unless defined $name && defined $var && defined $args[4];
		push @settings, [ $kind, $name, $var, $args[4], $at ];
	}
}

my $bad = 0;
for my $s (@settings)
{
	my ($kind, $name, $var, $boot, $at) = @$s;
	if (!exists $init{$var})
	{
		print "check-guc-init: $at: no file-scope definition of $var (for $name) found\n";
		$bad++;
		next;
	}
	my $init = $init{$var} // $kind_default{$kind};
	next if same_value($kind, $init, $boot);
	print "check-guc-init: $where{$var}: $var starts as $init but $name boots with $boot ($at)\n";
	$bad++;
}
if (!@settings)
{
	print "check-guc-init: no DefineCustom*Variable calls found in @ARGV\n";
	exit 1;
}
printf "check-guc-init: %d settings, %s\n", scalar @settings,
  $bad ? "$bad with a C initializer that differs from the boot value" : 'every C initializer equals its boot value';
exit($bad ? 1 : 0);
