/* SPDX-License-Identifier: MIT */
/* gpumem.h - umbrella header of the gpumem library: include this one.
 *
 * Every header here is the public API: its functions and data are what libgpumem.so
 * exports (the library is built with -fvisibility=hidden; each public header declares its
 * part between "#pragma GCC visibility push(default)" and "pop").  Everything else is
 * internal: the headers of src/, and include/gpumem/internal/ (what the CLI and the tests
 * share with the library; not installed, not exported). */
#ifndef GPUMEM_GPUMEM_H
#define GPUMEM_GPUMEM_H

#include "gpumem/account.h"
#include "gpumem/alloc.h"
#include "gpumem/analysis.h"
#include "gpumem/arena.h"
#include "gpumem/device.h"
#include "gpumem/env.h"
#include "gpumem/error.h"
#include "gpumem/estimate.h"
#include "gpumem/example.h"
#include "gpumem/json.h"
#include "gpumem/lod.h"
#include "gpumem/measure.h"
#include "gpumem/model.h"
#include "gpumem/modelfile.h"
#include "gpumem/output.h"
#include "gpumem/pickle_write.h"
#include "gpumem/replay.h"
#include "gpumem/report.h"
#include "gpumem/sheet.h"
#include "gpumem/snapshot.h"
#include "gpumem/sweep.h"
#include "gpumem/text.h"
#include "gpumem/units.h"
#include "gpumem/version.h"
#include "gpumem/watch.h"

#endif
