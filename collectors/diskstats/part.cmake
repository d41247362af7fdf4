# The diskstats part (collectors/README.md); the top CMakeLists.txt includes every collectors/*/part.cmake.
diskpulse_part(diskstats collectors/diskstats
  SOURCES diskstats_parse.c iostat.c diskstats.c diskstats_sample.c diskstats_export.c
  diskstats_collector.c
  USES lib devices)
