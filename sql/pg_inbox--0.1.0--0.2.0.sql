-- pg_inbox 0.1.0 -> 0.2.0. Run by ALTER EXTENSION pg_inbox UPDATE.
--
-- One script per release, appended to by every change in the release: each
-- change to an object in sql/src/ is repeated here, in a block headed by the
-- issue it belongs to, so that an upgraded database ends up identical to a
-- fresh 0.2.0 install (test/upgrade/upgrade.t proves it in `make test`).
\echo Use "ALTER EXTENSION pg_inbox UPDATE TO '0.2.0'" to load this file. \quit

-- Issue 7: DROP EXTENSION removes the pg_cron jobs (sql/src/65_uninstall.sql).
CREATE FUNCTION inbox._unschedule_on_drop()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'inbox_unschedule_on_drop'
LANGUAGE C SET search_path = pg_catalog, pg_temp;

CREATE EVENT TRIGGER pg_inbox_unschedule_on_drop ON ddl_command_start
  WHEN TAG IN ('DROP EXTENSION', 'DROP SCHEMA')
  EXECUTE FUNCTION inbox._unschedule_on_drop();
REVOKE ALL ON FUNCTION inbox._unschedule_on_drop() FROM PUBLIC;
