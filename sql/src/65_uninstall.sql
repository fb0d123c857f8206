-- DROP EXTENSION pg_inbox removes the pg_cron jobs it scheduled (see
-- extension/drop_guard.cpp): an event trigger at ddl_command_start, while
-- inbox.unschedule() still exists. A drop that fails keeps the jobs.
CREATE FUNCTION inbox._unschedule_on_drop()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'inbox_unschedule_on_drop'
LANGUAGE C SET search_path = pg_catalog, pg_temp;

CREATE EVENT TRIGGER pg_inbox_unschedule_on_drop ON ddl_command_start
  WHEN TAG IN ('DROP EXTENSION', 'DROP SCHEMA')
  EXECUTE FUNCTION inbox._unschedule_on_drop();
