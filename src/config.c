/*
 * config.c
 *	  Where Redis is, from the settings: redislock.url parsed, the node
 *	  lists of Sentinel, cluster and Redlock, and the mode they select.
 *
 * src/config.c
 */
#include "postgres.h"

#include "common/hashfn.h"

#include "conn_int.h"
#include "redislock.h"
#include "secrets.h"

RLServer	rl_server;
RLNode		rl_sentinel_nodes[RL_MAX_NODES];
int			rl_nsentinels = 0;
int			rl_sentinel_first = 0;	/* the one that answered last */
bool		rl_server_ok = false;
char		rl_server_problem[256];
/* what to do about rl_server_problem */
const char *rl_server_hint;

static RLMode server_mode = RL_MODE_SINGLE;
static RLNode mode_nodes[RL_MAX_NODES];	/* cluster seeds or Redlock masters */
static int	nmode_nodes = 0;
static uint64 server_generation = 0;

static int
hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Copies a %-encoded URL part of length len into dst. */
static bool
copy_decoded(char *dst, size_t dstsize, const char *src, size_t len)
{
	size_t		o = 0;

	for (size_t i = 0; i < len; i++)
	{
		char		ch = src[i];

		if (ch == '%')
		{
			int			hi,
						lo;

			if (i + 2 >= len)
				return false;
			hi = hexval(src[i + 1]);
			lo = hexval(src[i + 2]);
			if (hi < 0 || lo < 0)
				return false;
			ch = (char) (hi * 16 + lo);
			i += 2;
		}
		if (o + 1 >= dstsize)
			return false;
		dst[o++] = ch;
	}
	dst[o] = '\0';
	return true;
}

static bool
parse_db(const char *s, int *db)
{
	char	   *end;
	long		v;

	if (*s == '\0')
		return true;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < 0 || v > 100000)
		return false;
	*db = (int) v;
	return true;
}

/*
 * Parses redis://[user[:password]@]host[:port][/db] (rediss:// for TLS)
 * or unix:///path[?db=N]. On failure *problem says why (never echoing secrets).
 */
static bool
parse_url(const char *url, RLServer *out, const char **problem)
{
	const char *p;
	const char *at;
	const char *hostend;
	const char *slash;

	memset(out, 0, sizeof(*out));
	out->port = 6379;

	if (strncmp(url, "unix://", 7) == 0)
	{
		const char *q = strchr(url + 7, '?');
		size_t		len = q ? (size_t) (q - (url + 7)) : strlen(url + 7);

		if (len == 0 || url[7] != '/' || len >= sizeof(out->unix_path))
		{
			*problem = "a unix URL needs an absolute socket path: unix:///path/to/redis.sock";
			return false;
		}
		memcpy(out->unix_path, url + 7, len);
		out->unix_path[len] = '\0';
		if (q && (strncmp(q, "?db=", 4) != 0 || !parse_db(q + 4, &out->db)))
		{
			*problem = "the only unix URL option is ?db=N";
			return false;
		}
		snprintf(out->desc, sizeof(out->desc), "unix:%s", out->unix_path);
		return true;
	}
	if (strncmp(url, "rediss://", 9) == 0)
	{
		out->tls = true;
		p = url + 9;
	}
	else if (strncmp(url, "redis://", 8) == 0)
		p = url + 8;
	else
	{
		*problem = "the URL must start with redis://, rediss:// or unix://";
		return false;
	}
	slash = strchr(p, '/');
	at = strrchr(p, '@');
	if (at && slash && at > slash)
		at = NULL;
	if (at)
	{
		const char *colon = memchr(p, ':', at - p);

		if (colon)
		{
			if (!copy_decoded(out->user, sizeof(out->user), p, colon - p) ||
				!copy_decoded(out->password, sizeof(out->password),
							  colon + 1, at - colon - 1))
			{
				*problem = "the user or password part of the URL is malformed";
				return false;
			}
		}
		else if (!copy_decoded(out->user, sizeof(out->user), p, at - p))
		{
			*problem = "the user part of the URL is malformed";
			return false;
		}
		p = at + 1;
	}
	if (*p == '[')
	{
		const char *close = strchr(p, ']');

		if (!close || (size_t) (close - p - 1) >= sizeof(out->host))
		{
			*problem = "an IPv6 host must be written as [address]";
			return false;
		}
		memcpy(out->host, p + 1, close - p - 1);
		hostend = close + 1;
	}
	else
	{
		hostend = p + strcspn(p, ":/");
		if ((size_t) (hostend - p) >= sizeof(out->host))
		{
			*problem = "the host name is too long";
			return false;
		}
		memcpy(out->host, p, hostend - p);
	}
	if (out->host[0] == '\0')
	{
		*problem = "the URL names no host";
		return false;
	}
	p = hostend;
	if (*p == ':')
	{
		char	   *end;
		long		port = strtol(p + 1, &end, 10);

		if (end == p + 1 || port < 1 || port > 65535 || (*end != '\0' && *end != '/'))
		{
			*problem = "the port must be a number from 1 to 65535";
			return false;
		}
		out->port = (int) port;
		p = end;
	}
	if (*p == '/' && !parse_db(p + 1, &out->db))
	{
		*problem = "the database after the host must be a number";
		return false;
	}
	if (*p != '\0' && *p != '/')
	{
		*problem = "unexpected text after the host";
		return false;
	}
	snprintf(out->desc, sizeof(out->desc), "%s:%d", out->host, out->port);
	return true;
}

/* GUC check hook support: is this a URL we can use? */
bool
rl_check_url(const char *url, char **detail)
{
	RLServer	tmp;
	const char *problem = NULL;

	if (url == NULL || url[0] == '\0')
		return true;
	if (parse_url(url, &tmp, &problem))
		return true;
	*detail = (char *) problem;
	return false;
}

/*
 * Parses "host:port[,host:port...]" (IPv6 hosts in brackets) into nodes.
 * Returns the count, or -1 with *problem set.
 */
static int
parse_node_list(const char *list, RLNode *nodes, int max, const char **problem)
{
	int			n = 0;
	const char *p = list;

	while (*p != '\0')
	{
		const char *end;
		const char *colon;
		const char *host = p;
		size_t		hostlen;
		char	   *portend;
		long		port;

		while (*host == ' ')
			host++;
		end = host + strcspn(host, ",");
		colon = end;
		while (colon > host && colon[-1] != ':')
			colon--;
		if (colon == host)
		{
			*problem = "each entry must be host:port";
			return -1;
		}
		port = strtol(colon, &portend, 10);
		while (*portend == ' ')
			portend++;
		hostlen = colon - 1 - host;
		if (hostlen >= 2 && host[0] == '[' && host[hostlen - 1] == ']')
		{
			host++;
			hostlen -= 2;
		}
		if (portend != end || port < 1 || port > 65535 || hostlen == 0 ||
			hostlen >= sizeof(nodes[0].host))
		{
			*problem = "each entry must be host:port with a port from 1 to 65535";
			return -1;
		}
		if (n == max)
		{
			*problem = "too many entries";
			return -1;
		}
		memcpy(nodes[n].host, host, hostlen);
		nodes[n].host[hostlen] = '\0';
		nodes[n].port = (int) port;
		snprintf(nodes[n].desc, sizeof(nodes[n].desc), "%s:%d",
				 nodes[n].host, nodes[n].port);
		n++;
		p = *end == ',' ? end + 1 : end;
	}
	return n;
}

/* GUC check hook support: is this a usable host:port list? */
bool
rl_check_nodes(const char *list, char **detail)
{
	RLNode		tmp[RL_MAX_NODES];
	const char *problem = NULL;

	if (list == NULL || parse_node_list(list, tmp, RL_MAX_NODES, &problem) >= 0)
		return true;
	*detail = (char *) problem;
	return false;
}

/* Parses a node list setting into nodes; false with rl_server_problem set. */
static bool
load_nodes(const char *setting, const char *list, RLNode *nodes, int *n)
{
	const char *problem = NULL;

	*n = parse_node_list(list, nodes, RL_MAX_NODES, &problem);
	if (*n >= 0)
		return true;
	*n = 0;
	snprintf(rl_server_problem, sizeof(rl_server_problem), "%s is invalid: %s",
			 setting, problem);
	rl_server_hint = "Give host:port pairs separated by commas, e.g. '10.0.0.5:6379,10.0.0.6:6379'.";
	return false;
}

/*
 * Re-reads the settings if they changed since we last looked. At most one
 * of sentinels, cluster_nodes and redlock_nodes may be set; it selects the
 * mode. Behind sentinels redislock.url gives only the credentials and the
 * database; for a cluster or Redlock it may be left unset.
 */
void
rl_load_server(void)
{
	const char *problem = NULL;
	bool		have_sentinels = rl_sentinels && rl_sentinels[0] != '\0';
	bool		have_cluster = rl_cluster_nodes && rl_cluster_nodes[0] != '\0';
	bool		have_redlock = rl_redlock_nodes && rl_redlock_nodes[0] != '\0';

	if (server_generation == rl_settings_generation)
		return;
	server_generation = rl_settings_generation;
	rl_server_ok = false;
	rl_nsentinels = 0;
	nmode_nodes = 0;
	rl_server_hint = NULL;
	server_mode = have_sentinels ? RL_MODE_SENTINEL :
		have_cluster ? RL_MODE_CLUSTER :
		have_redlock ? RL_MODE_REDLOCK : RL_MODE_SINGLE;
	if ((int) have_sentinels + (int) have_cluster + (int) have_redlock > 1)
	{
		strlcpy(rl_server_problem,
				"only one of redislock.sentinels, redislock.cluster_nodes and redislock.redlock_nodes may be set",
				sizeof(rl_server_problem));
		rl_server_hint = "Set the one that describes the deployment and leave the others empty.";
		return;
	}
	memset(&rl_server, 0, sizeof(rl_server));
	if (rl_url != NULL && rl_url[0] != '\0')
	{
		if (!parse_url(rl_url, &rl_server, &problem))
		{
			snprintf(rl_server_problem, sizeof(rl_server_problem),
					 "redislock.url is invalid: %s", problem);
			rl_server_hint = "Give a URL such as 'redis://user:password@host:6379/0', 'rediss://host:6380' or 'unix:///path/to/redis.sock'.";
			return;
		}
	}
	else if (server_mode == RL_MODE_SINGLE || server_mode == RL_MODE_SENTINEL)
	{
		strlcpy(rl_server_problem, "redislock.url is not set", sizeof(rl_server_problem));
		rl_server_hint = "Set redislock.url, e.g. 'redis://127.0.0.1:6379', in postgresql.conf.";
		return;
	}
	if (rl_password && rl_password[0] != '\0')
		strlcpy(rl_server.password, rl_password, sizeof(rl_server.password));
	else if (rl_password_file && rl_password_file[0] != '\0' &&
			 !rl_read_password_file(rl_server.password, sizeof(rl_server.password),
									rl_server_problem, sizeof(rl_server_problem),
									&rl_server_hint))
	{
		/* read it again on next use: the file may get fixed */
		server_generation = 0;
		return;
	}
	switch (server_mode)
	{
		case RL_MODE_SINGLE:
			break;
		case RL_MODE_SENTINEL:
			if (!load_nodes("redislock.sentinels", rl_sentinels, rl_sentinel_nodes, &rl_nsentinels))
				return;
			rl_server.unix_path[0] = '\0';
			snprintf(rl_server.desc, sizeof(rl_server.desc), "master %s via sentinels",
					 rl_sentinel_master);
			break;
		case RL_MODE_CLUSTER:
			if (!load_nodes("redislock.cluster_nodes", rl_cluster_nodes,
							mode_nodes, &nmode_nodes))
				return;
			if (rl_server.db != 0)
			{
				strlcpy(rl_server_problem, "a Redis Cluster has only database 0",
						sizeof(rl_server_problem));
				rl_server_hint = "Leave the database out of redislock.url (or make it /0).";
				return;
			}
			strlcpy(rl_server.desc, "the Redis cluster", sizeof(rl_server.desc));
			break;
		case RL_MODE_REDLOCK:
			if (!load_nodes("redislock.redlock_nodes", rl_redlock_nodes,
							mode_nodes, &nmode_nodes))
				return;
			if (nmode_nodes < 3)
			{
				strlcpy(rl_server_problem,
						"redislock.redlock_nodes must name at least 3 independent masters",
						sizeof(rl_server_problem));
				rl_server_hint = "Name 3 or more (5 is usual) independent masters, or set redislock.url for a single server.";
				return;
			}
			snprintf(rl_server.desc, sizeof(rl_server.desc), "the %d Redlock masters",
					 nmode_nodes);
			break;
	}
	rl_sentinel_first = 0;
	rl_server_ok = true;
}

/*
 * The deployment the settings describe: mode and, for a cluster, its seed
 * nodes, for Redlock its masters. False with *problem when the settings
 * are unusable.
 */
bool
rl_config(RLMode *mode, const RLNode **nodes, int *nnodes, const char **problem)
{
	rl_load_server();
	*mode = server_mode;
	*nodes = mode_nodes;
	*nnodes = nmode_nodes;
	*problem = rl_server_problem;
	return rl_server_ok;
}

const char *
rl_server_desc(void)
{
	rl_load_server();
	return rl_server_ok ? rl_server.desc : "(unconfigured)";
}

/*
 * Which Redis the settings put locks on: a hash of the settings that say
 * where (not how to log in or speak TLS there). The worker renews leases
 * with the server's settings; a session whose own settings (SET, ALTER ROLE
 * ... SET) give another value keeps its locks where the worker does not look.
 */
uint32
rl_server_identity(void)
{
	static uint64 generation = 0;
	static uint32 identity = 0;

	if (generation != rl_settings_generation)
	{
		const char *const parts[] = {rl_url, rl_sentinels, rl_sentinel_master,
		rl_cluster_nodes, rl_redlock_nodes};

		identity = 0;
		for (int i = 0; i < (int) lengthof(parts); i++)
			identity = hash_combine(identity, parts[i] == NULL ? 0 :
									hash_bytes((const unsigned char *) parts[i],
											   strlen(parts[i])));
		generation = rl_settings_generation;
	}
	return identity;
}

/*
 * The database whose keyspace notifications tell of our keys: the URL's,
 * 0 on a cluster (which has no other).
 */
int
rl_keyspace_db(void)
{
	return rl_server.db;
}
