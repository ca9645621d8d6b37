/*
 * tls.h
 *	  TLS sessions to Redis servers, set up from the redislock.tls_*
 *	  settings, and the words for what went wrong in one.
 *
 * src/tls.h
 */
#ifndef REDISLOCK_TLS_H
#define REDISLOCK_TLS_H

#include <openssl/ssl.h>

extern SSL *rl_tls_new(int fd, const char *host, bool *cert_requested,
					   char *problem, size_t size);
extern const char *rl_tls_name(const char *host);
extern void rl_tls_describe(SSL *ssl, int err, int saved_errno, const char *host,
							bool cert_requested, char *buf, size_t size,
							const char **hint);
extern void rl_tls_warn_unverified(void);
extern bool rl_tls_check_key_file(const char *path, char **detail, char **hint);
extern bool rl_tls_check_file(const char *path, char **detail);

#endif							/* REDISLOCK_TLS_H */
