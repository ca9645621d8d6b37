-- Transaction scope against session scope.

-- An xact lock ends at COMMIT ...
BEGIN;
SELECT redis_xact_lock_acquire('scope:x');
SELECT redis_xact_lock_acquire('scope:x');
SELECT hold_count FROM redis_lock_status('scope:x');
SELECT redis_lock_fencing_token('scope:x') IS NOT NULL AS has_token;
-- ... it cannot be released by hand
SELECT rl_try($$SELECT redis_lock_release('scope:x')::text$$);
COMMIT;
SELECT locked FROM redis_lock_status('scope:x');

-- ... and at ROLLBACK
BEGIN;
SELECT redis_xact_lock_acquire('scope:x');
ROLLBACK;
SELECT locked FROM redis_lock_status('scope:x');

-- ... and at the end of a statement outside a transaction block
SELECT redis_xact_lock_acquire('scope:x');
SELECT locked FROM redis_lock_status('scope:x');

-- A session lock survives ROLLBACK, as advisory locks do.
BEGIN;
SELECT redis_lock_acquire('scope:s');
ROLLBACK;
SELECT locked, held_by_me FROM redis_lock_status('scope:s');
SELECT redis_lock_release('scope:s');

-- Both scopes on one name stack; each ends on its own terms.
SELECT redis_lock_acquire('scope:m');
BEGIN;
SELECT redis_xact_lock_acquire('scope:m');
SELECT hold_count FROM redis_lock_status('scope:m');
SELECT redis_lock_release('scope:m');
SELECT hold_count FROM redis_lock_status('scope:m');
COMMIT;
SELECT locked FROM redis_lock_status('scope:m');

BEGIN;
SELECT redis_lock_acquire('scope:m2');
SELECT redis_xact_lock_acquire('scope:m2');
COMMIT;
SELECT hold_count FROM redis_lock_status('scope:m2');
SELECT redis_lock_release('scope:m2');

-- A subtransaction that rolls back gives back the xact locks it took.
BEGIN;
SELECT redis_xact_lock_acquire('scope:outer');
SAVEPOINT sp;
SELECT redis_xact_lock_acquire('scope:inner');
SELECT redis_xact_lock_acquire('scope:outer');
ROLLBACK TO sp;
SELECT locked FROM redis_lock_status('scope:inner');
SELECT hold_count FROM redis_lock_status('scope:outer');
SAVEPOINT sp2;
SELECT redis_xact_lock_acquire('scope:kept');
RELEASE sp2;
SELECT locked FROM redis_lock_status('scope:kept');
COMMIT;
SELECT locked FROM redis_lock_status('scope:kept');
SELECT locked FROM redis_lock_status('scope:outer');

-- PL/pgSQL exception blocks are subtransactions too.
DO $$
BEGIN
    BEGIN
        PERFORM redis_xact_lock_acquire('scope:plpgsql');
        RAISE EXCEPTION 'boom';
    EXCEPTION WHEN others THEN
        NULL;
    END;
    RAISE NOTICE 'after the exception block: locked = %',
        (redis_lock_status('scope:plpgsql')).locked;
END $$;

-- A transaction holding xact locks cannot be prepared.
BEGIN;
SELECT redis_xact_lock_acquire('scope:p');
PREPARE TRANSACTION 'p1';
SELECT locked FROM redis_lock_status('scope:p');

-- A stored procedure that commits as it goes keeps its session lock.
CREATE PROCEDURE scope_job() LANGUAGE plpgsql AS $$
BEGIN
    PERFORM redis_lock_acquire('scope:job');
    COMMIT;
    RAISE NOTICE 'after COMMIT in the job: held = %',
        (redis_lock_status('scope:job')).held_by_me;
    PERFORM redis_lock_release('scope:job');
END $$;
CALL scope_job();
SELECT locked FROM redis_lock_status('scope:job');
