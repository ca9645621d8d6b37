/*
 * tls.c
 *	  TLS to Redis through OpenSSL: the client context built from the
 *	  redislock.tls_* settings, one session per connection, and the reasons
 *	  a handshake or a TLS read failed, in words a user can act on.
 *
 * The context is built on first use and again after the settings change;
 * the server's chain and host name are checked by OpenSSL during the
 * handshake (redislock.tls_verify). OpenSSL's error queue is shared with
 * the rest of the backend, so it is cleared before each call that may fail
 * and read right after.
 *
 * src/tls.c
 */
#include "postgres.h"

#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "redislock.h"
#include "tls.h"

static SSL_CTX *tls_ctx = NULL;
static uint64 tls_ctx_generation = 0;
static bool warned_unverified = false;

/* A key file must never make OpenSSL ask for a passphrase on a terminal. */
static int
no_passphrase(char *buf, int size, int rwflag, void *userdata)
{
	return 0;
}

/* The first error OpenSSL queued, or fallback when there is none. */
static const char *
queued_error(const char *fallback)
{
	unsigned long e = ERR_get_error();
	const char *reason = e != 0 ? ERR_reason_error_string(e) : NULL;

	ERR_clear_error();
	return reason != NULL ? reason : fallback;
}

/*
 * Builds the client context from the settings; NULL with problem set when
 * a file cannot be used.
 */
static SSL_CTX *
build_context(char *problem, size_t size)
{
	SSL_CTX    *ctx;

	ERR_clear_error();
	ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL)
	{
		snprintf(problem, size, "could not create a TLS context: %s",
				 queued_error("out of memory"));
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
					 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
	/* one read() per reply, not one for each record header and body */
	SSL_CTX_set_read_ahead(ctx, 1);
	if (rl_tls_verify != RL_TLS_VERIFY_NONE)
	{
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
		if (rl_tls_ca_file[0] != '\0' ?
			SSL_CTX_load_verify_locations(ctx, rl_tls_ca_file, NULL) != 1 :
			SSL_CTX_set_default_verify_paths(ctx) != 1)
		{
			snprintf(problem, size, "could not load the CA certificates of %s: %s",
					 rl_tls_ca_file[0] != '\0' ? "redislock.tls_ca_file" : "the system store",
					 queued_error("unknown error"));
			SSL_CTX_free(ctx);
			return NULL;
		}
	}
	if (rl_tls_cert_file[0] != '\0' &&
		SSL_CTX_use_certificate_chain_file(ctx, rl_tls_cert_file) != 1)
	{
		snprintf(problem, size, "could not load redislock.tls_cert_file: %s",
				 queued_error("unknown error"));
		SSL_CTX_free(ctx);
		return NULL;
	}
	if (rl_tls_key_file[0] != '\0' &&
		(SSL_CTX_use_PrivateKey_file(ctx, rl_tls_key_file, SSL_FILETYPE_PEM) != 1 ||
		 SSL_CTX_check_private_key(ctx) != 1))
	{
		snprintf(problem, size, "could not load redislock.tls_key_file: %s",
				 queued_error("unknown error"));
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

static bool
is_ip_address(const char *host)
{
	unsigned char buf[sizeof(struct in6_addr)];

	return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

/* The name a server's certificate must carry: tls_server_name, else host. */
const char *
rl_tls_name(const char *host)
{
	return rl_tls_server_name[0] != '\0' ? rl_tls_server_name : host;
}

/* Called by OpenSSL when the server asks for our certificate. */
static int
note_cert_request(SSL *ssl, void *arg)
{
	*(bool *) arg = true;
	return 1;
}

/*
 * A TLS session over the connected socket fd to host, set to check the
 * server's certificate as redislock.tls_verify says, with
 * redislock.tls_server_name (when set) as the name sent and checked.
 * *cert_requested is set when the server asks for a client certificate.
 * NULL with problem set on failure.
 */
SSL *
rl_tls_new(int fd, const char *host, bool *cert_requested, char *problem,
		   size_t size)
{
	SSL		   *ssl;
	const char *name = rl_tls_name(host);

	if (tls_ctx == NULL || tls_ctx_generation != rl_settings_generation)
	{
		if (tls_ctx != NULL)
			SSL_CTX_free(tls_ctx);
		tls_ctx = build_context(problem, size);
		tls_ctx_generation = rl_settings_generation;
		if (tls_ctx == NULL)
			return NULL;
	}
	rl_tls_warn_unverified();
	ERR_clear_error();
	ssl = SSL_new(tls_ctx);
	if (ssl == NULL || SSL_set_fd(ssl, fd) != 1)
	{
		snprintf(problem, size, "could not start TLS: %s", queued_error("out of memory"));
		SSL_free(ssl);
		return NULL;
	}
	SSL_set_connect_state(ssl);
	SSL_set_cert_cb(ssl, note_cert_request, cert_requested);
	if (!is_ip_address(name))
		(void) SSL_set_tlsext_host_name(ssl, name);
	if (rl_tls_verify == RL_TLS_VERIFY_FULL &&
		(is_ip_address(name) ?
		 X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) != 1 :
		 SSL_set1_host(ssl, name) != 1))
	{
		snprintf(problem, size, "could not set the host name to verify: %s",
				 queued_error("invalid name"));
		SSL_free(ssl);
		return NULL;
	}
	return ssl;
}

static const char *
client_cert_hint(void)
{
	return rl_tls_cert_file[0] == '\0' ?
		"The server requires a client certificate: set redislock.tls_cert_file and redislock.tls_key_file." :
		"Check redislock.tls_cert_file and redislock.tls_key_file: the server must trust their CA.";
}

/* Is reason an alert the server sends when it refuses our certificate? */
static bool
refused_our_certificate(int reason)
{
	switch (reason)
	{
		case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
		case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
		case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
		case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
		case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
		case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
		case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
		case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
			return true;
	}
	return false;
}

/*
 * Says why a TLS call on ssl failed with SSL_ERROR_SSL or SSL_ERROR_SYSCALL
 * (err), into buf. Reads and clears OpenSSL's error queue. Sets *hint to
 * advice for the user, or NULL.
 */
void
rl_tls_describe(SSL *ssl, int err, int saved_errno, const char *host,
				bool cert_requested, char *buf, size_t size, const char **hint)
{
	long		verify = SSL_get_verify_result(ssl);
	unsigned long e = ERR_peek_error();
	int			reason = ERR_GET_REASON(e);

	*hint = NULL;
	if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH)
	{
		snprintf(buf, size, "The server's certificate does not match the name \"%s\": %s",
				 rl_tls_name(host),
				 X509_verify_cert_error_string(verify));
		*hint = "Connect by the name in the certificate, or set redislock.tls_server_name to it.";
	}
	else if (verify != X509_V_OK && ERR_GET_REASON(e) == SSL_R_CERTIFICATE_VERIFY_FAILED)
	{
		snprintf(buf, size, "The server's certificate is not trusted: %s",
				 X509_verify_cert_error_string(verify));
		*hint = "Set redislock.tls_ca_file to the CA that signed the server's certificate.";
	}
	else if (err == SSL_ERROR_SSL && refused_our_certificate(reason))
	{
		snprintf(buf, size, "The server refused the client certificate: %s",
				 ERR_reason_error_string(e));
		*hint = client_cert_hint();
	}
	else if (err == SSL_ERROR_SSL &&
			 (reason == SSL_R_WRONG_VERSION_NUMBER ||
			  reason == SSL_R_PACKET_LENGTH_TOO_LONG))
	{
		snprintf(buf, size, "The server does not speak TLS on this port: %s",
				 ERR_reason_error_string(e));
		*hint = "Use a redis:// URL for a port without TLS.";
	}
	else if (cert_requested && (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_ZERO_RETURN))
	{
		/*
		 * A server that refuses our certificate (or its absence) sends an
		 * alert and closes; when our first request is still unread there,
		 * the close resets the connection and the alert is lost.
		 */
		snprintf(buf, size, "Connection closed by the server after it asked for a client certificate: %s",
				 saved_errno != 0 ? strerror(saved_errno) : "end of stream");
		*hint = client_cert_hint();
	}
	else if (err == SSL_ERROR_SSL)
		snprintf(buf, size, "TLS error: %s",
				 ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "unknown");
	else if (e != 0)
		snprintf(buf, size, "TLS error: %s",
				 ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "unknown");
	else if (saved_errno != 0)
		snprintf(buf, size, "%s", strerror(saved_errno));
	else
		snprintf(buf, size, "Connection closed by the server");
	ERR_clear_error();
}

/*
 * Logs, once per process, that server certificates go unchecked: someone
 * set redislock.tls_verify = none on purpose, but it should not go unseen.
 */
void
rl_tls_warn_unverified(void)
{
	if (rl_tls_verify != RL_TLS_VERIFY_NONE || warned_unverified)
		return;
	warned_unverified = true;
	ereport(WARNING,
			(errmsg("redislock.tls_verify is none: the certificates of Redis servers are not checked"),
			 errdetail("Anyone on the network path can impersonate the Redis servers."),
			 errhint("Set redislock.tls_verify to full, with redislock.tls_ca_file naming the servers' CA.")));
}

/*
 * GUC check hook support: a key file must be a regular file that only its
 * owner may read, as PostgreSQL requires of ssl_key_file.
 */
bool
rl_tls_check_key_file(const char *path, char **detail, char **hint)
{
	struct stat st;

	if (path == NULL || path[0] == '\0')
		return true;
	if (stat(path, &st) != 0)
	{
		*detail = psprintf("could not access file \"%s\": %m", path);
		return false;
	}
	if (!S_ISREG(st.st_mode))
	{
		*detail = psprintf("\"%s\" is not a regular file", path);
		return false;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0)
	{
		*detail = psprintf("\"%s\" must be owned by the database user or root", path);
		return false;
	}
	if ((st.st_uid == geteuid() && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) ||
		(st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IXGRP | S_IRWXO)) != 0))
	{
		*detail = psprintf("\"%s\" has group or world access", path);
		*hint = "The file must have permissions u=rw (0600) or less if owned by the database user, or permissions u=rw,g=r (0640) or less if owned by root.";
		return false;
	}
	return true;
}

/* GUC check hook support: a certificate file must be readable. */
bool
rl_tls_check_file(const char *path, char **detail)
{
	if (path == NULL || path[0] == '\0' || access(path, R_OK) == 0)
		return true;
	*detail = psprintf("could not read file \"%s\": %m", path);
	return false;
}
