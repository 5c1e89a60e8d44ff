# Read by cpack (CPACK_PROJECT_CONFIG_FILE, cmake/package.cmake) before it
# builds each package: a Debian package installs under /usr, and the units,
# the init script and the compiled-in module and data paths were configured
# for the build's prefix, so a build for another prefix is refused here
# rather than producing a package whose service cannot start.
if(CPACK_GENERATOR STREQUAL "DEB" AND NOT CPACK_KEEL_PACKAGE_PREFIX STREQUAL "/usr")
    message(FATAL_ERROR "keel: the Debian package needs a build configured with "
                        "-DCMAKE_INSTALL_PREFIX=/usr (this one has "
                        "'${CPACK_KEEL_PACKAGE_PREFIX}'); see docs/packaging.md")
endif()
