/* SPDX-License-Identifier: MIT */
/* uncertain.c - the assumptions that spread the figures into a range.  A quantity the job
 * does not give (fragmentation, the CUDA context, NCCL buffers, an engine's defaults, ...)
 * takes its point value in the point estimate and its low or high value in the runs at the
 * ends of the range (driver.c); a quantity the job gives is known and keeps its value.
 * Every stage that sizes such a quantity asks est_uncertain(), which also records the
 * assumption as a source of the range. */
#include "estimate/estimate_int.h"

double est_uncertain(struct est_ctx *cx, unsigned source, bool known, double point, double low,
                     double high)
{
    if (known || (low == point && high == point))
        return point;
    cx->e->range.sources |= source;
    return cx->bound == EST_LOW ? low : cx->bound == EST_HIGH ? high : point;
}

double est_run_fragmentation(struct est_ctx *cx)
{
    double f = est_fragmentation(cx->job);
    if (f <= 0)
        return f;
    return est_uncertain(cx, GM_UNCERTAIN_FRAGMENTATION, est_given(cx->job, EST_SET_FRAGMENTATION),
                         f, 0.10, 0.50);
}

void est_length_assumed(struct est_ctx *cx, const char *what, uint64_t tokens, const char *flag)
{
    if (cx->bound == EST_POINT)
        est_assume(cx->e,
                   "%s %llu tokens: not given (the default; %s for the job's own, the "
                   "figures grow with it)",
                   what, (unsigned long long)tokens, flag);
}
