# The process part (collectors/README.md); the top CMakeLists.txt includes every collectors/*/part.cmake.
diskpulse_part(process collectors/process
  SOURCES process.c
  USES lib)
