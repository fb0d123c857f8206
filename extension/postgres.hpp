// The one place C++ files include PostgreSQL headers: inside extern "C",
// postgres.h first. Pure C++ files must not include this.
#pragma once

extern "C" {
#include "postgres.h"

#include "access/detoast.h"
#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"
}

// port.h maps these to pg_* variants; C++ code below wants the standard ones.
#undef snprintf
#undef vsnprintf
