/* SPDX-License-Identifier: MIT */
/* gpumem.h - umbrella header of the gpumem library: include this one. */
#ifndef GPUMEM_GPUMEM_H
#define GPUMEM_GPUMEM_H

#include "gpumem/arena.h"
#include "gpumem/device.h"
#include "gpumem/error.h"
#include "gpumem/json.h"
#include "gpumem/snapshot.h"
#include "gpumem/units.h"
#include "gpumem/version.h"
#include "gpumem/watch.h"

#endif
