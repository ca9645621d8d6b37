# RedisLockTest/Redlock.pm — RedisLockTest::Redlock, N independent Redis
# masters for the Redlock tests.  Loaded by test/lib/RedisLockTest.pm; its
# POD is below.

package RedisLockTest::Redlock;

use strict;
use warnings;

# for RedisLockTest::Redis (loads the whole harness)
use RedisLockTest ();

=pod

=head1 RedisLockTest::Redlock

N independent Redis masters (no replication, no cluster): the deployment of
the Redlock algorithm.

=over

=item RedisLockTest::Redlock->new(n => 5, %opt)

Starts n servers (default 5); %opt goes to every RedisLockTest::Redis->new,
e.g. tls => RedisLockTest::TLS->new for masters that speak TLS only (list
then names their TLS ports).

=item $rl->nodes, $rl->node($i)

All servers (RedisLockTest::Redis) / server $i, counted from 0.

=item $rl->list

"127.0.0.1:P1,127.0.0.1:P2,..." in node order.

=item $rl->kill9($i), $rl->restart_empty($i)

Crash server $i; crash it and start it again without its data (a node that
lost its locks).  Return the server.

=item $rl->holders($key)

On how many running servers $key exists.

=back

=cut

sub new
{
	my ($class, %opt) = @_;
	my $n = delete $opt{n} // 5;
	return bless { nodes => [ map { RedisLockTest::Redis->new(%opt) } 1 .. $n ] }, $class;
}

sub nodes         { @{ $_[0]{nodes} } }
sub node          { $_[0]{nodes}[ $_[1] ] }
sub list          { join(',', map { '127.0.0.1:' . $_->port } @{ $_[0]{nodes} }) }
sub kill9         { $_[0]->node($_[1])->kill9 }
sub restart_empty { $_[0]->node($_[1])->restart_empty }

sub holders
{
	my ($self, $key) = @_;
	return scalar grep { defined $_->pid && scalar($_->cli('EXISTS', $key)) eq '1' } $self->nodes;
}

1;
