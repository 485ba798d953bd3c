/* SPDX-License-Identifier: MIT */
/* gpumem.h - umbrella header of the gpumem library: include this one. */
#ifndef GPUMEM_GPUMEM_H
#define GPUMEM_GPUMEM_H

#include "gpumem/arena.h"
#include "gpumem/error.h"
#include "gpumem/estimate.h"
#include "gpumem/estimate_ext.h"
#include "gpumem/json.h"
#include "gpumem/model.h"
#include "gpumem/modelfile.h"
#include "gpumem/units.h"
#include "gpumem/version.h"

#endif
