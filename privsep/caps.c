/* The helper's capabilities: capget/capset with _LINUX_CAPABILITY_VERSION_3 (no libcap), what the
 * helper and each worker keep, and privsep_drop_all() for the daemon. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/capability.h>

#include "privsep_internal.h"

#define CAP_BIT(c) (UINT64_C(1) << (c))

static int caps_get(uint64_t *ret_eff, uint64_t *ret_prm)
{
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
        struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {{0}};

        if (syscall(SYS_capget, &h, d) < 0)
                return -errno;
        *ret_eff = (uint64_t)d[1].effective << 32 | d[0].effective;
        *ret_prm = (uint64_t)d[1].permitted << 32 | d[0].permitted;
        return 0;
}

static int caps_set(uint64_t eff, uint64_t prm, uint64_t inh)
{
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
        struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {
            {.effective = (uint32_t)eff, .permitted = (uint32_t)prm, .inheritable = (uint32_t)inh},
            {.effective = (uint32_t)(eff >> 32),
             .permitted = (uint32_t)(prm >> 32),
             .inheritable = (uint32_t)(inh >> 32)},
        };

        return syscall(SYS_capset, &h, d) < 0 ? -errno : 0;
}

/* Leaves the calling thread with at most keep (effective = permitted = keep ∩ what it had),
 * nothing inheritable or ambient, and no_new_privs. With bounding, also drops every other
 * capability from the bounding set, which needs CAP_SETPCAP (skipped without it). */
int privsep_caps_restrict(uint64_t keep, bool bounding)
{
        uint64_t eff = 0, prm = 0;
        int r;

        r = caps_get(&eff, &prm);
        if (r < 0)
                return r;
        keep &= prm;
        /* Before 4.3 there is no ambient set: EINVAL means there is nothing to clear. */
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return -errno;
        if (bounding && (eff & CAP_BIT(CAP_SETPCAP))) {
                for (unsigned long c = 0; c < 64; c++) {
                        int in = prctl(PR_CAPBSET_READ, c, 0, 0, 0);

                        if (in < 0)
                                break; /* EINVAL: past the kernel's last capability */
                        if (in == 1 && !(keep & CAP_BIT(c)) &&
                            prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
                                return -errno;
                }
        }
        r = caps_set(keep, keep, 0);
        if (r < 0)
                return r;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        return 0;
}

int privsep_drop_all(void)
{
        return privsep_caps_restrict(0, true);
}

/* What the helper keeps: CAP_SYS_ADMIN for NVMe admin commands (drivers/nvme/host/ioctl.c
 * nvme_cmd_allowed(): Get Log Page always needs it), CAP_SYS_RAWIO for ATA PASS-THROUGH
 * (drivers/scsi/scsi_ioctl.c scsi_cmd_allowed(): 85h is not in the read-safe list). INQUIRY,
 * LOG SENSE and READ DEFECT DATA are read-safe: opening the node is enough. Opening needs read
 * permission on the node: uid 0 has it as the owner (nvme* 0600 root, sd* 0660 root:disk).
 * A non-root service user given the capabilities as ambient ones also needs to read the nodes:
 * for that case only, CAP_DAC_READ_SEARCH (read-only opens; narrower than CAP_DAC_OVERRIDE).
 * Only what cfg needs: the device capabilities without no_devices, CAP_SYS_ADMIN for a table of
 * privileged functions (privsep_function_caps()); nothing for neither. */
uint64_t privsep_helper_caps(const struct privsep_config *cfg)
{
        uint64_t keep = 0;

        if (!cfg->no_devices) {
                keep |= CAP_BIT(CAP_SYS_ADMIN) | CAP_BIT(CAP_SYS_RAWIO);
                if (geteuid() != 0)
                        keep |= CAP_BIT(CAP_DAC_READ_SEARCH);
        }
        if (cfg->n_functions)
                keep |= privsep_function_caps();
        return keep;
}

/* A worker keeps only what its request's kind needs. */
uint64_t privsep_worker_caps(uint32_t kind)
{
        uint64_t keep = CAP_BIT(CAP_DAC_READ_SEARCH);

        if (kind == DEVIO_NVME)
                keep |= CAP_BIT(CAP_SYS_ADMIN);
        else if (kind == DEVIO_ATA)
                keep |= CAP_BIT(CAP_SYS_RAWIO);
        return keep;
}

/* A worker running a privileged function keeps CAP_SYS_ADMIN only: what bpf(2) needs to load
 * programs and make maps and links (kernel/bpf/syscall.c bpf_capable(): CAP_BPF or, before 5.8
 * and still as an alternative, CAP_SYS_ADMIN; attaching to tracepoints needs CAP_PERFMON or
 * CAP_SYS_ADMIN), and nothing the helper keeps for devices. */
uint64_t privsep_function_caps(void)
{
        return CAP_BIT(CAP_SYS_ADMIN);
}
