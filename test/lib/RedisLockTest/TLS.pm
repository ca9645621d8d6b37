# RedisLockTest/TLS.pm — RedisLockTest::TLS, throwaway certificates for the
# TLS tests (CAs, server and client certificates), made with the openssl
# command at test time.  Loaded by test/lib/RedisLockTest.pm; its POD is below.

package RedisLockTest::TLS;

use strict;
use warnings;

# for PostgreSQL::Test::Utils (tmp_check, all_tests_passing)
use RedisLockTest ();

=pod

=head1 RedisLockTest::TLS

Certificates for TLS tests, made when first asked for in a test process with
the C<openssl> command (ECDSA P-256 keys, valid for 10 years) in a directory
under tmp_check; nothing is committed.  Keys are mode 0600 and belong to the
user running the test (the same user as the PostgreSQL nodes and
redis-servers it starts), as libpq-style key checks want.

  ca.crt, ca.key                 the CA every trusting side is given
  server.crt, server.key         signed by the CA; SAN DNS:localhost, IP:127.0.0.1
  wrongname.crt, wrongname.key   signed by the CA; SAN DNS:wrong.example only
  untrusted_ca.crt, .key         a second CA that nobody trusts
  untrusted_server.crt, .key     signed by it; SAN DNS:localhost, IP:127.0.0.1
  client.crt, client.key         signed by the CA (a client certificate)
  badclient.crt, badclient.key   signed by the untrusted CA

Server certificates carry extendedKeyUsage serverAuth and clientAuth:
redis-server presents tls-cert-file also on its own outgoing connections
(replication, cluster bus, sentinel), which tls-auth-clients checks.

  my $tls = RedisLockTest::TLS->new;
  my $r   = RedisLockTest::Redis->new(tls => $tls);   # rediss://127.0.0.1:PORT
  ... 'redislock.tls_ca_file' => $tls->ca_file ...

=over

=item RedisLockTest::TLS->new([dir => $dir])

The certificates in $dir (default tmp_check/tls_<test name>), made there if
this process has not made them yet; later calls with the same dir return the
same object.  Dies with openssl's output if a step fails.  The directory is
removed at exit if every test passed (as RedisLockTest::Redis does).

=cut

use File::Spec ();
use Carp qw(croak);
use File::Basename qw(basename);
use File::Path qw(mkpath rmtree);
use IPC::Run ();

my %made;    # dir => object, for this process

sub new
{
	my ($class, %opt) = @_;
	my $dir = $opt{dir};
	if (!defined $dir)
	{
		my $test = basename($0);
		$test =~ s/\.[^.]+$//;
		$dir = File::Spec->rel2abs("$PostgreSQL::Test::Utils::tmp_check/tls_$test");
	}
	my $self = $made{$dir};
	return $self if $self && $self->{owner} == $$;

	$self = bless { dir => $dir, owner => $$ }, $class;
	rmtree($dir);
	mkpath($dir);
	chmod 0700, $dir;
	$self->_make;
	$made{$dir} = $self;
	return $self;
}

=pod

=item $tls->dir

The directory holding the files.

=item $tls->ca_file, $tls->ca_key

=item $tls->server_cert, $tls->server_key

=item $tls->wrongname_cert, $tls->wrongname_key

=item $tls->untrusted_ca_file, $tls->untrusted_ca_key

=item $tls->untrusted_server_cert, $tls->untrusted_server_key

=item $tls->client_cert, $tls->client_key

=item $tls->badclient_cert, $tls->badclient_key

Paths of the files listed above.

=item $tls->server_files($kind)

(cert, key, CA that signed it) of server certificate $kind: 'server'
(default), 'wrongname' or 'untrusted'.  Dies on another kind.

=cut

sub dir                   { $_[0]{dir} }
sub ca_file               { "$_[0]{dir}/ca.crt" }
sub ca_key                { "$_[0]{dir}/ca.key" }
sub server_cert           { "$_[0]{dir}/server.crt" }
sub server_key            { "$_[0]{dir}/server.key" }
sub wrongname_cert        { "$_[0]{dir}/wrongname.crt" }
sub wrongname_key         { "$_[0]{dir}/wrongname.key" }
sub untrusted_ca_file     { "$_[0]{dir}/untrusted_ca.crt" }
sub untrusted_ca_key      { "$_[0]{dir}/untrusted_ca.key" }
sub untrusted_server_cert { "$_[0]{dir}/untrusted_server.crt" }
sub untrusted_server_key  { "$_[0]{dir}/untrusted_server.key" }
sub client_cert           { "$_[0]{dir}/client.crt" }
sub client_key            { "$_[0]{dir}/client.key" }
sub badclient_cert        { "$_[0]{dir}/badclient.crt" }
sub badclient_key         { "$_[0]{dir}/badclient.key" }

sub server_files
{
	my ($self, $kind) = @_;
	$kind //= 'server';
	return ($self->server_cert, $self->server_key, $self->ca_file) if $kind eq 'server';
	return ($self->wrongname_cert, $self->wrongname_key, $self->ca_file)
	  if $kind eq 'wrongname';
	return ($self->untrusted_server_cert, $self->untrusted_server_key, $self->untrusted_ca_file)
	  if $kind eq 'untrusted';
	croak "RedisLockTest::TLS: unknown server certificate '$kind' "
	  . "(server, wrongname or untrusted)";
}

=pod

=item $tls->java_truststore

(path, password) of a PKCS12 trust store holding the CA (ca_file), for a
Java client (RealRedisson's C<tls> option); made with the JDK's C<keytool>
(the one beside C<$ENV{REDISLOCK_JAVA}> when that is a path) when first
asked for.  Dies with keytool's output if that fails.

=cut

sub java_truststore
{
	my ($self) = @_;
	my $file = "$self->{dir}/truststore.p12";
	my $pass = 'redislock-test';
	if (!-f $file)
	{
		my ($in, $out) = ('', '');
		my $keytool = ($ENV{REDISLOCK_JAVA} // '') =~ m{^(.*/)} ? "$1keytool" : 'keytool';
		my @cmd = ($keytool, '-importcert', '-noprompt', '-alias', 'redislock-test-ca',
			'-file', $self->ca_file, '-keystore', $file, '-storetype', 'PKCS12', '-storepass', $pass);
		my $ok = eval { IPC::Run::run(\@cmd, \$in, '>&', \$out, IPC::Run::timeout(60)) };
		if (!$ok)
		{
			unlink $file;
			croak "@cmd failed" . ($@ ? ": $@" : " (status " . ($? >> 8) . ")") . ":\n$out";
		}
	}
	return ($file, $pass);
}

=pod

=back

=cut

# Our own openssl.cnf: the system one (its defaults and extensions) does not
# matter then.
my $CNF = <<'EOF';
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth, clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = DNS:localhost, IP:127.0.0.1
[wrongname]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth, clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = DNS:wrong.example
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF

sub _openssl
{
	my ($self, @args) = @_;
	my ($in, $out) = ('', '');
	my $ok = eval {
		IPC::Run::run([ 'openssl', @args ], \$in, '>&', \$out, IPC::Run::timeout(30));
	};
	croak "openssl @args failed" . ($@ ? ": $@" : " (status " . ($? >> 8) . ")") . ":\n$out"
	  unless $ok;
}

# A key and a certificate: self-signed by that key (a CA) when $ca is undef,
# else signed by CA file prefix $ca.
sub _cert
{
	my ($self, $name, $cn, $section, $ca) = @_;
	my $d = $self->{dir};
	my @key = ('-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
		'-keyout', "$d/$name.key", '-config', "$d/openssl.cnf", '-subj', "/CN=$cn");
	if (!defined $ca)
	{
		$self->_openssl('req', '-x509', @key, '-days', 3650, '-extensions', $section,
			'-out', "$d/$name.crt");
	}
	else
	{
		$self->_openssl('req', '-new', @key, '-out', "$d/$name.csr");
		$self->_openssl('x509', '-req', '-in', "$d/$name.csr", '-days', 3650,
			'-CA', "$d/$ca.crt", '-CAkey', "$d/$ca.key", '-set_serial', $self->{serial}++,
			'-extfile', "$d/openssl.cnf", '-extensions', $section,
			'-out', "$d/$name.crt");
		unlink "$d/$name.csr";
	}
	chmod 0600, "$d/$name.key" or croak "chmod $d/$name.key: $!";
	chmod 0644, "$d/$name.crt" or croak "chmod $d/$name.crt: $!";
}

sub _make
{
	my ($self) = @_;
	my $d = $self->{dir};
	open my $fh, '>', "$d/openssl.cnf" or croak "cannot write $d/openssl.cnf: $!";
	print $fh $CNF;
	close $fh;
	$self->{serial} = 1;
	$self->_cert('ca', 'redislock test CA', 'ca');
	$self->_cert('server', 'localhost', 'server', 'ca');
	$self->_cert('wrongname', 'wrong.example', 'wrongname', 'ca');
	$self->_cert('untrusted_ca', 'redislock untrusted CA', 'ca');
	$self->_cert('untrusted_server', 'localhost', 'server', 'untrusted_ca');
	$self->_cert('client', 'redislock client', 'client', 'ca');
	$self->_cert('badclient', 'redislock bad client', 'client', 'untrusted_ca');
}

END
{
	my $exit = $?;
	if ($exit == 0 && !defined $ENV{PG_TEST_NOCLEAN}
		&& PostgreSQL::Test::Utils::all_tests_passing())
	{
		rmtree($_->{dir}) for grep { $_->{owner} == $$ } values %made;
	}
	$? = $exit;
}

1;
