-- Errors worded by PostgreSQL, not by redislock, whose wording changed
-- between majors: expected/pgwording.out holds 15's, pgwording_2.out 16's
-- (the newer permission message, 15's ranges), pgwording_1.out that of 17 and
-- later (pg_regress accepts any).  The meaning is the same in all: 42501
-- and the value not shown, 22023 for a value out of range.

-- connection settings are superuser-only: not even shown to others
SET redislock.password = 'wording-secret';
CREATE ROLE rl_wording LOGIN;
SET ROLE rl_wording;
SELECT rl_try('SHOW redislock.url');
SELECT rl_try('SHOW redislock.password');
RESET ROLE;
DROP ROLE rl_wording;
RESET redislock.password;

-- a time setting out of its range
SELECT rl_try($$SET redislock.watchdog_timeout = '10ms'$$);
SELECT rl_try('SET redislock.deadlock_timeout = -2');
