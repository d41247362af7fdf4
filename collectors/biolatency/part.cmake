# The biolatency collector: block I/O latency histograms from a BPF program. Its BPF build first
# (bpf.cmake: DISKPULSE_BPF, diskpulse_bpf_skeleton()); without clang, bpftool or libbpf the part
# is built without the program and the loader says so at runtime.
include(${CMAKE_CURRENT_LIST_DIR}/bpf.cmake)
diskpulse_part(biolatency collectors/biolatency
  SOURCES biolatency_load.c biolatency_hist.c biolatency.c biolatency_collector.c
  USES lib LIBS PRIVATE m)
diskpulse_bpf_skeleton(part_biolatency)
