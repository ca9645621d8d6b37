/*
 * redislock.h
 *	  Settings and limits that every part of redislock shares.
 *
 * src/redislock.h
 */
#ifndef REDISLOCK_H
#define REDISLOCK_H

/* Longest lock name, in bytes (documented in docs/sql-reference.md). */
#define RL_NAME_MAX 512

/* Shortest fixed lease: anything shorter could expire before the reply. */
#define RL_MIN_LEASE_MS 100

/* Longest fixed lease: 100 years, counted as interval does (30-day months). */
#define RL_MAX_LEASE_MS (INT64CONST(100) * 12 * 30 * 24 * 3600 * 1000)

/*
 * Bounds of redislock.connect_timeout and redislock.command_timeout
 * (documented in docs/sql-reference.md): a session may choose its timeouts,
 * but no choice makes one connection attempt or request wait for hours.
 */
#define RL_MAX_CONNECT_TIMEOUT_MS (60 * 1000)
#define RL_MAX_COMMAND_TIMEOUT_MS (5 * 60 * 1000)

/*
 * Most names one redis_lock_acquire_all() call takes (documented in
 * docs/sql-reference.md).
 */
#define RL_MULTI_MAX 32

/* Owner ids are "<36-char uuid>:<session number>". */
#define RL_OWNER_MAX 64

/* What a hold is of: the hash of a name is one of these layouts. */
typedef enum RLKind
{
	RL_KIND_LOCK,				/* an exclusive lock (Redisson RLock) */
	RL_KIND_READ,				/* a shared hold of a read-write lock
								 * (Redisson RReadWriteLock.readLock()) */
	RL_KIND_WRITE,				/* its exclusive hold (writeLock()) */
	RL_KIND_SEMAPHORE,			/* permits of a semaphore (RSemaphore) */
	RL_KIND_PERMIT,				/* one expiring permit
								 * (RPermitExpirableSemaphore) */
	RL_KIND_LATCH,				/* not a hold: a wait for a count-down latch */
	RL_KIND_PLAIN				/* an exclusive lock of the plain layout: one
								 * string key (plain.c) */
} RLKind;

/* A permit id: 16 random bytes, shown as 32 hex characters (as Redisson). */
#define RL_PERMIT_ID_BYTES 16
#define RL_PERMIT_ID_HEX (2 * RL_PERMIT_ID_BYTES)

/* Most permits one call takes or gives back (docs/sql-reference.md). */
#define RL_PERMITS_MAX 1000000

/*
 * views.c: a text datum for bytes that did not come from this database (a
 * name in the shared lock table, a field of a hash in Redis).
 */
extern Datum rl_foreign_text(const char *bytes);

extern char *rl_url;
extern char *rl_password;
extern char *rl_password_file;
extern char *rl_sentinels;
extern char *rl_sentinel_master;
extern char *rl_sentinel_password;
extern char *rl_cluster_nodes;
extern char *rl_redlock_nodes;
extern int	rl_cluster_pubsub;
extern int	rl_redlock_drift;
extern int	rl_connect_timeout;
extern int	rl_command_timeout;
extern int	rl_watchdog_timeout;
extern int	rl_fair_wait_timeout;
extern bool rl_verify_on_commit;
extern bool rl_warn_session_locks;
extern int	rl_sync_replicas;
extern int	rl_semaphore_recheck;
extern int	rl_max_locks_per_session;
extern int	rl_max_locks_per_role;
extern char *rl_tls_ca_file;
extern char *rl_tls_cert_file;
extern char *rl_tls_key_file;
extern int	rl_tls_verify;
extern char *rl_tls_server_name;
extern bool rl_sentinel_tls;

/* redislock.cluster_pubsub */
typedef enum RLPubSub
{
	RL_PUBSUB_SHARDED,
	RL_PUBSUB_CLASSIC
} RLPubSub;

/* redislock.tls_verify */
typedef enum RLTlsVerify
{
	RL_TLS_VERIFY_FULL,			/* chain and host name */
	RL_TLS_VERIFY_CA,			/* chain only */
	RL_TLS_VERIFY_NONE
} RLTlsVerify;

/* Bumped whenever url or password change, so connections reopen. */
extern uint64 rl_settings_generation;

#endif							/* REDISLOCK_H */
