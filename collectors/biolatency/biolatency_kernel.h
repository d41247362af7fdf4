/* The few kernel types the BPF program (biolatency.bpf.c) reads, declared by hand for CO-RE
 * instead of a vmlinux.h dumped from the build machine's BTF: with preserve_access_index, clang
 * records each field access by name and libbpf moves it to the running kernel's offset when the
 * program is loaded (the kernel's BTF, /sys/kernel/btf/vmlinux). Only the fields named here are
 * read; their order and the missing fields do not matter. Compiled only by clang -target bpf.
 * Types as in the kernel's include/linux/blk-mq.h (struct request), include/linux/blkdev.h
 * (struct request_queue, struct gendisk) and include/linux/blk_types.h (blk_opf_t). */
#pragma once

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u8 u8;
typedef __u32 u32;
typedef __u64 u64;
typedef __u32 uint32_t;
typedef __u64 uint64_t;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;

/* The libbpf headers' helper declarations name these; their layout is never used here. */
enum bpf_map_type { BPF_MAP_TYPE_ARRAY = 2 };
enum { BPF_F_MMAPABLE = 1U << 10 }; /* include/uapi/linux/bpf.h */
/* The running kernel's helpers (include/uapi/linux/bpf.h): whether it has bpf_loop (5.17+) is
 * asked with bpf_core_enum_value_exists. */
enum bpf_func_id { BPF_FUNC_loop = 181 };

struct gendisk {
        int major;
        int first_minor;
} __attribute__((preserve_access_index));

struct request_queue {
        struct gendisk *disk;      /* 5.15 and later */
        unsigned long queue_flags; /* QUEUE_FLAG_* bits; the bit of QUEUE_FLAG_STATS from the
                                    * loader (an enumerator in BTF, or 20, the #define of 6.1) */
} __attribute__((preserve_access_index));

struct blk_mq_hw_ctx {
        unsigned int queue_num; /* the hardware queue's index */
} __attribute__((preserve_access_index));

struct request {
        struct request_queue *q;
        struct blk_mq_hw_ctx *mq_hctx; /* the hardware queue it is issued on */
        int tag;                       /* the driver tag: unique in its tag set while issued */
        __u32 cmd_flags;         /* blk_opf_t (unsigned int before 6.0): REQ_OP_* in the low byte */
        unsigned int __data_len; /* bytes left to complete */
        __u64 start_time_ns;     /* when the request was made (blk_mq_rq_ctx_init); 0: not set */
        __u64 io_start_time_ns;  /* its last issue, stamped by blk_mq_start_request after the
                                  * block_rq_issue tracepoint while the queue has
                                  * QUEUE_FLAG_STATS; 0 (blk_mq_rq_ctx_init): not stamped */
} __attribute__((preserve_access_index));

/* Before 5.17 the request named its disk itself (rq->rq_disk); the ___old suffix is dropped by
 * libbpf when it matches the type against the kernel's, so this reads struct request's field
 * where it exists (bpf_core_field_exists says which kernel this is). */
struct request___old {
        struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

#define REQ_OP_MASK 0xffu /* include/linux/blk_types.h: REQ_OP_BITS 8 */
