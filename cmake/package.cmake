# The Debian package: `cpack` in a build tree configured with
# -DCMAKE_INSTALL_PREFIX=/usr writes keel_<version>-<release>_<arch>.deb.
# docs/packaging.md says how to build, install and run it; the files it adds
# to a plain install (config, units, init script, maintainer scripts) are in
# cmake/debian/, whose README lists them.
#
# Three packages, from the install components (cpack writes one .deb each):
#   keel               the default component (keel, keel-cert, libkeel.so.*,
#                      the modules but pubsub_redis, share/keel/www) and
#                      `system`: /etc/keel, the systemd units,
#                      /etc/init.d/keel, /etc/logrotate.d/keel,
#                      /usr/share/doc/keel
#   keel-dev           `dev` (headers, libkeel.a and the .so link, CMake and
#                      pkg-config files) and `dev_doc`
#   keel-pubsub-redis  `pubsub_redis` (the only module linking libhiredis,
#                      so keel does not depend on it) and `pubsub_redis_doc`
# `system` and the *_doc components are EXCLUDE_FROM_ALL, so `cmake
# --install build --prefix /opt/keel` (tests/sdk does that, as a user) never
# writes to /etc; install them by hand with `--component system`.

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

# /usr/share/doc/<package> (Debian policy 12.5, 12.7): the copyright file
# and changelog.Debian.gz in each package, the README in keel's.
set(KEEL_PKG_DEBIAN_VERSION "${PROJECT_VERSION}-${KEEL_PACKAGE_RELEASE}")
string(TIMESTAMP KEEL_PKG_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
configure_file("${KEEL_PKG_DIR}/changelog" "${KEEL_PKG_OUT}/changelog.Debian" @ONLY)
find_program(KEEL_GZIP gzip)
mark_as_advanced(KEEL_GZIP)
if(KEEL_GZIP)
    # gzip -9n: maximal, without name and time stamp (reproducible).
    execute_process(COMMAND "${KEEL_GZIP}" -9nf "${KEEL_PKG_OUT}/changelog.Debian"
                    RESULT_VARIABLE _keel_gzip_rc)
    set(_keel_pkg_docs "${KEEL_PKG_OUT}/changelog.Debian.gz" "${KEEL_PKG_DIR}/copyright")
else()
    set(_keel_pkg_docs "${KEEL_PKG_OUT}/changelog.Debian" "${KEEL_PKG_DIR}/copyright")
endif()
set(_keel_docdir "${CMAKE_INSTALL_DATAROOTDIR}/doc")
install(FILES ${_keel_pkg_docs} "${PROJECT_SOURCE_DIR}/README.md"
    DESTINATION "${_keel_docdir}/keel" COMPONENT system EXCLUDE_FROM_ALL)
install(FILES ${_keel_pkg_docs}
    DESTINATION "${_keel_docdir}/keel-dev" COMPONENT dev_doc EXCLUDE_FROM_ALL)
install(FILES ${_keel_pkg_docs}
    DESTINATION "${_keel_docdir}/keel-pubsub-redis" COMPONENT pubsub_redis_doc EXCLUDE_FROM_ALL)
install(FILES ${_keel_pkg_docs}
    DESTINATION "${_keel_docdir}/keel-tls-openssl" COMPONENT tls_openssl_doc EXCLUDE_FROM_ALL)
# The lintian tags each package keeps, with why (cmake/debian/README.md).
set(_keel_overrides "${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides")
install(FILES "${KEEL_PKG_DIR}/lintian-overrides" RENAME keel
    DESTINATION "${_keel_overrides}" COMPONENT system EXCLUDE_FROM_ALL)
install(FILES "${KEEL_PKG_DIR}/lintian-overrides-dev" RENAME keel-dev
    DESTINATION "${_keel_overrides}" COMPONENT dev_doc EXCLUDE_FROM_ALL)
install(FILES "${KEEL_PKG_DIR}/lintian-overrides-pubsub-redis" RENAME keel-pubsub-redis
    DESTINATION "${_keel_overrides}" COMPONENT pubsub_redis_doc EXCLUDE_FROM_ALL)
install(FILES "${KEEL_PKG_DIR}/lintian-overrides-tls-openssl" RENAME keel-tls-openssl
    DESTINATION "${_keel_overrides}" COMPONENT tls_openssl_doc EXCLUDE_FROM_ALL)

# ---- CPack ----------------------------------------------------------------

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME keel)
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
# CPack's own default, so that each package's first description line is
# its own (CPackDeb prepends any other summary to every package's).
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "keel built using CMake")
set(CPACK_PACKAGE_CONTACT "${KEEL_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${KEEL_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_RELEASE "${KEEL_PACKAGE_RELEASE}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Stripped, as Debian ships binaries (policy 10.1). keel's crash report
# still names the module and the exported symbols (dladdr reads the
# dynamic symbol table, which strip keeps).
set(CPACK_STRIP_FILES ON)

# One package per group of components.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ONE_PER_GROUP)
set(CPACK_COMPONENTS_ALL Unspecified system dev dev_doc)
set(CPACK_COMPONENT_UNSPECIFIED_GROUP server)
set(CPACK_COMPONENT_SYSTEM_GROUP server)
set(CPACK_COMPONENT_DEV_GROUP dev)
set(CPACK_COMPONENT_DEV_DOC_GROUP dev)
# The long descriptions: one string each (a list's semicolons would end up
# in the control file); the first line is the synopsis.
set(CPACK_DEBIAN_SERVER_PACKAGE_NAME keel)
string(CONCAT CPACK_DEBIAN_SERVER_DESCRIPTION
    "libuv-based networking server with run-time loadable modules\n"
    "keel runs one libuv loop per worker thread; HTTP/1.1, HTTP/2, static\n"
    "files, stats, WebSocket, compression, TLS, a reverse proxy and more are\n"
    "modules loaded from the config. The package runs keel as a service\n"
    "(systemd or /etc/init.d) from /etc/keel/keel.conf.")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME keel-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
string(CONCAT CPACK_DEBIAN_DEV_DESCRIPTION
    "keel SDK: headers, CMake and pkg-config files\n"
    "What building a keel module or embedding libkeel needs: the public\n"
    "headers, find_package(keel) with keel_add_module(), keel.pc and\n"
    "libkeel.pc, libkeel.a and the link to libkeel.so.")
# Exactly this build's keel: the headers are its ABI.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "keel (= ${KEEL_PKG_DEBIAN_VERSION})")
if(TARGET mod_pubsub_redis)
    list(APPEND CPACK_COMPONENTS_ALL pubsub_redis pubsub_redis_doc)
    set(CPACK_COMPONENT_PUBSUB_REDIS_GROUP pubsub_redis)
    set(CPACK_COMPONENT_PUBSUB_REDIS_DOC_GROUP pubsub_redis)
    set(CPACK_DEBIAN_PUBSUB_REDIS_PACKAGE_NAME keel-pubsub-redis)
    string(CONCAT CPACK_DEBIAN_PUBSUB_REDIS_DESCRIPTION
        "keel module: WebSocket topics across instances through Redis\n"
        "pubsub_redis carries the websocket module's topics between keel\n"
        "instances through Redis pub/sub. Its own package because it links\n"
        "libhiredis, which keel itself does not need.")
    # A module is loaded by the keel of the same build (the ABI check
    # would refuse another one's anyway).
    set(CPACK_DEBIAN_PUBSUB_REDIS_PACKAGE_DEPENDS "keel (= ${KEEL_PKG_DEBIAN_VERSION})")
endif()
if(TARGET mod_tls_openssl)
    list(APPEND CPACK_COMPONENTS_ALL tls_openssl tls_openssl_doc)
    set(CPACK_COMPONENT_TLS_OPENSSL_GROUP tls_openssl)
    set(CPACK_COMPONENT_TLS_OPENSSL_DOC_GROUP tls_openssl)
    set(CPACK_DEBIAN_TLS_OPENSSL_PACKAGE_NAME keel-tls-openssl)
    string(CONCAT CPACK_DEBIAN_TLS_OPENSSL_DESCRIPTION
        "keel module: TLS on OpenSSL 3 ([tls] backend = openssl)\n"
        "tls_openssl is the tls module's second backend: the same transport,\n"
        "service and [tls] keys on OpenSSL 3, with TLS 1.3 and OpenSSL's\n"
        "handshake speed. Its own package because it links libssl, which keel\n"
        "itself (TLS on mbedTLS by default) does not need.")
    set(CPACK_DEBIAN_TLS_OPENSSL_PACKAGE_DEPENDS "keel (= ${KEEL_PKG_DEBIAN_VERSION})")
endif()

# The library dependencies are read from the binaries by dpkg-shlibdeps, so
# they follow what this build linked (rewrite only when PCRE2 was found;
# hiredis only in keel-pubsub-redis). adduser creates the keel user.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "adduser")
# libkeel.so.<major>.<minor>: a shlibs file and the ldconfig trigger, both
# written here (CPack's own shlibs would pin the exact revision, and it
# warns about every module, which has no soname).
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
    "${KEEL_PKG_OUT}/conffiles" "${KEEL_PKG_OUT}/shlibs" "${KEEL_PKG_OUT}/triggers"
    "${KEEL_PKG_OUT}/postinst"
    "${KEEL_PKG_OUT}/prerm" "${KEEL_PKG_OUT}/postrm")

# Stage with DESTDIR and the real prefix: the absolute destinations of the
# `system` component (/etc, /lib/systemd) land inside the package, and the
# paths compiled into keel (modules and data relative to bin/) are the ones
# it was built for.
set(CPACK_SET_DESTDIR ON)
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_INSTALL_CMAKE_PROJECTS "${CMAKE_BINARY_DIR};keel;ALL;/")
set(CPACK_PACKAGE_INSTALL_DIRECTORY keel)
# A .deb for /usr/local or /opt breaks Debian policy and the units: refused.
set(CPACK_PROJECT_CONFIG_FILE "${PROJECT_SOURCE_DIR}/cmake/package-check.cmake")
set(CPACK_KEEL_PACKAGE_PREFIX "${CMAKE_INSTALL_PREFIX}")

include(CPack)
