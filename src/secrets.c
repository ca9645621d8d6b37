/*
 * secrets.c
 *	  Keeps the Redis secrets (redislock.password,
 *	  redislock.sentinel_password, the password in redislock.url) from
 *	  everyone but superusers: the settings' show hooks, the redaction of
 *	  log and error messages, and the password file.
 *
 * src/secrets.c
 */
#include "postgres.h"

#include <ctype.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "tcop/tcopprot.h"

#include "redislock.h"
#include "secrets.h"

static emit_log_hook_type prev_emit_log_hook = NULL;

/* What a secret shows as to those who may not see it. */
#define RL_MASK "********"

/* ... and in log and error messages. */
#define RL_LOG_MASK "***"

/* Settings whose whole value is a secret. */
static const char *const secret_settings[] = {
	"redislock.password",
	"redislock.sentinel_password",
};

static bool
is_name_char(char c)
{
	return isalnum((unsigned char) c) || c == '_';
}

/* Does p start with word (in any case), as a whole word? */
static bool
word_at(const char *p, const char *word)
{
	size_t		len = strlen(word);

	return pg_strncasecmp(p, word, len) == 0 && !is_name_char(p[len]);
}

/* Case-insensitive strstr: SQL names are case-insensitive. */
static const char *
find_ci(const char *text, const char *needle)
{
	size_t		len = strlen(needle);

	for (const char *p = text; *p != '\0'; p++)
		if (pg_strncasecmp(p, needle, len) == 0)
			return p;
	return NULL;
}

/*
 * If p starts the name of a secret setting (as a whole word, in any case),
 * returns where the name ends.
 */
static const char *
secret_name_at(const char *start, const char *p)
{
	if (p > start && is_name_char(p[-1]))
		return NULL;
	for (size_t i = 0; i < lengthof(secret_settings); i++)
	{
		size_t		len = strlen(secret_settings[i]);

		if (pg_strncasecmp(p, secret_settings[i], len) == 0 &&
			!is_name_char(p[len]))
			return p + len;
	}
	return NULL;
}

static bool
mentions_secret(const char *text)
{
	if (text == NULL)
		return false;
	for (const char *p = text; *p != '\0'; p++)
		if (secret_name_at(text, p) != NULL)
			return true;
	return find_ci(text, "redislock.url") != NULL && strchr(text, '@') != NULL;
}

/*
 * Copies text, replacing the password of every "scheme://user:password@"
 * in it with mask. As when the URL is parsed, the password ends at the last
 * '@' before the path, so an unencoded '@' in it is masked too.
 */
static char *
mask_url_passwords(const char *text, const char *mask)
{
	StringInfoData out;
	const char *p = text;
	const char *scheme;

	initStringInfo(&out);
	while ((scheme = strstr(p, "://")) != NULL)
	{
		const char *auth = scheme + 3;
		const char *end = auth + strcspn(auth, "/\"'\r\n");
		const char *at = NULL;
		const char *colon;

		for (const char *q = auth; q < end; q++)
			if (*q == '@')
				at = q;
		colon = at ? memchr(auth, ':', at - auth) : NULL;
		if (colon == NULL)
		{
			appendBinaryStringInfo(&out, p, auth - p);
			p = auth;
			continue;
		}
		appendBinaryStringInfo(&out, p, colon + 1 - p);
		appendStringInfoString(&out, mask);
		p = at;
	}
	appendStringInfoString(&out, p);
	return out.data;
}

/*
 * Skips what separates a setting's name from its value in statements and
 * messages: a closing quote of the name, then "=", "TO", "," (set_config),
 * ":" or "changed to". Sets *separated when there was such a separator:
 * only then does a value follow ("SHOW name", "RESET name" have none).
 */
static const char *
skip_to_value(const char *p, bool *separated)
{
	*separated = false;
	if (*p == '"' || *p == '\'')
		p++;
	p += strspn(p, " \t\r\n");
	if (word_at(p, "changed"))
		p += strlen("changed") + strspn(p + strlen("changed"), " \t\r\n");
	if (word_at(p, "to"))
		p += strlen("to");
	else if (*p != '\0' && strchr("=,:", *p) != NULL)
		p++;
	else
		return p;
	*separated = true;
	return p + strspn(p, " \t\r\n");
}

/*
 * Where the value starting at p ends: a quoted string (backslashes taken as
 * escapes, which can only make the masked part longer) or a bare word.
 */
static const char *
value_end(const char *p)
{
	char		quote = *p;

	if (quote != '\'' && quote != '"')
		return p + strcspn(p, " \t\r\n;,)'\"");
	for (p++; *p != '\0'; p++)
	{
		if (*p == '\\' && p[1] != '\0')
			p++;
		else if (*p == quote && p[1] == quote)
			p++;
		else if (*p == quote)
			return p + 1;
	}
	return p;
}

/*
 * Appends the masked form of the value from v to end: quotes, and the E of
 * an escape string, stay, the rest becomes the mask.
 */
static void
append_masked_value(StringInfo out, const char *v, const char *end)
{
	if ((*v == 'E' || *v == 'e') && v[1] == '\'')
		appendStringInfoChar(out, *v++);
	if (*v == '\'' || *v == '"')
	{
		appendStringInfoChar(out, *v);
		appendStringInfoString(out, RL_LOG_MASK);
		if (end - v > 1 && end[-1] == *v)
			appendStringInfoChar(out, *v);
		return;
	}
	appendStringInfoString(out, RL_LOG_MASK);
}

/*
 * Copies text with the value given to every secret setting and the
 * password of every URL masked; NULL when text mentions no redislock
 * setting.
 */
static char *
redact_text(const char *text)
{
	StringInfoData out;
	char	   *masked;
	const char *p;

	if (text == NULL || find_ci(text, "redislock.") == NULL)
		return NULL;
	masked = mask_url_passwords(text, RL_LOG_MASK);
	initStringInfo(&out);
	p = masked;
	while (*p != '\0')
	{
		const char *name_end = secret_name_at(masked, p);
		const char *value;
		const char *end;
		bool		separated;

		if (name_end == NULL)
		{
			appendStringInfoChar(&out, *p++);
			continue;
		}
		value = skip_to_value(name_end, &separated);
		appendBinaryStringInfo(&out, p, value - p);
		p = value;
		if (!separated)
			continue;
		end = value_end((*p == 'E' || *p == 'e') && p[1] == '\'' ? p + 1 : p);
		if (end > p)
			append_masked_value(&out, p, end);
		p = end;
	}
	pfree(masked);
	return out.data;
}

static void
redact_field(char **field)
{
	char	   *redacted = redact_text(*field);

	if (redacted != NULL)
		*field = redacted;
}

/*
 * PostgreSQL logs every changed setting on reload, value included, quotes
 * rejected values in errors, may log statements (log_statement) and shows
 * the statements of PL/pgSQL functions in CONTEXT lines. Hide the value of
 * the secret settings and the password inside any URL wherever a message
 * mentions redislock's settings, and leave out the statement text of
 * reports about statements that mention a secret.
 */
static void
redact_secrets(ErrorData *edata)
{
	redact_field(&edata->message);
	redact_field(&edata->detail);
	redact_field(&edata->detail_log);
	redact_field(&edata->hint);
	redact_field(&edata->context);
	redact_field(&edata->internalquery);
	if (mentions_secret(debug_query_string))
		edata->hide_stmt = true;
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/*
 * pg_read_all_settings (and so pg_monitor) may read GUC_SUPERUSER_ONLY
 * settings; their secrets stay for superusers alone. An unset secret shows
 * as empty, so that everyone can tell whether one is set.
 */
static const char *
show_secret(const char *value)
{
	if (value == NULL)
		return "";
	if (value[0] == '\0' || superuser())
		return value;
	return RL_MASK;
}

const char *
rl_show_password(void)
{
	return show_secret(rl_password);
}

const char *
rl_show_sentinel_password(void)
{
	return show_secret(rl_sentinel_password);
}

const char *
rl_show_url(void)
{
	if (rl_url == NULL)
		return "";
	if (superuser())
		return rl_url;
	return mask_url_passwords(rl_url, RL_MASK);
}

/*
 * Is the open password file one we may use? As with libpq's passfile, it
 * must be a regular file that no one but the server's user may read or
 * write. Else says why in problem, and what to do in *hint.
 */
static bool
password_file_usable(int fd, const char *path, char *problem, size_t problem_size,
					 const char **hint)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		snprintf(problem, problem_size, "could not stat redislock.password_file \"%s\": %s",
				 path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
	{
		snprintf(problem, problem_size, "redislock.password_file \"%s\" is not a regular file",
				 path);
		*hint = "Name a regular file (a symbolic link to one will do) whose first line is the password.";
	}
	else if (st.st_uid != geteuid())
	{
		snprintf(problem, problem_size,
				 "redislock.password_file \"%s\" must be owned by the user the server runs as",
				 path);
		*hint = "Give the file to the server's operating system user (chown).";
	}
	else if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
	{
		snprintf(problem, problem_size,
				 "redislock.password_file \"%s\" has group or world access; permissions should be u=rw (0600) or less",
				 path);
		*hint = "Take the group's and others' access away: chmod 0600 on the file.";
	}
	else
		return true;
	return false;
}

/* Reads the file's first line, without its line end, into buf. */
static bool
read_first_line(int fd, const char *path, char *buf, size_t size,
				char *problem, size_t problem_size, const char **hint)
{
	ssize_t		n;
	size_t		len = 0;

	do
		n = read(fd, buf, size);
	while (n < 0 && errno == EINTR);
	if (n < 0)
	{
		snprintf(problem, problem_size, "could not read redislock.password_file \"%s\": %s",
				 path, strerror(errno));
		return false;
	}
	while (len < (size_t) n && buf[len] != '\n' && buf[len] != '\r')
		len++;
	if (len == size)
	{
		snprintf(problem, problem_size,
				 "the first line of redislock.password_file \"%s\" is longer than %zu bytes",
				 path, size - 1);
		*hint = "Give the Redis user a shorter password.";
	}
	else if (len == 0)
	{
		snprintf(problem, problem_size,
				 "the first line of redislock.password_file \"%s\" is empty", path);
		*hint = "Write the password on the file's first line.";
	}
	else
	{
		buf[len] = '\0';
		return true;
	}
	return false;
}

/*
 * Reads the Redis password from redislock.password_file: its first line.
 * Never throws, for connections are also set up where an error must not
 * escape; on failure fills problem (never with the file's contents) and
 * *hint (what to do about it, or NULL) and leaves buf empty.
 */
bool
rl_read_password_file(char *buf, size_t size, char *problem, size_t problem_size,
					  const char **hint)
{
	const char *path = rl_password_file;
	int			fd;
	bool		ok;

	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
	{
		snprintf(problem, problem_size, "could not open redislock.password_file \"%s\": %s",
				 path, strerror(errno));
		*hint = "Create the file, readable by the server's user only, or set redislock.password_file to the one that exists.";
		buf[0] = '\0';
		return false;
	}
	*hint = NULL;
	ok = password_file_usable(fd, path, problem, problem_size, hint) &&
		read_first_line(fd, path, buf, size, problem, problem_size, hint);
	close(fd);
	if (!ok)
		memset(buf, 0, size);
	return ok;
}

void
rl_secrets_init(void)
{
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = redact_secrets;
}
