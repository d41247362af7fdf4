# biolatency (issue 22): block I/O latency histograms from eBPF. The reader, export and adapter;
# biolatency_load_stub.c stands in for the BPF loader until it is integrated.
diskpulse_part(biolatency collectors/biolatency
  SOURCES biolatency_hist.c biolatency.c biolatency_collector.c biolatency_load_stub.c
  USES lib LIBS PRIVATE m)
