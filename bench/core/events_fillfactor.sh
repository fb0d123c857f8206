# Sourced by drain_versions.sh and fillfactor.sh: inbox.events' fillfactor as
# installed (100 when unset), which both restore when they finish.
events_fillfactor() {
  psql -X -At -c "SELECT coalesce((SELECT option_value FROM pg_options_to_table(reloptions)
                                   WHERE option_name = 'fillfactor'), '100')
                    FROM pg_class WHERE oid = 'inbox.events'::regclass"
}
