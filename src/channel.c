/*
 * channel.c
 *	  The kinds of pub/sub channel a waiter hears, read from their names:
 *	  redislock's and Redisson's own unlock channels, a key's keyspace
 *	  notifications, and another client's unlock channel (Spring
 *	  Integration's). On a cluster each is heard in its own way; route.c
 *	  picks the node.
 *
 * src/channel.c
 */
#include "postgres.h"

#include "channel.h"

/*
 * The lock name in Spring Integration's unlock channel
 * "<registry>-channel:<registry>:<key>" (see plain.c), or NULL if channel
 * is not one.
 */
static const char *
spring_channel_name(const char *channel)
{
	const char *sep = strstr(channel, "-channel:");
	size_t		reg;

	if (sep == NULL || sep == channel)
		return NULL;
	reg = sep - channel;
	sep += 9;
	if (strncmp(sep, channel, reg) != 0 || sep[reg] != ':')
		return NULL;
	return sep;
}

/*
 * Where channel is heard on a cluster: *key gets what routes it and
 * *sharded whether it is a sharded subscription. redislock's own channels
 * are sharded as own_sharded says (redislock.cluster_pubsub). Keyspace
 * notifications ("__keyspace@<db>__:<key>") are published by the node of
 * the key alone, never sharded. Spring's unlock channel is published
 * classically, which a cluster broadcasts: heard on any node, it goes with
 * the lock's name, to share a subscription with the name's keyspace
 * channel.
 */
void
rl_channel_route(const char *channel, bool own_sharded, const char **key,
				 bool *sharded)
{
	const char *sep = strstr(channel, "__:");
	const char *spring;

	*key = channel;
	*sharded = own_sharded;
	if (strncmp(channel, "__keyspace@", 11) == 0 && sep != NULL)
	{
		*key = sep + 3;
		*sharded = false;
	}
	else if ((spring = spring_channel_name(channel)) != NULL)
	{
		*key = spring;
		*sharded = false;
	}
}
