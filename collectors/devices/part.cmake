# The devices part (collectors/README.md); the top CMakeLists.txt includes every collectors/*/part.cmake.
diskpulse_part(devices collectors/devices
  SOURCES devices.c devices_udev.c
  USES lib LIBS PRIVATE PkgConfig::UDEV)
