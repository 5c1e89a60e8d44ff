# KeelDependencies.cmake — every third-party dependency of the build, found
# once in the top-level directory so every subdirectory (core, modules,
# plugins, tests) sees the same imported targets:
#
#   keel_dep::uv         libuv          libkeel and the keel executable
#   ZLIB::ZLIB           zlib           the deflate module
#   keel_dep::mbedtls    mbedTLS        the tls module (mbedtls, mbedx509, mbedcrypto)
#   keel_dep::llhttp     llhttp         the http1 module
#   keel_dep::criterion  Criterion      tests (only when KEEL_BUILD_TESTS)
#   Threads::Threads
#
# Anything missing is reported in one message naming the packages to install.

include(KeelMissingDependency)

# keel_find_optional_library(<out> <prefix> PKG_CONFIG <module> HEADER <file>
#                            NAMES <library>... TARGET <name> [GLOBAL])
# For a module's optional library: sets <out> to the target to link, or to
# "" where the library is absent (the module then leaves itself or a
# feature out). pkg-config's PkgConfig::<prefix> (GLOBAL: visible to the
# tests' directory too) where it knows the library; else, as on vcpkg
# without pkg-config, an INTERFACE target <name> from the header and the
# library found by name (<prefix>_INCLUDE_DIR, <prefix>_LIBRARY).
function(keel_find_optional_library out prefix)
    cmake_parse_arguments(PARSE_ARGV 2 ARG "GLOBAL" "PKG_CONFIG;HEADER;TARGET" "NAMES")
    set(found "")
    find_package(PkgConfig QUIET)
    if(PKG_CONFIG_FOUND)
        set(scope "")
        if(ARG_GLOBAL)
            set(scope GLOBAL)
        endif()
        pkg_check_modules(${prefix} QUIET IMPORTED_TARGET ${scope} ${ARG_PKG_CONFIG})
        if(${prefix}_FOUND)
            set(found PkgConfig::${prefix})
        endif()
    endif()
    if(NOT found)
        find_path(${prefix}_INCLUDE_DIR ${ARG_HEADER})
        find_library(${prefix}_LIBRARY NAMES ${ARG_NAMES})
        if(${prefix}_INCLUDE_DIR AND ${prefix}_LIBRARY)
            set(found ${ARG_TARGET})
            add_library(${found} INTERFACE)
            target_include_directories(${found} INTERFACE "${${prefix}_INCLUDE_DIR}")
            target_link_libraries(${found} INTERFACE "${${prefix}_LIBRARY}")
        endif()
    endif()
    set(${out} "${found}" PARENT_SCOPE)
endfunction()

find_package(Threads REQUIRED)

find_package(LibUV 1.34)
if(NOT LibUV_FOUND)
    keel_note_missing_dependency(libuv
        NEEDED_BY "libkeel"
        DEBIAN libuv1-dev BREW libuv VCPKG libuv
        HINT "version 1.34 or newer")
endif()

find_package(ZLIB)
if(NOT ZLIB_FOUND)
    keel_note_missing_dependency(zlib
        NEEDED_BY "the deflate module"
        DEBIAN zlib1g-dev BREW zlib VCPKG zlib)
endif()

find_package(MbedTLS)
if(NOT MbedTLS_FOUND)
    keel_note_missing_dependency(mbedTLS
        NEEDED_BY "the tls module"
        DEBIAN libmbedtls-dev BREW mbedtls VCPKG mbedtls
        HINT "mbedTLS 2.28 or 3.x; on Homebrew mbedtls@2 works too")
endif()

find_package(LLHTTP)
if(NOT LLHTTP_FOUND)
    keel_note_missing_dependency(llhttp
        NEEDED_BY "the http1 module"
        DEBIAN node-llhttp BREW llhttp VCPKG llhttp
        HINT "or point LLHTTP_SOURCE_DIR / LLHTTP_SOURCE_INCLUDE_DIR at llhttp's generated api.c http.c llhttp.c and llhttp.h")
endif()

if(KEEL_BUILD_TESTS)
    # Criterion has no Windows build: there the unit tests compile against
    # the Criterion-compatible header and runner in tests/windows/criterion
    # (docs/windows.md). ON elsewhere to check that runner natively.
    option(KEEL_MINI_CRITERION "Build the tests with tests/windows/criterion instead of Criterion" ${WIN32})
    if(KEEL_MINI_CRITERION)
        include("${PROJECT_SOURCE_DIR}/tests/windows/criterion/criterion.cmake")
    endif()
    find_package(Criterion)
    if(NOT Criterion_FOUND)
        keel_note_missing_dependency(Criterion
            NEEDED_BY "the tests; or configure with -DKEEL_BUILD_TESTS=OFF"
            DEBIAN libcriterion-dev BREW criterion)
    endif()
endif()

keel_report_missing_dependencies()
