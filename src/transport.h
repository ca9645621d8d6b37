/*
 * transport.h
 *	  A byte stream to one Redis server: a non-blocking TCP or unix socket,
 *	  optionally TLS, with the output buffer and the RESP reply reader.
 *
 * src/transport.h
 */
#ifndef REDISLOCK_TRANSPORT_H
#define REDISLOCK_TRANSPORT_H

#include "datatype/timestamp.h"

typedef struct RLSocket RLSocket;

/* How a step on the stream ended. */
typedef enum RLIo
{
	RL_IO_DONE,					/* did what it could: more may follow */
	RL_IO_WAIT,					/* wait for rl_sock_wants() and call again */
	RL_IO_FAILED				/* the stream is broken: rl_sock_error() */
} RLIo;

extern RLSocket *rl_sock_open(const char *host, int port, const char *unix_path,
							  TimestampTz until, char *problem, size_t size);
extern bool rl_sock_connected(RLSocket *s, bool tls, const char *host,
							  char *problem, size_t size);
extern RLIo rl_sock_handshake(RLSocket *s);
extern bool rl_sock_queue(RLSocket *s, const char *data, size_t len);
extern RLIo rl_sock_flush(RLSocket *s);
extern RLIo rl_sock_read(RLSocket *s);
extern bool rl_sock_reply(RLSocket *s, void **reply);
extern int	rl_sock_fd(const RLSocket *s);
extern uint32 rl_sock_wants(const RLSocket *s);
extern uint32 rl_sock_read_wants(const RLSocket *s);
extern bool rl_sock_is_tls(const RLSocket *s);
extern bool rl_sock_got_bytes(const RLSocket *s);
extern bool rl_sock_got_tls_record(const RLSocket *s);
extern const char *rl_sock_error(const RLSocket *s);
extern const char *rl_sock_hint(const RLSocket *s);
extern void rl_sock_close(RLSocket *s, bool reset);

#endif							/* REDISLOCK_TRANSPORT_H */
