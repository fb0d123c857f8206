// Module entry: the magic block and the settings defined at load.
#include "gucs.hpp"
#include "postgres.hpp"

extern "C" {
PG_MODULE_MAGIC;

void _PG_init(void) { pg_inbox::define_gucs(); }
}
