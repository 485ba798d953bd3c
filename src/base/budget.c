/* SPDX-License-Identifier: MIT */
/* budget.c - the memory limit's failure message (see budget.h). */
#include "base/budget.h"

#include "gpumem/units.h"

enum gm_status gm_budget_fail(struct gm_error *err, const char *what, uint64_t need, uint64_t limit)
{
    char a[32], b[32];
    gm_format_bytes(b, sizeof(b), limit, GM_UNITS_IEC);
    if (need == UINT64_MAX)
        return gm_fail_setting(
            err, GM_ERR_LIMIT, "memory_limit",
            "%s would need more memory than the limit of %s: the file describes more "
            "than its size suggests (shared references?)",
            what, b);
    gm_format_bytes(a, sizeof(a), need, GM_UNITS_IEC);
    return gm_fail_setting(
        err, GM_ERR_LIMIT, "memory_limit",
        "%s would need %s of memory, over the limit of %s: the file describes more "
        "than its size suggests (shared references?)",
        what, a, b);
}
