/*
 * redislock.c
 *	  Module initialisation: settings (GUCs), shared memory hooks and the
 *	  transaction callbacks that end transaction-scope locks.
 *
 * src/redislock.c
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/guc.h"

#include "cleanup.h"
#include "conn.h"
#include "master_switch.h"
#include "deadlock.h"
#include "lock.h"
#include "onlost.h"
#include "plain.h"
#include "redislock.h"
#include "registry.h"
#include "secrets.h"
#include "tls.h"
#include "wakeup.h"
#include "worker.h"

PG_MODULE_MAGIC;

char	   *rl_url = NULL;
char	   *rl_password = NULL;
char	   *rl_password_file = NULL;
char	   *rl_sentinels = NULL;
char	   *rl_sentinel_master = NULL;
char	   *rl_sentinel_password = NULL;
char	   *rl_cluster_nodes = NULL;
char	   *rl_redlock_nodes = NULL;
int			rl_cluster_pubsub = RL_PUBSUB_SHARDED;
int			rl_redlock_drift = 10;
int			rl_connect_timeout = 2000;
int			rl_command_timeout = 5000;
int			rl_watchdog_timeout = 30000;
int			rl_fair_wait_timeout = 10000;
bool		rl_verify_on_commit = true;
bool		rl_warn_session_locks = false;
int			rl_sync_replicas = 0;
int			rl_semaphore_recheck = 5000;
int			rl_max_locks_per_session = 1000;
int			rl_max_locks_per_role = -1;
char	   *rl_tls_ca_file = NULL;
char	   *rl_tls_cert_file = NULL;
char	   *rl_tls_key_file = NULL;
int			rl_tls_verify = RL_TLS_VERIFY_FULL;
char	   *rl_tls_server_name = NULL;
bool		rl_sentinel_tls = false;
uint64		rl_settings_generation = 1;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);

static bool
check_url(char **newval, void **extra, GucSource source)
{
	char	   *detail = NULL;

	if (rl_check_url(*newval, &detail))
		return true;
	GUC_check_errdetail("%s", detail);
	return false;
}

static const struct config_enum_entry layout_options[] = {
	{"redisson", RL_LAYOUT_REDISSON, false},
	{"plain", RL_LAYOUT_PLAIN, false},
	{NULL, 0, false}
};

static const struct config_enum_entry pubsub_options[] = {
	{"sharded", RL_PUBSUB_SHARDED, false},
	{"classic", RL_PUBSUB_CLASSIC, false},
	{NULL, 0, false}
};

static bool
check_nodes(char **newval, void **extra, GucSource source)
{
	char	   *detail = NULL;

	if (rl_check_nodes(*newval, &detail))
		return true;
	GUC_check_errdetail("%s", detail);
	return false;
}

static void
assign_connection_setting(const char *newval, void *extra)
{
	rl_settings_generation++;
}

static void
assign_enum_connection_setting(int newval, void *extra)
{
	rl_settings_generation++;
}

static void
assign_bool_connection_setting(bool newval, void *extra)
{
	rl_settings_generation++;
}

static const struct config_enum_entry tls_verify_options[] = {
	{"full", RL_TLS_VERIFY_FULL, false},
	{"ca", RL_TLS_VERIFY_CA, false},
	{"none", RL_TLS_VERIFY_NONE, false},
	{NULL, 0, false}
};

static bool
check_tls_file(char **newval, void **extra, GucSource source)
{
	char	   *detail = NULL;

	if (rl_tls_check_file(*newval, &detail))
		return true;
	GUC_check_errdetail("%s", detail);
	return false;
}

static bool
check_tls_key_file(char **newval, void **extra, GucSource source)
{
	char	   *detail = NULL;
	char	   *hint = NULL;

	if (rl_tls_check_key_file(*newval, &detail, &hint))
		return true;
	GUC_check_errdetail("%s", detail);
	if (hint)
		GUC_check_errhint("%s", hint);
	return false;
}

static void
shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	rl_registry_request();
	rl_registry_waits_request();
	rl_onlost_request();
	rl_wakeup_request();
	rl_master_switch_request();
}

static void
shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	rl_registry_startup();
	rl_registry_waits_startup();
	rl_onlost_startup();
	rl_wakeup_startup();
	rl_master_switch_startup();
}

static void
define_settings(void)
{
	DefineCustomStringVariable("redislock.url",
							   "Redis server that holds the locks.",
							   "redis://[user[:password]@]host[:port][/db], rediss://... for TLS, or unix:///path[?db=N].",
							   &rl_url,
							   "redis://127.0.0.1:6379",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   check_url, assign_connection_setting, rl_show_url);
	DefineCustomStringVariable("redislock.password",
							   "Password for the Redis server; overrides redislock.password_file and one in redislock.url.",
							   NULL,
							   &rl_password,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   NULL, assign_connection_setting, rl_show_password);
	DefineCustomStringVariable("redislock.password_file",
							   "File whose first line is the password for the Redis server.",
							   "Used when redislock.password is empty; overrides a password in redislock.url. The file must be owned by the server's user, with permissions u=rw (0600) or less.",
							   &rl_password_file,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY,
							   NULL, assign_connection_setting, NULL);
	DefineCustomStringVariable("redislock.sentinels",
							   "Redis Sentinels that name the master, as host:port,host:port,...",
							   "When set, the master is looked up through them and followed across failovers; redislock.url then gives only user, password and database.",
							   &rl_sentinels,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY,
							   check_nodes, assign_connection_setting, NULL);
	DefineCustomStringVariable("redislock.sentinel_master",
							   "Name under which the sentinels monitor the master.",
							   NULL,
							   &rl_sentinel_master,
							   "mymaster",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY,
							   NULL, assign_connection_setting, NULL);
	DefineCustomStringVariable("redislock.sentinel_password",
							   "Password of the Redis Sentinels (their requirepass).",
							   NULL,
							   &rl_sentinel_password,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   NULL, assign_connection_setting, rl_show_sentinel_password);
	DefineCustomStringVariable("redislock.cluster_nodes",
							   "Seed nodes of a Redis Cluster, as host:port,host:port,...",
							   "When set, locks live in the cluster: each on the node serving its hash slot, found from these.",
							   &rl_cluster_nodes,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY,
							   check_nodes, assign_connection_setting, NULL);
	DefineCustomEnumVariable("redislock.cluster_pubsub",
							 "Pub/sub used for unlock messages on a Redis Cluster.",
							 "sharded (SSUBSCRIBE/SPUBLISH, when the cluster has it) or classic; must match the Redisson clients' subscription mode.",
							 &rl_cluster_pubsub,
							 RL_PUBSUB_SHARDED,
							 pubsub_options,
							 PGC_SUSET,
							 0,
							 NULL, assign_enum_connection_setting, NULL);
	DefineCustomStringVariable("redislock.redlock_nodes",
							   "Independent Redis masters for Redlock, as host:port,host:port,... (at least 3).",
							   "When set, a lock is held when a majority of them grant it.",
							   &rl_redlock_nodes,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY,
							   check_nodes, assign_connection_setting, NULL);
	DefineCustomIntVariable("redislock.redlock_drift",
							"Clock drift allowed for, per second of lease, in Redlock (per mille).",
							"An acquisition counts only if lease - elapsed - lease * drift / 1000 - 2 ms is still positive.",
							&rl_redlock_drift,
							10, 0, 500,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("redislock.connect_timeout",
							"How long to wait for a connection to Redis.",
							NULL,
							&rl_connect_timeout,
							2000, 1, RL_MAX_CONNECT_TIMEOUT_MS,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("redislock.command_timeout",
							"How long to wait for Redis to answer one request.",
							"A call that times out fails with an error; it never waits longer.",
							&rl_command_timeout,
							5000, 1, RL_MAX_COMMAND_TIMEOUT_MS,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("redislock.watchdog_timeout",
							"Lease of locks taken without a lease (watchdog mode).",
							NULL,
							&rl_watchdog_timeout,
							30000, 1000, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("redislock.fair_wait_timeout",
							"How long a fair waiter that stops calling keeps its place in the queue.",
							"Live waiters renew their place every third of this. Redisson's thread wait time: must equal the fairLockWaitTimeout of Java services sharing the lock names (300 s; 5 s before Redisson 3.13.3).",
							&rl_fair_wait_timeout,
							10000, 1000, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("redislock.deadlock_timeout",
							"How long a Redis lock wait lasts before it checks for a deadlock.",
							"Checked again each time as long while still waiting; -1 uses deadlock_timeout, 0 turns detection off.",
							&rl_deadlock_timeout,
							-1, -1, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("redislock.verify_on_commit",
							 "Fail COMMIT of a writing transaction when a held Redis lock was lost.",
							 NULL,
							 &rl_verify_on_commit,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("redislock.warn_session_locks",
							 "Warn when a session-scope lock is taken.",
							 "For connections that come through a transaction pooler, where a session lock stays with the server connection.",
							 &rl_warn_session_locks,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("redislock.sync_replicas",
							"Replicas that must confirm an acquisition (Redis WAIT); 0 = none.",
							NULL,
							&rl_sync_replicas,
							0, 0, 64,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("redislock.semaphore_recheck",
							"How often a semaphore waiter tries again when no message came.",
							"Redisson before 3.16.2 adds permits (addPermits) without publishing; 0: only on a message, a holder's expiry or the deadline.",
							&rl_semaphore_recheck,
							5000, 0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("redislock.max_locks_per_session",
							"Most distinct Redis locks one session may hold or wait for at once.",
							"Keeps one session from taking the whole shared table.",
							&rl_max_locks_per_session,
							1000, 1, 1000000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("redislock.max_locks_per_role",
							"Most entries of the shared lock table the sessions of one role may take at once.",
							"-1: a quarter of redislock.max_locks. Counted for the role a session logged in as; superusers are not limited.",
							&rl_max_locks_per_role,
							-1, -1, 1000000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);
	DefineCustomStringVariable("redislock.tls_ca_file",
							   "CA certificates that Redis servers' certificates must chain to (TLS).",
							   "Empty: the system's store.",
							   &rl_tls_ca_file,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY,
							   check_tls_file, assign_connection_setting, NULL);
	DefineCustomStringVariable("redislock.tls_cert_file",
							   "Client certificate shown to Redis servers that ask for one (TLS).",
							   NULL,
							   &rl_tls_cert_file,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY,
							   check_tls_file, assign_connection_setting, NULL);
	DefineCustomStringVariable("redislock.tls_key_file",
							   "Private key of redislock.tls_cert_file (PEM, no passphrase).",
							   "Must be owned by the server's user with permissions u=rw (0600) or less, or by root with u=rw,g=r (0640) or less.",
							   &rl_tls_key_file,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY,
							   check_tls_key_file, assign_connection_setting, NULL);
	DefineCustomEnumVariable("redislock.tls_verify",
							 "What is checked of a Redis server's certificate (TLS).",
							 "full: chain and host name; ca: chain only; none: nothing (logged as a WARNING).",
							 &rl_tls_verify,
							 RL_TLS_VERIFY_FULL,
							 tls_verify_options,
							 PGC_SUSET,
							 GUC_SUPERUSER_ONLY,
							 NULL, assign_enum_connection_setting, NULL);
	DefineCustomStringVariable("redislock.tls_server_name",
							   "Name sent (SNI) and verified in Redis servers' certificates, instead of the host connected to.",
							   "For servers reached by IP address whose certificate names a host.",
							   &rl_tls_server_name,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY,
							   NULL, assign_connection_setting, NULL);
	DefineCustomBoolVariable("redislock.sentinel_tls",
							 "Speak TLS to the Redis Sentinels of redislock.sentinels.",
							 "The masters they name use TLS when redislock.url is rediss://.",
							 &rl_sentinel_tls,
							 false,
							 PGC_SUSET,
							 GUC_SUPERUSER_ONLY,
							 NULL, assign_bool_connection_setting, NULL);
	/* The shared table exists only when preloaded; so does its size. */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("redislock.max_locks",
								"Size of the shared table of held Redis locks.",
								"Each session holding a lock takes one entry per lock name.",
								&rl_max_locks,
								4096, 16, 1000000,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);
	DefineCustomEnumVariable("redislock.layout",
							 "Key layout of the exclusive locks this session takes.",
							 "redisson: a hash per lock, as Redisson keeps it; plain: one string key holding the holder's token, as redsync, node redlock, redis-py, ShedLock and Spring Integration keep it.",
							 &rl_layout,
							 RL_LAYOUT_REDISSON,
							 layout_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomStringVariable("redislock.spring_registries",
							   "Spring Integration RedisLockRegistry keys whose waiters a release of a plain lock wakes.",
							   "A release of plain lock \"<registry>:<key>\" publishes on \"<registry>-channel:<registry>:<key>\" for each registry listed (comma-separated), where the registry's pub/sub lock type listens, and waiters listen there too.",
							   &rl_spring_registries,
							   "",
							   PGC_SUSET,
							   0,
							   rl_check_spring_registries, NULL, NULL);
	MarkGUCPrefixReserved("redislock");
}

void
_PG_init(void)
{
	rl_onlost_init();
	define_settings();

	if (process_shared_preload_libraries_in_progress)
	{
		prev_shmem_request_hook = shmem_request_hook;
		shmem_request_hook = shmem_request;
		prev_shmem_startup_hook = shmem_startup_hook;
		shmem_startup_hook = shmem_startup;
		rl_workers_register();
	}

	rl_secrets_init();

	/* what cleanup paths use exists before the first call can need it */
	rl_cleanup_init();
	rl_holds_init();
	rl_lock_init();
}
