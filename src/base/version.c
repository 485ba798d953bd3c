/* SPDX-License-Identifier: MIT */
/* version.c - gm_version(). */
#include "gpumem/version.h"

const char *gm_version(void)
{
    return GM_VERSION_STRING;
}
