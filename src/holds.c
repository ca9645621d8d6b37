/*
 * holds.c
 *	  The session's table of the holds it has (keyed by name and kind), what
 *	  it publishes of them in the shared registry, its owner id, and the key
 *	  names and script arguments every primitive uses.
 *
 * src/holds.c
 */
#include "postgres.h"

#include <hiredis/hiredis.h>

#include "common/hashfn.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "conn.h"
#include "lock_int.h"
#include "redislock.h"
#include "registry.h"
#include "route.h"

HTAB	   *rl_local_locks = NULL;
static int	npending = 0;		/* entries that are dirty or queued */
static char owner_id[RL_OWNER_MAX];

const char *
rl_owner_id(void)
{
	if (owner_id[0] == '\0')
		rl_registry_owner_id(owner_id, sizeof(owner_id));
	return owner_id;
}

/*
 * The Redis keys of a lock besides the hash itself, named as Redisson's
 * prefixName() does: a name that has a "{" already carries its hash tag.
 * Built by copying, as they are needed on every call.
 */
char *
rl_prefixed_key(const char *prefix, const char *name)
{
	size_t		plen = strlen(prefix);
	size_t		nlen = strlen(name);
	bool		tagged = strchr(name, '{') != NULL;
	char	   *key = palloc(plen + nlen + 4);
	char	   *p = key;

	memcpy(p, prefix, plen);
	p += plen;
	*p++ = ':';
	if (!tagged)
		*p++ = '{';
	memcpy(p, name, nlen);
	p += nlen;
	if (!tagged)
		*p++ = '}';
	*p = '\0';
	return key;
}

/*
 * Redisson's suffixName(name, suffix): derived keys share the name's hash
 * slot, through the name's own hash tag if it has one.
 */
char *
rl_suffixed_key(const char *name, const char *suffix)
{
	if (strchr(name, '{') != NULL)
		return psprintf("%s:%s", name, suffix);
	return psprintf("{%s}:%s", name, suffix);
}

/*
 * The release mark of an owner (Redlock): written by its release, checked
 * before a hold is put back on a master that lost it.
 */
char *
rl_released_key(const char *name, const char *owner)
{
	return psprintf("%s:%s", rl_prefixed_key("redislock_released", name), owner);
}

/* The fencing counter of a lock of the Redisson layout. */
char *
rl_lock_token_key(const char *name)
{
	return token_key(name);
}

/*
 * Hashes the part of a key in use: the whole zero-padded key is over 500
 * bytes, and hashing it all was a third of the instructions of an
 * acquire + release pair.
 */
static uint32
local_key_hash(const void *key, Size keysize)
{
	const LocalLock *k = key;
	uint32		h = hash_bytes((const unsigned char *) k->name, strlen(k->name));

	h = hash_combine(h, k->kind);
	if (k->id[0] != '\0')
		h = hash_combine(h, hash_bytes((const unsigned char *) k->id, strlen(k->id)));
	return h;
}

/*
 * At load (_PG_init): the table exists before any call or callback can look
 * at it, whichever primitive the session uses first.
 */
void
rl_holds_init(void)
{
	HASHCTL		ctl;

	Assert(rl_local_locks == NULL);
	ctl.keysize = offsetof(LocalLock, id) + sizeof(((LocalLock *) NULL)->id);
	ctl.entrysize = sizeof(LocalLock);
	ctl.hash = local_key_hash;
	rl_local_locks = hash_create("redislock held locks", 16, &ctl,
								 HASH_ELEM | HASH_FUNCTION);
}

/* The hash key of a hold: its name, zero-padded, its kind and id. */
static void
local_key(LocalLock *key, const char *name, RLKind kind, const char *id)
{
	memset(key->name, 0, sizeof(key->name));
	strlcpy(key->name, name, sizeof(key->name));
	key->kind = (uint8) kind;
	memset(key->id, 0, sizeof(key->id));
	if (id != NULL)
		strlcpy(key->id, id, sizeof(key->id));
}

LocalLock *
rl_local_find_id(const char *name, RLKind kind, const char *id)
{
	LocalLock	key;

	local_key(&key, name, kind, id);
	return hash_search(rl_local_locks, &key, HASH_FIND, NULL);
}

LocalLock *
rl_local_find(const char *name, RLKind kind)
{
	return rl_local_find_id(name, kind, NULL);
}

/*
 * Whose hold it is in Redis: the session's owner id, or for an expiring
 * permit the permit's own id (Redisson keeps no owner for those).
 */
const char *
rl_hold_owner(const LocalLock *ll)
{
	return ll->id[0] != '\0' ? ll->id : rl_owner_id();
}

/* The behaviour of a kind of hold. */
const RLPrimitive *
rl_primitive(RLKind kind)
{
	switch (kind)
	{
		case RL_KIND_READ:
			return &rl_read_primitive;
		case RL_KIND_WRITE:
			return &rl_write_primitive;
		case RL_KIND_SEMAPHORE:
			return &rl_semaphore_primitive;
		case RL_KIND_PERMIT:
			return &rl_permit_primitive;
		case RL_KIND_LATCH:
			return &rl_latch_primitive;
		case RL_KIND_PLAIN:
			return &rl_plain_primitive;
		case RL_KIND_LOCK:
			break;
	}
	return &rl_lock_primitive;
}

/* A trim of owner's holds of one kind to keep (see the primitives). */
void
rl_release_eval(RLEval *e, RLKind kind, const char *name, const char *owner,
				int32 keep, bool leave, int64 mark_ms)
{
	rl_primitive(kind)->release(e, name, owner, keep, leave, mark_ms);
}

/* The watchdog's renewal of one hold (see the primitives). */
void
rl_renew_eval(RLEval *e, RLKind kind, const char *name, const char *owner,
			  int64 lease_ms, int32 holds, bool restore)
{
	rl_primitive(kind)->renew(e, name, owner, lease_ms, holds, restore);
}

/* For messages about a hold of that kind: "Redis lock", "Redis semaphore". */
const char *
rl_kind_noun(uint8 kind)
{
	return rl_primitive((RLKind) kind)->noun;
}

/* See RLPrimitive.outlives_lease. */
bool
rl_kind_outlives_lease(uint8 kind)
{
	return rl_primitive((RLKind) kind)->outlives_lease;
}

/*
 * One name is either an exclusive lock or a read-write lock in Redis (the
 * layouts differ): a session that holds it as one cannot take it as the
 * other.
 */
static void
check_layout(const char *name, RLKind kind)
{
	bool		rw = kind != RL_KIND_LOCK;
	LocalLock  *other;

	/* a semaphore's key is a string: Redis itself refuses the wrong type */
	if (kind == RL_KIND_SEMAPHORE || kind == RL_KIND_PERMIT)
		return;
	other = rw ? rl_local_find(name, RL_KIND_LOCK) :
		rl_local_find(name, RL_KIND_READ);
	if (other == NULL && !rw)
		other = rl_local_find(name, RL_KIND_WRITE);
	if (other != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this session uses \"%s\" as a %s", name,
						rw ? "Redis lock" : "Redis read-write lock"),
				 errdetail("A name is either an exclusive lock or a read-write lock in Redis, not both."),
				 errhint("Release it first, or use another name.")));
}

/*
 * Finds or creates the entry of a lock. A new entry gets its shared slot
 * first, so that a full table fails before anything reaches Redis; one
 * session may only have so many, so that it cannot take the whole table.
 * The slot knows the lease asked for, in case the outcome is never learnt.
 */
LocalLock *
rl_local_get(const char *name, RLKind kind, const char *id, int64 lease_ms)
{
	LocalLock  *ll = rl_local_find_id(name, kind, id);
	LocalLock	key;
	uint32		generation = 0;
	int			slot;

	if (ll != NULL)
		return ll;
	check_layout(name, kind);
	if (hash_get_num_entries(rl_local_locks) >= rl_max_locks_per_session)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many Redis locks in this session"),
				 errdetail("This session already holds or waits for %ld distinct Redis locks; redislock.max_locks_per_session is %d.",
						   hash_get_num_entries(rl_local_locks), rl_max_locks_per_session),
				 errhint("Release some with redis_lock_release() or redis_lock_release_all(), or ask a superuser to raise redislock.max_locks_per_session.")));
	slot = rl_registry_reserve(kind, name, id != NULL ? id : rl_owner_id(),
							   lease_ms, &generation);
	local_key(&key, name, kind, id);
	ll = hash_search(rl_local_locks, &key, HASH_ENTER, NULL);
	ll->session_holds = 0;
	ll->xact_holds = 0;
	ll->redis_holds = 0;
	ll->dirty = false;
	ll->queued = false;
	ll->releasing = false;
	ll->unsettled = false;
	ll->epoch = 0;
	ll->watchdog = false;
	ll->fair = false;
	ll->lease_ms = 0;
	ll->token = 0;
	ll->acquired_at = 0;
	ll->slot = slot;
	ll->generation = generation;
	return ll;
}

void
rl_forget_if_unused(LocalLock *ll)
{
	if (total_holds(ll) == 0 && !ll->dirty && !ll->queued)
	{
		rl_registry_free(ll->slot, ll->generation);
		hash_search(rl_local_locks, ll, HASH_REMOVE, NULL);
	}
}

/*
 * After a release: an entry left with nothing to hold or settle goes (its
 * slot freed at once, one trip through the registry's lock instead of two);
 * one still held shows what remains.
 */
void
rl_publish_or_forget(LocalLock *ll)
{
	if (total_holds(ll) == 0 && !ll->dirty && !ll->queued)
		rl_forget_if_unused(ll);
	else
		rl_publish(ll, false, 0);
}

/*
 * Shows the worker and the redis_locks view what we now hold of ll; renewed:
 * when the request that just gave Redis the full lease was sent, or 0.
 */
void
rl_publish(LocalLock *ll, bool fresh, TimestampTz renewed)
{
	RLSlotInfo	info;

	if (ll->slot < 0)
		return;
	info.session_holds = ll->session_holds;
	info.xact_holds = ll->xact_holds;
	info.fair = ll->fair;
	info.watchdog = ll->watchdog;
	info.lease_ms = ll->lease_ms;
	info.token = ll->token;
	info.acquired_at = ll->acquired_at;
	info.fresh = fresh;
	info.renewed_at = renewed;
	info.masters = (int16) ll->masters;
	ll->epoch = rl_registry_publish(ll->slot, ll->generation, &info);
}

/* Sets ll's flags, keeping count of entries that need settling. */
void
rl_set_flags(LocalLock *ll, bool dirty, bool queued)
{
	npending += (int) (dirty || queued) - (int) (ll->dirty || ll->queued);
	ll->dirty = dirty;
	ll->queued = queued;
}

void
rl_mark_dirty(LocalLock *ll)
{
	rl_set_flags(ll, true, ll->queued);
}

char *
rl_int64_arg(int64 v)
{
	char	   *buf = palloc(MAXINT8LEN + 1);

	pg_lltoa(v, buf);
	return buf;
}


/*
 * The record of one call that must not be applied twice (a latch's
 * count-down, a pool's addition), in the name's hash slot: the script
 * stores its outcome there, so a request that the connection layer sends
 * again after a lost reply is answered from it. It must outlive every
 * resend of the request, all made before the call's own deadline.
 */
char *
rl_call_key(const char *name)
{
	return rl_suffixed_key(name, psprintf("redislock_call:%s", rl_random_id()));
}

/* 16 random bytes as 32 hex digits: a permit id (as Redisson's), a call id. */
char *
rl_random_id(void)
{
	uint8		raw[RL_PERMIT_ID_BYTES];
	char	   *hex = palloc(RL_PERMIT_ID_HEX + 1);

	if (!pg_strong_random(raw, sizeof(raw)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random id")));
	hex[hex_encode((char *) raw, sizeof(raw), hex)] = '\0';
	return hex;
}

char *
rl_call_ttl_arg(void)
{
	return rl_int64_arg(2 * ((int64) rl_connect_timeout + rl_command_timeout) + 1000);
}

/* The epoch ms now, by this server's clock, as Redisson's scripts take it. */
int64
rl_now_ms(void)
{
	return GetCurrentTimestamp() / 1000 +
		(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * INT64CONST(86400000);
}

char *
rl_now_ms_arg(void)
{
	return rl_int64_arg(rl_now_ms());
}

/* The commit guard's check of a hold that is a field of a hash. */
void
rl_verify_hexists(RLCommand *cmd, const char *key, const char *field)
{
	cmd->argc = 3;
	cmd->argv[0] = "HEXISTS";
	cmd->argvlen[0] = 7;
	cmd->argv[1] = key;
	cmd->argvlen[1] = strlen(key);
	cmd->argv[2] = field;
	cmd->argvlen[2] = strlen(field);
}

bool
rl_verified_int(const RLReply *r)
{
	return is_int(r) && r->integer == 1;
}

/* A reply that is not what our script returns: not a Redis we understand. */
void
rl_expect_reply(bool ok, RLOp op, const char *name)
{
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 rl_op_errmsg(op, name),
				 errdetail_internal("Redis server \"%s\" gave a reply redislock's script does not give.",
									rl_server_desc())));
}

/* Are entries dirty or queued, so that Redis may need settling? */
bool
rl_holds_pending(void)
{
	return npending > 0;
}
