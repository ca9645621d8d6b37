/*
 * transport.c
 *	  The byte stream to one Redis server: our own non-blocking TCP or unix
 *	  socket, optionally TLS (tls.c), an output buffer and hiredis' reply
 *	  reader. Nothing here waits: a step that cannot go on says which socket
 *	  event it needs, and conn.c waits for it on the process latch.
 *
 * hiredis keeps what it does well, the RESP reply reader; its socket code
 * is not used: its blocking calls retry on EINTR and it has no TLS in the
 * version Debian ships. With TLS, a read or a write may need the other
 * direction first (a key update, a renegotiation): the step then asks for
 * that event. OpenSSL reads ahead (one read() per reply, not two per
 * record), so a read takes in everything OpenSSL holds, decrypted or not:
 * no reply may sit in its buffers while we sleep on the socket.
 *
 * src/transport.c
 */
#include "postgres.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <hiredis/hiredis.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "storage/latch.h"

#include "redislock.h"
#include "resolve.h"
#include "tls.h"
#include "transport.h"

/* What one read takes from the socket at most. */
#define READ_CHUNK 16384

/* TCP keepalive as hiredis sets it: idle 15 s, then every 5 s, 3 probes. */
#define KEEPALIVE_IDLE 15
#define KEEPALIVE_INTERVAL 5
#define KEEPALIVE_COUNT 3

/*
 * malloc'd, not palloc'd: a connection outlives transactions and must be
 * closable from any memory context, as the reader hiredis allocates is.
 */
struct RLSocket
{
	int			fd;
	bool		tcp;
	SSL		   *ssl;
	bool		handshaken;
	bool		cert_requested; /* the server asked for a client certificate */
	char		host[256];		/* for the certificate's name and messages */
	char	   *obuf;
	size_t		olen;
	size_t		opos;
	size_t		ocap;
	redisReader *reader;
	uint32		wants;			/* the event the last step waits for */
	uint32		read_wants;		/* the event the next read waits for */
	int			first_byte;		/* of the stream, -1 before any */
	const char *hint;
	char		error[512];
};

static RLIo
sock_fail(RLSocket *s, const char *fmt,...) pg_attribute_printf(2, 3);

static RLIo
sock_fail(RLSocket *s, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(s->error, sizeof(s->error), fmt, ap);
	va_end(ap);
	return RL_IO_FAILED;
}

static RLSocket *
sock_new(int fd, bool tcp, const char *host, char *problem, size_t size)
{
	RLSocket   *s = calloc(1, sizeof(RLSocket));

	if (s != NULL)
		s->reader = redisReaderCreate();
	if (s == NULL || s->reader == NULL)
	{
		free(s);
		close(fd);
		snprintf(problem, size, "out of memory");
		return NULL;
	}
	s->fd = fd;
	s->tcp = tcp;
	strlcpy(s->host, host, sizeof(s->host));
	s->wants = WL_SOCKET_WRITEABLE;
	s->read_wants = WL_SOCKET_READABLE;
	s->first_byte = -1;
	return s;
}

/* Starts a non-blocking connect to the first address of host that takes one. */
static int
tcp_connect(const char *host, int port, TimestampTz until, char *problem,
			size_t size)
{
	RLLookup   *l = rl_resolve(host, port, until, problem, size);
	int			fd = -1;
	int			err = EADDRNOTAVAIL;

	if (l == NULL)
		return -1;
	for (const struct addrinfo *a = rl_lookup_addrs(l); a != NULL; a = a->ai_next)
	{
		fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
					a->ai_protocol);
		if (fd >= 0 &&
			(connect(fd, a->ai_addr, a->ai_addrlen) == 0 || errno == EINPROGRESS))
			break;
		err = errno;
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	rl_lookup_free(l);
	if (fd < 0)
		snprintf(problem, size, "%s", strerror(err));
	return fd;
}

static int
unix_connect(const char *path, char *problem, size_t size)
{
	struct sockaddr_un sa;
	int			fd;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlcpy(sa.sun_path, path, sizeof(sa.sun_path)) >= sizeof(sa.sun_path))
	{
		snprintf(problem, size, "the socket path is too long");
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0 &&
		connect(fd, (struct sockaddr *) &sa, sizeof(sa)) != 0 &&
		errno != EINPROGRESS && errno != EAGAIN)
	{
		snprintf(problem, size, "%s", strerror(errno));
		close(fd);
		return -1;
	}
	if (fd < 0)
		snprintf(problem, size, "%s", strerror(errno));
	return fd;
}

/*
 * Starts connecting to host:port (resolved by until at the latest, see
 * resolve.c) or to unix_path when set. The socket becomes writable once
 * the connect succeeded or failed: then call rl_sock_connected(). NULL with
 * problem set on failure.
 */
RLSocket *
rl_sock_open(const char *host, int port, const char *unix_path,
			 TimestampTz until, char *problem, size_t size)
{
	bool		tcp = unix_path == NULL || unix_path[0] == '\0';
	int			fd = tcp ? tcp_connect(host, port, until, problem, size) :
		unix_connect(unix_path, problem, size);

	if (fd < 0)
		return NULL;
	return sock_new(fd, tcp, tcp ? host : unix_path, problem, size);
}

static void
set_tcp_options(int fd)
{
	int			one = 1;
	int			idle = KEEPALIVE_IDLE;
	int			interval = KEEPALIVE_INTERVAL;
	int			count = KEEPALIVE_COUNT;

	/* requests are small and latency is what counts */
	(void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* a server that vanished without a FIN is noticed by an idle connection */
	(void) setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	(void) setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	(void) setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
	(void) setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

/*
 * Once the socket of rl_sock_open() is writable: did the connect succeed?
 * With tls, a TLS session is started on it; rl_sock_handshake() runs it.
 */
bool
rl_sock_connected(RLSocket *s, bool tls, const char *host, char *problem,
				  size_t size)
{
	int			err = 0;
	socklen_t	errlen = sizeof(err);

	if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &errlen) < 0)
		err = errno;
	if (err != 0)
	{
		snprintf(problem, size, "%s", strerror(err));
		return false;
	}
	if (s->tcp)
		set_tcp_options(s->fd);
	if (tls && s->tcp)
	{
		s->ssl = rl_tls_new(s->fd, host, &s->cert_requested, problem, size);
		if (s->ssl == NULL)
			return false;
		s->wants = WL_SOCKET_WRITEABLE;
	}
	else
		s->handshaken = true;
	return true;
}

/* The socket event an SSL_ERROR_WANT_* asks for, or 0 for a failure. */
static uint32
tls_wants(SSL *ssl, int ret)
{
	switch (SSL_get_error(ssl, ret))
	{
		case SSL_ERROR_WANT_READ:
			return WL_SOCKET_READABLE;
		case SSL_ERROR_WANT_WRITE:
			return WL_SOCKET_WRITEABLE;
		default:
			return 0;
	}
}

/* Records why a TLS call that returned ret failed. */
static RLIo
tls_fail(RLSocket *s, int ret, int saved_errno)
{
	rl_tls_describe(s->ssl, SSL_get_error(s->ssl, ret), saved_errno, s->host,
					s->cert_requested && s->first_byte < 0,
					s->error, sizeof(s->error), &s->hint);
	return RL_IO_FAILED;
}

/*
 * Runs the TLS handshake as far as it can go without waiting; DONE once the
 * server is verified (or at once without TLS).
 */
RLIo
rl_sock_handshake(RLSocket *s)
{
	int			ret;

	if (s->handshaken)
		return RL_IO_DONE;
	ERR_clear_error();
	errno = 0;
	ret = SSL_do_handshake(s->ssl);
	if (ret == 1)
	{
		s->handshaken = true;
		return RL_IO_DONE;
	}
	s->wants = tls_wants(s->ssl, ret);
	if (s->wants != 0)
		return RL_IO_WAIT;
	return tls_fail(s, ret, errno);
}

/* Appends data to what rl_sock_flush() sends next. */
bool
rl_sock_queue(RLSocket *s, const char *data, size_t len)
{
	if (s->opos == s->olen)
		s->opos = s->olen = 0;
	if (s->olen + len > s->ocap)
	{
		size_t		cap = Max(s->ocap * 2, s->olen + len);
		char	   *buf = realloc(s->obuf, cap);

		if (buf == NULL)
			return false;
		s->obuf = buf;
		s->ocap = cap;
	}
	memcpy(s->obuf + s->olen, data, len);
	s->olen += len;
	return true;
}

/* Writes what is queued; DONE when all of it went out. */
RLIo
rl_sock_flush(RLSocket *s)
{
	while (s->opos < s->olen)
	{
		size_t		len = s->olen - s->opos;
		ssize_t		n;

		if (s->ssl != NULL)
		{
			ERR_clear_error();
			errno = 0;
			n = SSL_write(s->ssl, s->obuf + s->opos, (int) Min(len, (size_t) INT_MAX));
			if (n <= 0)
			{
				s->wants = tls_wants(s->ssl, (int) n);
				return s->wants != 0 ? RL_IO_WAIT : tls_fail(s, (int) n, errno);
			}
		}
		else
		{
			n = send(s->fd, s->obuf + s->opos, len, MSG_NOSIGNAL);
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			{
				s->wants = WL_SOCKET_WRITEABLE;
				return RL_IO_WAIT;
			}
			if (n < 0)
				return sock_fail(s, "%s", strerror(errno));
		}
		s->opos += n;
	}
	s->opos = s->olen = 0;
	return RL_IO_DONE;
}

static RLIo
take_in(RLSocket *s, const char *buf, size_t n)
{
	if (s->first_byte < 0)
		s->first_byte = (unsigned char) buf[0];
	if (redisReaderFeed(s->reader, buf, n) != REDIS_OK)
		return sock_fail(s, "%s", s->reader->errstr);
	return RL_IO_DONE;
}

/*
 * Reads what arrived into the reply reader: DONE when something came, WAIT
 * (for rl_sock_read_wants()) when nothing is there yet.
 */
RLIo
rl_sock_read(RLSocket *s)
{
	char		buf[READ_CHUNK];
	ssize_t		n;

	if (s->ssl == NULL)
	{
		n = recv(s->fd, buf, sizeof(buf), 0);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return RL_IO_WAIT;
		if (n < 0)
			return sock_fail(s, "%s", strerror(errno));
		if (n == 0)
			return sock_fail(s, "Connection closed by the server");
		return take_in(s, buf, n);
	}
	for (;;)
	{
		int			ret;

		ERR_clear_error();
		errno = 0;
		ret = SSL_read(s->ssl, buf, sizeof(buf));
		if (ret <= 0)
		{
			int			saved_errno = errno;

			s->read_wants = tls_wants(s->ssl, ret);
			if (s->read_wants != 0)
				return RL_IO_WAIT;
			s->read_wants = WL_SOCKET_READABLE;
			return tls_fail(s, ret, saved_errno);
		}
		s->read_wants = WL_SOCKET_READABLE;
		if (take_in(s, buf, ret) != RL_IO_DONE)
			return RL_IO_FAILED;
		if (!SSL_has_pending(s->ssl))
			return RL_IO_DONE;
	}
}

/*
 * The next complete reply, if one has been read (*reply NULL if not).
 * False when the stream is not RESP.
 */
bool
rl_sock_reply(RLSocket *s, void **reply)
{
	*reply = NULL;
	if (redisReaderGetReply(s->reader, reply) == REDIS_OK)
		return true;
	sock_fail(s, "%s", s->reader->errstr);
	return false;
}

int
rl_sock_fd(const RLSocket *s)
{
	return s->fd;
}

uint32
rl_sock_wants(const RLSocket *s)
{
	return s->wants;
}

uint32
rl_sock_read_wants(const RLSocket *s)
{
	return s->read_wants;
}

bool
rl_sock_is_tls(const RLSocket *s)
{
	return s->ssl != NULL;
}

bool
rl_sock_got_bytes(const RLSocket *s)
{
	return s->first_byte >= 0;
}

/* Did the stream start like a TLS record (an alert or a handshake)? */
bool
rl_sock_got_tls_record(const RLSocket *s)
{
	return s->ssl == NULL && (s->first_byte == 0x15 || s->first_byte == 0x16);
}

const char *
rl_sock_error(const RLSocket *s)
{
	return s->error;
}

const char *
rl_sock_hint(const RLSocket *s)
{
	return s->hint;
}

/*
 * Closes the stream. With reset, closing resets the connection: bytes still
 * unsent die with it, and no TLS close_notify is sent.
 */
void
rl_sock_close(RLSocket *s, bool reset)
{
	if (reset)
	{
		struct linger lg = {1, 0};

		(void) setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	if (s->ssl != NULL)
	{
		if (!reset && s->handshaken)
		{
			ERR_clear_error();
			(void) SSL_shutdown(s->ssl);
		}
		SSL_free(s->ssl);
		ERR_clear_error();
	}
	close(s->fd);
	redisReaderFree(s->reader);
	free(s->obuf);
	free(s);
}
