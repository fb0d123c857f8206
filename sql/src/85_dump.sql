-- pg_dump dumps the rows of an extension's tables only when they are marked:
-- without this a dump and restore would keep the schema and lose every event.
-- Identity sequences too, or restored tables would hand out used ids again.
DO $$
DECLARE
    member regclass;
BEGIN
    FOR member IN
        SELECT c.oid::regclass FROM pg_catalog.pg_class c
         WHERE c.relnamespace = 'inbox'::regnamespace AND c.relkind IN ('r', 'S')
         ORDER BY c.relkind, c.relname
    LOOP
        PERFORM pg_catalog.pg_extension_config_dump(member, '');
    END LOOP;
END
$$;
