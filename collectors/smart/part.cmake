# The smart part (collectors/README.md); the top CMakeLists.txt includes every collectors/*/part.cmake.
diskpulse_part(smart collectors/smart
  SOURCES smart_text.c smart_nvme.c smart_ata.c smart_scsi.c smart_read.c smart_export.c smart.c smart_collector.c
  USES lib LIBS PRIVATE Threads::Threads)
