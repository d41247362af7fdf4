/* The facts of one SMART read (smart_data.h) as metric families. Used by the SMART collector's
 * export. */
#pragma once

#include "metrics.h"
#include "smart_data.h"

/* Writes the device's health metrics into out: diskpulse_smart_info, healthy, the unified
 * values, and the protocol's own (diskpulse_nvme_*, diskpulse_ata_*, diskpulse_scsi_*). The
 * caller keeps d. Whatever thread owns out. */
void smart_export_data(struct mset *out, const char *device, const struct smart_data *d);
