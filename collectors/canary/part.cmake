# The canary part (collectors/README.md); the top CMakeLists.txt includes every collectors/*/part.cmake.
diskpulse_part(canary collectors/canary
  SOURCES canary_hist.c canary_recent.c canary_reference.c canary_baseline.c canary_stats.c canary_records.c canary_target.c canary_probe.c canary.c canary_prober.c canary_persist.c canary_host.c canary_ref.c canary_export.c canary_reset.c canary_command.c canary_collector.c
  USES lib LIBS PRIVATE Threads::Threads m)
