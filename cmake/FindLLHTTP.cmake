# FindLLHTTP.cmake — find llhttp and provide the target keel_dep::llhttp.
#
# A system llhttp library is preferred:
#   1. llhttp's CMake package (vcpkg, upstream installs): llhttp::llhttp,
#      llhttp::llhttp_static or llhttp::llhttp_shared;
#   2. pkg-config `libllhttp` (Homebrew, distributions that ship the library);
#   3. a plain header + library search (llhttp.h, libllhttp).
# Failing those, llhttp's generated C sources are compiled into a static
# library with position-independent code (it is linked into a module):
#   4. LLHTTP_SOURCE_DIR (api.c http.c llhttp.c) and LLHTTP_SOURCE_INCLUDE_DIR
#      (llhttp.h), by default where Debian's node-llhttp package puts them:
#      /usr/share/llhttp and /usr/share/include/llhttp.
#
# Sets LLHTTP_FOUND, LLHTTP_VERSION, LLHTTP_FROM_SOURCES.

if(TARGET keel_dep::llhttp)
    set(LLHTTP_FOUND TRUE)
    return()
endif()

set(LLHTTP_SOURCE_DIR "/usr/share/llhttp" CACHE PATH
    "Directory holding llhttp's generated C sources (api.c, http.c, llhttp.c), used when no llhttp library is found")
set(LLHTTP_SOURCE_INCLUDE_DIR "/usr/share/include/llhttp" CACHE PATH
    "Directory holding llhttp.h for LLHTTP_SOURCE_DIR")
mark_as_advanced(LLHTTP_SOURCE_DIR LLHTTP_SOURCE_INCLUDE_DIR)

set(_keel_llhttp_target "")
set(_keel_llhttp_found_as "")
set(_keel_llhttp_header "")
set(LLHTTP_FROM_SOURCES FALSE)

# 1. CMake package.
find_package(llhttp CONFIG QUIET)
if(llhttp_FOUND)
    foreach(_t llhttp::llhttp llhttp::llhttp_static llhttp::llhttp_shared llhttp_static llhttp_shared)
        if(TARGET ${_t})
            set(_keel_llhttp_target ${_t})
            set(_keel_llhttp_found_as "${llhttp_DIR} (${_t})")
            break()
        endif()
    endforeach()
endif()

# 2. pkg-config.
if(NOT _keel_llhttp_target)
    find_package(PkgConfig QUIET)
    if(PKG_CONFIG_FOUND)
        pkg_check_modules(KEEL_PC_LLHTTP QUIET IMPORTED_TARGET libllhttp)
        if(KEEL_PC_LLHTTP_FOUND)
            set(_keel_llhttp_target PkgConfig::KEEL_PC_LLHTTP)
            set(_keel_llhttp_found_as "${KEEL_PC_LLHTTP_LINK_LIBRARIES}")
            set(LLHTTP_VERSION "${KEEL_PC_LLHTTP_VERSION}")
        endif()
    endif()
endif()

# 3. Plain library search.
if(NOT _keel_llhttp_target)
    find_path(LLHTTP_INCLUDE_DIR NAMES llhttp.h)
    find_library(LLHTTP_LIBRARY NAMES llhttp libllhttp llhttp_static)
    mark_as_advanced(LLHTTP_INCLUDE_DIR LLHTTP_LIBRARY)
    if(LLHTTP_INCLUDE_DIR AND LLHTTP_LIBRARY)
        set(_keel_llhttp_target "${LLHTTP_LIBRARY}")
        set(_keel_llhttp_found_as "${LLHTTP_LIBRARY}")
        set(_keel_llhttp_header "${LLHTTP_INCLUDE_DIR}/llhttp.h")
    endif()
endif()

# 4. Generated sources (Debian node-llhttp). EXISTS rather than find_path so
#    that a cross build's CMAKE_FIND_ROOT_PATH does not hide host-side sources:
#    they are plain portable C and compile for any target.
set(_keel_llhttp_sources "")
if(NOT _keel_llhttp_target)
    set(_keel_llhttp_sources
        "${LLHTTP_SOURCE_DIR}/api.c" "${LLHTTP_SOURCE_DIR}/http.c" "${LLHTTP_SOURCE_DIR}/llhttp.c")
    foreach(_f IN LISTS _keel_llhttp_sources ITEMS "${LLHTTP_SOURCE_INCLUDE_DIR}/llhttp.h")
        if(NOT EXISTS "${_f}")
            set(_keel_llhttp_sources "")
            break()
        endif()
    endforeach()
    if(_keel_llhttp_sources)
        set(_keel_llhttp_found_as "${LLHTTP_SOURCE_DIR} (sources, built as a static library)")
        set(_keel_llhttp_header "${LLHTTP_SOURCE_INCLUDE_DIR}/llhttp.h")
        set(LLHTTP_FROM_SOURCES TRUE)
    endif()
endif()

if(NOT LLHTTP_VERSION AND _keel_llhttp_header AND EXISTS "${_keel_llhttp_header}")
    file(STRINGS "${_keel_llhttp_header}" _v REGEX "^#define LLHTTP_VERSION_(MAJOR|MINOR|PATCH) ")
    string(REGEX REPLACE ".*MAJOR +([0-9]+).*" "\\1" _maj "${_v}")
    string(REGEX REPLACE ".*MINOR +([0-9]+).*" "\\1" _min "${_v}")
    string(REGEX REPLACE ".*PATCH +([0-9]+).*" "\\1" _pat "${_v}")
    if(_maj MATCHES "^[0-9]+$")
        set(LLHTTP_VERSION "${_maj}.${_min}.${_pat}")
    endif()
endif()
if(NOT LLHTTP_VERSION AND llhttp_VERSION)
    set(LLHTTP_VERSION "${llhttp_VERSION}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LLHTTP
    REQUIRED_VARS _keel_llhttp_found_as
    VERSION_VAR LLHTTP_VERSION)

if(LLHTTP_FOUND)
    if(LLHTTP_FROM_SOURCES)
        if(NOT TARGET keel_llhttp_bundled)
            # EXCLUDE_FROM_ALL: built only when a module links keel_dep::llhttp.
            add_library(keel_llhttp_bundled STATIC EXCLUDE_FROM_ALL ${_keel_llhttp_sources})
            set_target_properties(keel_llhttp_bundled PROPERTIES
                OUTPUT_NAME keel_llhttp
                ARCHIVE_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/lib"
                POSITION_INDEPENDENT_CODE ON
                C_VISIBILITY_PRESET hidden)
            target_include_directories(keel_llhttp_bundled SYSTEM PUBLIC "${LLHTTP_SOURCE_INCLUDE_DIR}")
            # Generated third-party code: its warnings are not ours to fix, and
            # must not fail a -Werror build.
            if(MSVC)
                target_compile_options(keel_llhttp_bundled PRIVATE /W0)
            else()
                target_compile_options(keel_llhttp_bundled PRIVATE -w)
            endif()
        endif()
        add_library(keel_dep::llhttp ALIAS keel_llhttp_bundled)
    else()
        add_library(keel_dep::llhttp INTERFACE IMPORTED)
        set_property(TARGET keel_dep::llhttp PROPERTY INTERFACE_LINK_LIBRARIES "${_keel_llhttp_target}")
        if(NOT TARGET "${_keel_llhttp_target}")
            set_property(TARGET keel_dep::llhttp PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${LLHTTP_INCLUDE_DIR}")
        endif()
    endif()
endif()

unset(_keel_llhttp_target)
unset(_keel_llhttp_found_as)
unset(_keel_llhttp_header)
unset(_keel_llhttp_sources)
