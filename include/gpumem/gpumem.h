/* SPDX-License-Identifier: MIT */
/* gpumem.h - umbrella header of the gpumem library: include this one. */
#ifndef GPUMEM_GPUMEM_H
#define GPUMEM_GPUMEM_H

#include "gpumem/account.h"
#include "gpumem/alloc.h"
#include "gpumem/analysis.h"
#include "gpumem/arena.h"
#include "gpumem/device.h"
#include "gpumem/error.h"
#include "gpumem/estimate.h"
#include "gpumem/example.h"
#include "gpumem/file.h"
#include "gpumem/json.h"
#include "gpumem/measure.h"
#include "gpumem/model.h"
#include "gpumem/modelfile.h"
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
