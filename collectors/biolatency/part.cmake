# The biolatency collector (issue 22): block I/O latency histograms from a BPF program. Its BPF
# build first (bpf.cmake: DISKPULSE_BPF, diskpulse_bpf_skeleton()).
include(${CMAKE_CURRENT_LIST_DIR}/bpf.cmake)
# Still to come from the userspace side: biolatency_hist.c biolatency.c biolatency_collector.c.
diskpulse_part(biolatency collectors/biolatency
  SOURCES biolatency_load.c
  USES lib)
diskpulse_bpf_skeleton(part_biolatency)
