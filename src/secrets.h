/*
 * secrets.h
 *	  Keeping the Redis secrets from everyone but superusers.
 *
 * src/secrets.h
 */
#ifndef SECRETS_H
#define SECRETS_H

/* Show hooks of the secret settings: masked unless the user is a superuser. */
extern const char *rl_show_password(void);
extern const char *rl_show_sentinel_password(void);
extern const char *rl_show_url(void);

extern bool rl_read_password_file(char *buf, size_t size,
								  char *problem, size_t problem_size,
								  const char **hint);

/* Installs the log hook that redacts secrets from messages. */
extern void rl_secrets_init(void);

#endif							/* SECRETS_H */
