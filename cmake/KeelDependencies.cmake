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
