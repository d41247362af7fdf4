/* The device commands with Linux ioctls (devio_linux.c): what the helper's workers run, and the
 * check of a request that both ends of the helper's socket make. Test tools call them too. */
#pragma once

#include "devio.h"

/* Runs a request right here with ioctls on devices below dev_dir (the privileged helper's
 * worker, and test tools). Validates that name is a block or NVMe character device of the
 * kind asked before sending anything: dev_dir/name is opened read-only without following a
 * symlink, must be a block device (a character device for "nvmeN") and must be the kernel's
 * device of that name (/sys/dev/{block,char}/MAJ:MIN). The device is opened once; if that
 * fails the request stops with resp->n = 1 and r[0].err = -errno (-ENOENT, -EACCES, -ENODEV
 * for a node of the wrong type). A command that fails records its error in its own result and
 * the next command still runs; the caller decides what a failure means. Returns 0 (also in
 * the cases above), -EINVAL for a request privsep_request_valid() refuses, or -ENOMEM. Blocks
 * in ioctls for up to 10 s per command. */
int privsep_devio_exec(const char *dev_dir, const struct devio_request *req,
                       struct devio_response *resp);

/* Checks a request: known kind and commands, commands allowed for the kind, a plain device
 * name ([a-z0-9] only, no path). Returns 0 or -EINVAL. Used on both sides of the helper. */
int privsep_request_valid(const struct devio_request *req);
