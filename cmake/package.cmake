# The Debian package: `cpack` in a build tree configured with
# -DCMAKE_INSTALL_PREFIX=/usr writes keel_<version>-<release>_<arch>.deb.
# docs/packaging.md says how to build, install and run it; the files it adds
# to a plain install (config, units, init script, maintainer scripts) are in
# cmake/debian/, whose README lists them.
#
# The package holds everything `cmake --install` installs (keel, keel-cert,
# libkeel, the shipped modules, the SDK headers, the CMake and pkg-config
# files, share/keel/www) plus the install component `system`: the files that
# live outside the prefix (/etc/keel, the systemd units, /etc/init.d/keel).
# That component is EXCLUDE_FROM_ALL, so `cmake --install build --prefix
# /opt/keel` (tests/sdk does that, as a user) never writes to /etc; install
# it by hand with `cmake --install build --component system`.

set(KEEL_PKG_DIR "${PROJECT_SOURCE_DIR}/cmake/debian")
set(KEEL_PKG_OUT "${CMAKE_BINARY_DIR}/packaging")

set(KEEL_PACKAGE_MAINTAINER "keel maintainers <keel@example.org>" CACHE STRING
    "Maintainer field of the Debian package")
set(KEEL_PACKAGE_RELEASE "1" CACHE STRING
    "Debian revision of the package (the part after the version's dash)")
# Debian 12 packages still ship units under /lib (the /usr merge is done by
# the system, and dpkg must not see the same file under two names).
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
    set(_keel_unitdir "/lib/systemd/system")
else()
    set(_keel_unitdir "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
endif()
set(KEEL_SYSTEMD_UNITDIR "${_keel_unitdir}" CACHE PATH "Where the systemd units are installed")

# The paths the units, the init script and the maintainer scripts name.
# FULL_SYSCONFDIR is /etc (not /usr/etc) when the prefix is /usr.
set(KEEL_PKG_BINDIR "${CMAKE_INSTALL_FULL_BINDIR}")
set(KEEL_PKG_CONFDIR "${CMAKE_INSTALL_FULL_SYSCONFDIR}/keel")
set(KEEL_PKG_INITDIR "${CMAKE_INSTALL_FULL_SYSCONFDIR}/init.d")
set(KEEL_PKG_LOGROTATEDIR "${CMAKE_INSTALL_FULL_SYSCONFDIR}/logrotate.d")
set(KEEL_PKG_DATADIR "${CMAKE_INSTALL_FULL_DATADIR}/keel")

set(KEEL_PKG_SOVERSION "${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}")
foreach(f keel.conf keel.service keel.socket keel.init keel.logrotate conffiles shlibs triggers
        postinst prerm postrm)
    configure_file("${KEEL_PKG_DIR}/${f}" "${KEEL_PKG_OUT}/${f}" @ONLY)
endforeach()

install(FILES "${KEEL_PKG_OUT}/keel.conf"
    DESTINATION "${KEEL_PKG_CONFDIR}" COMPONENT system EXCLUDE_FROM_ALL)
install(FILES "${KEEL_PKG_OUT}/keel.service" "${KEEL_PKG_OUT}/keel.socket"
    DESTINATION "${KEEL_SYSTEMD_UNITDIR}" COMPONENT system EXCLUDE_FROM_ALL)
install(PROGRAMS "${KEEL_PKG_OUT}/keel.init" RENAME keel
    DESTINATION "${KEEL_PKG_INITDIR}" COMPONENT system EXCLUDE_FROM_ALL)
install(FILES "${KEEL_PKG_OUT}/keel.logrotate" RENAME keel
    DESTINATION "${KEEL_PKG_LOGROTATEDIR}" COMPONENT system EXCLUDE_FROM_ALL)

# ---- CPack ----------------------------------------------------------------

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME keel)
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_CONTACT "${KEEL_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${KEEL_PACKAGE_MAINTAINER}")
# The long description (CPack puts the summary above it). One string: a
# list's semicolons would end up in the control file.
string(CONCAT CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "keel runs one libuv loop per worker thread; HTTP/1.1, HTTP/2, static\n"
    "files, stats, WebSocket, compression, TLS, a reverse proxy and a Redis\n"
    "pub/sub bridge are modules loaded from the config. The package runs\n"
    "keel as a service (systemd or /etc/init.d) from /etc/keel/keel.conf and\n"
    "ships the SDK (headers, CMake and pkg-config files) for building modules.")
set(CPACK_DEBIAN_PACKAGE_RELEASE "${KEEL_PACKAGE_RELEASE}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The library dependencies are read from the binaries by dpkg-shlibdeps, so
# they follow what this build linked (pubsub_redis only when hiredis was
# found, rewrite only when PCRE2 was). adduser creates the keel user.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
# libkeel.so.<major>.<minor>: a shlibs file and the ldconfig trigger, both
# written here (CPack's own shlibs would pin the exact revision, and it
# warns about every module, which has no soname).
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${KEEL_PKG_OUT}/conffiles" "${KEEL_PKG_OUT}/shlibs" "${KEEL_PKG_OUT}/triggers"
    "${KEEL_PKG_OUT}/postinst"
    "${KEEL_PKG_OUT}/prerm" "${KEEL_PKG_OUT}/postrm")

# Stage with DESTDIR and the real prefix: the absolute destinations of the
# `system` component (/etc, /lib/systemd) land inside the package, and the
# paths compiled into keel (modules and data relative to bin/) are the ones
# it was built for.
set(CPACK_SET_DESTDIR ON)
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_INSTALL_CMAKE_PROJECTS
    "${CMAKE_BINARY_DIR};keel;Unspecified;/"
    "${CMAKE_BINARY_DIR};keel;system;/")
set(CPACK_PACKAGE_INSTALL_DIRECTORY keel)
# A .deb for /usr/local or /opt breaks Debian policy and the units: refused.
set(CPACK_PROJECT_CONFIG_FILE "${PROJECT_SOURCE_DIR}/cmake/package-check.cmake")
set(CPACK_KEEL_PACKAGE_PREFIX "${CMAKE_INSTALL_PREFIX}")

include(CPack)
