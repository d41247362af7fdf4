/* The privileged helper's own metrics (diskpulse_helper_*), from privsep_stats(). */
#pragma once

#include "devio.h"
#include "metrics.h"

/* Adds the helper's metrics to out; nothing when io is NULL or not a privsep client. */
void privsep_export(struct devio *io, struct mset *out);
