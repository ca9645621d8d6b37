-- Installation: objects, comments, privileges, settings visibility.
CREATE EXTENSION redislock;
CREATE EXTENSION dblink;

-- Runs a statement and reports its SQLSTATE and message instead of failing,
-- so the tests can show the exact error code of bad input.
CREATE FUNCTION rl_try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    EXECUTE q INTO r;
    RETURN 'ok: ' || coalesce(r, '<null>');
EXCEPTION WHEN others THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- Every function: its signature, labels and a comment.
SELECT p.oid::regprocedure AS function, p.proisstrict AS strict,
       p.provolatile AS volatility, p.proparallel AS parallel,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS commented
FROM pg_proc p
JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'redislock'
ORDER BY 1::text;

-- Who may run what: force_release is not for PUBLIC.
SELECT p.proname, has_function_privilege('public', p.oid, 'EXECUTE') AS public_can_execute
FROM pg_proc p
JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'redislock'
ORDER BY 1;

-- Settings: connection settings are superuser-only, the password is hidden.
SELECT name, context, setting IS NOT NULL AS has_value
FROM pg_settings WHERE name LIKE 'redislock.%' ORDER BY name;

CREATE ROLE rl_plain LOGIN;
SET ROLE rl_plain;
SELECT rl_try('SELECT redis_lock_force_release(''x'')::text');
SELECT rl_try('SET redislock.url = ''redis://10.0.0.1:6379''');
SELECT rl_try('SET redislock.watchdog_timeout = ''5s''');
SELECT count(*) AS visible_password_rows FROM pg_settings WHERE name = 'redislock.password';
-- an ordinary role can lock and release
SELECT redis_lock_acquire('setup:plain', '0');
SELECT redis_lock_release('setup:plain');
RESET ROLE;

-- Granting force_release to a role is how it is delegated.
GRANT EXECUTE ON FUNCTION redis_lock_force_release(text) TO rl_plain;
SET ROLE rl_plain;
SELECT redis_lock_force_release('setup:nothing');
RESET ROLE;
REVOKE EXECUTE ON FUNCTION redis_lock_force_release(text) FROM rl_plain;
DROP ROLE rl_plain;

-- Unknown settings under the reserved prefix are refused.
SET redislock.no_such_setting = 1;
