# `cmake --install` and `cpack -G DEB`: four Debian packages, one per kind of
# host or user (docs in README.md, "Packages"):
#   surge-server   surge-mds, surge-ods, /etc/surge/*.toml (conffiles), units
#   surge-client   surge-fuse, mount.surge, surgectl, surge-bench
#   libsurge0      libsurge.so.0 (the native client library)
#   libsurge-dev   <surge/*.h>, libsurge.so, surge.pc, find_package(Surge)
# Runtime dependencies come from dpkg-shlibdeps (every linked library), plus
# the packages no binary links but a host needs (fuse3 for mounting,
# ibverbs-providers so an RDMA device has its user-space driver).
# Debian's multiarch library folder (lib/x86_64-linux-gnu) whatever the prefix.
if(CMAKE_LIBRARY_ARCHITECTURE AND NOT DEFINED CMAKE_INSTALL_LIBDIR)
  set(CMAKE_INSTALL_LIBDIR lib/${CMAKE_LIBRARY_ARCHITECTURE} CACHE PATH "Object code libraries (lib)")
endif()
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# --- surge-server
install(TARGETS surge-mds surge-ods RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)
# Absolute: the shipped configs are the files the units start the daemons with.
install(FILES mds/surge-mds.toml ods/surge-ods.toml DESTINATION /etc/surge COMPONENT server)
install(FILES mds/surge-mds.service ods/surge-ods.service
        DESTINATION /lib/systemd/system COMPONENT server)

# --- surge-client
install(TARGETS surge-fuse surgectl surge-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT client)
install(PROGRAMS client/fuse/mount.surge DESTINATION /sbin COMPONENT client)

# --- libsurge0 / libsurge-dev
install(TARGETS surge EXPORT SurgeTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib NAMELINK_COMPONENT dev
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY client/include/surge DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
# surge.pc finds the prefix from its own place, so an unpacked tree works too.
file(RELATIVE_PATH SURGE_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
configure_file(cmake/package/surge.pc.in ${PROJECT_BINARY_DIR}/surge.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/surge.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
set(SURGE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Surge)
install(EXPORT SurgeTargets NAMESPACE Surge:: DESTINATION ${SURGE_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(cmake/package/SurgeConfig.cmake.in ${PROJECT_BINARY_DIR}/SurgeConfig.cmake
  INSTALL_DESTINATION ${SURGE_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/SurgeConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/SurgeConfig.cmake ${PROJECT_BINARY_DIR}/SurgeConfigVersion.cmake
        DESTINATION ${SURGE_CMAKE_DIR} COMPONENT dev)

# --- CPack
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME surge)
set(CPACK_PACKAGE_VENDOR "Surge developers")
set(CPACK_PACKAGE_CONTACT "Surge developers <surge@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL server client lib dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://example.invalid/surge")

set(CPACK_DEBIAN_SERVER_PACKAGE_NAME surge-server)
set(CPACK_DEBIAN_SERVER_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "ibverbs-providers, systemd")
set(CPACK_COMPONENT_SERVER_DESCRIPTION
  "Surge parallel file system: metadata and object data servers\n surge-mds (namespace on RocksDB) and surge-ods (object store), their\n configuration under /etc/surge and systemd units (surge-mds, surge-ods).")
# The maintainer scripts reload systemd; units are enabled by the admin
# (or Ansible), never started by installing the package.
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/cmake/package/server/conffiles
  ${PROJECT_SOURCE_DIR}/cmake/package/server/postinst
  ${PROJECT_SOURCE_DIR}/cmake/package/server/prerm
  ${PROJECT_SOURCE_DIR}/cmake/package/server/postrm)

set(CPACK_DEBIAN_CLIENT_PACKAGE_NAME surge-client)
set(CPACK_DEBIAN_CLIENT_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_CLIENT_PACKAGE_DEPENDS "fuse3, ibverbs-providers")
set(CPACK_COMPONENT_CLIENT_DESCRIPTION
  "Surge parallel file system: FUSE client and tools\n surge-fuse and mount.surge (mount -t surge, /etc/fstab), surgectl\n (cluster administration) and surge-bench (IOR-style benchmark).")

set(CPACK_DEBIAN_LIB_PACKAGE_NAME libsurge0)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_PACKAGE_DEPENDS "ibverbs-providers")
set(CPACK_COMPONENT_LIB_DESCRIPTION
  "Surge parallel file system: native client library\n libsurge.so.0, the C (surge/surge.h) and C++ (surge/client.h) client API.")
# A shlibs file, so packages built against libsurge depend on libsurge0.
set(CPACK_DEBIAN_LIB_PACKAGE_GENERATE_SHLIBS ON)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libsurge-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libsurge0 (= ${PROJECT_VERSION})")
set(CPACK_COMPONENT_DEV_DESCRIPTION
  "Surge parallel file system: client library development files\n Headers, libsurge.so, pkg-config (surge.pc) and CMake (find_package(Surge))\n files for programs that link libsurge.")
include(CPack)
