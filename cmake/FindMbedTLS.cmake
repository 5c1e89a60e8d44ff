# FindMbedTLS.cmake — find mbedTLS and provide keel_dep::mbedtls, which links
# mbedtls, mbedx509 and mbedcrypto (in that order).
#
# Looked for, in order:
#   1. mbedTLS's own CMake package MbedTLS (mbedTLS 3.x installs, vcpkg,
#      Homebrew): MbedTLS::mbedtls / mbedx509 / mbedcrypto;
#   2. pkg-config mbedtls, mbedx509, mbedcrypto (mbedTLS >= 3.6);
#   3. a plain header + library search (Debian libmbedtls-dev 2.28 ships
#      neither of the above). Homebrew's keg-only mbedtls@2 is searched too.
#
# Sets MbedTLS_FOUND, MbedTLS_VERSION (from the headers when possible),
# MbedTLS_VERSION_MAJOR.

if(TARGET keel_dep::mbedtls)
    set(MbedTLS_FOUND TRUE)
    return()
endif()

set(_keel_mbed_libs "")
set(_keel_mbed_found_as "")
set(_keel_mbed_incdir "")

# 1. CMake package.
find_package(MbedTLS CONFIG QUIET)
if(TARGET MbedTLS::mbedtls AND TARGET MbedTLS::mbedx509 AND TARGET MbedTLS::mbedcrypto)
    set(_keel_mbed_libs MbedTLS::mbedtls MbedTLS::mbedx509 MbedTLS::mbedcrypto)
    set(_keel_mbed_found_as "${MbedTLS_DIR}")
    get_target_property(_keel_mbed_incdir MbedTLS::mbedtls INTERFACE_INCLUDE_DIRECTORIES)
    if(MbedTLS_VERSION)
        set(_keel_mbed_pkg_version "${MbedTLS_VERSION}")
    endif()
endif()

# 2. pkg-config.
if(NOT _keel_mbed_libs)
    find_package(PkgConfig QUIET)
    if(PKG_CONFIG_FOUND)
        pkg_check_modules(KEEL_PC_MBEDTLS QUIET IMPORTED_TARGET mbedtls mbedx509 mbedcrypto)
        if(KEEL_PC_MBEDTLS_FOUND)
            set(_keel_mbed_libs PkgConfig::KEEL_PC_MBEDTLS)
            set(_keel_mbed_found_as "${KEEL_PC_MBEDTLS_LINK_LIBRARIES}")
            set(_keel_mbed_incdir "${KEEL_PC_MBEDTLS_INCLUDE_DIRS}")
            set(_keel_mbed_pkg_version "${KEEL_PC_MBEDTLS_mbedtls_VERSION}")
        endif()
    endif()
endif()

# 3. Plain search.
if(NOT _keel_mbed_libs)
    set(_keel_mbed_hints "")
    if(APPLE)
        # Homebrew's mbedtls@2 is keg-only (not linked into the prefix).
        foreach(_p /opt/homebrew/opt/mbedtls@2 /usr/local/opt/mbedtls@2
                   /opt/homebrew/opt/mbedtls /usr/local/opt/mbedtls)
            if(EXISTS "${_p}")
                list(APPEND _keel_mbed_hints "${_p}")
            endif()
        endforeach()
    endif()
    find_path(MbedTLS_INCLUDE_DIR NAMES mbedtls/ssl.h HINTS ${_keel_mbed_hints} PATH_SUFFIXES include)
    find_library(MbedTLS_LIBRARY NAMES mbedtls HINTS ${_keel_mbed_hints} PATH_SUFFIXES lib)
    find_library(MbedTLS_X509_LIBRARY NAMES mbedx509 HINTS ${_keel_mbed_hints} PATH_SUFFIXES lib)
    find_library(MbedTLS_CRYPTO_LIBRARY NAMES mbedcrypto HINTS ${_keel_mbed_hints} PATH_SUFFIXES lib)
    mark_as_advanced(MbedTLS_INCLUDE_DIR MbedTLS_LIBRARY MbedTLS_X509_LIBRARY MbedTLS_CRYPTO_LIBRARY)
    if(MbedTLS_INCLUDE_DIR AND MbedTLS_LIBRARY AND MbedTLS_X509_LIBRARY AND MbedTLS_CRYPTO_LIBRARY)
        set(_keel_mbed_libs "${MbedTLS_LIBRARY}" "${MbedTLS_X509_LIBRARY}" "${MbedTLS_CRYPTO_LIBRARY}")
        set(_keel_mbed_found_as "${MbedTLS_LIBRARY}")
        set(_keel_mbed_incdir "${MbedTLS_INCLUDE_DIR}")
    endif()
    unset(_keel_mbed_hints)
endif()

# Version from the headers: mbedtls/build_info.h (3.x) or mbedtls/version.h (2.x).
set(MbedTLS_VERSION "")
foreach(_d IN LISTS _keel_mbed_incdir)
    foreach(_h build_info.h version.h)
        if(NOT MbedTLS_VERSION AND EXISTS "${_d}/mbedtls/${_h}")
            file(STRINGS "${_d}/mbedtls/${_h}" _v REGEX "^#define MBEDTLS_VERSION_STRING +\"")
            if(_v MATCHES "\"([0-9.]+)\"")
                set(MbedTLS_VERSION "${CMAKE_MATCH_1}")
            endif()
        endif()
    endforeach()
endforeach()
if(NOT MbedTLS_VERSION AND _keel_mbed_pkg_version)
    set(MbedTLS_VERSION "${_keel_mbed_pkg_version}")
endif()
if(MbedTLS_VERSION MATCHES "^([0-9]+)")
    set(MbedTLS_VERSION_MAJOR "${CMAKE_MATCH_1}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(MbedTLS
    REQUIRED_VARS _keel_mbed_found_as
    VERSION_VAR MbedTLS_VERSION)

if(MbedTLS_FOUND AND NOT TARGET keel_dep::mbedtls)
    add_library(keel_dep::mbedtls INTERFACE IMPORTED)
    set_property(TARGET keel_dep::mbedtls PROPERTY INTERFACE_LINK_LIBRARIES "${_keel_mbed_libs}")
    if(MbedTLS_INCLUDE_DIR AND NOT TARGET MbedTLS::mbedtls AND NOT TARGET PkgConfig::KEEL_PC_MBEDTLS)
        set_property(TARGET keel_dep::mbedtls PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${MbedTLS_INCLUDE_DIR}")
    endif()
    if(WIN32)
        # mbedcrypto's entropy source uses the Windows crypto API.
        set_property(TARGET keel_dep::mbedtls APPEND PROPERTY INTERFACE_LINK_LIBRARIES bcrypt)
    endif()
endif()

unset(_keel_mbed_libs)
unset(_keel_mbed_found_as)
unset(_keel_mbed_incdir)
unset(_keel_mbed_pkg_version)
