# FindLibUV.cmake — find libuv and provide the imported target keel_dep::uv.
#
# Looked for, in order:
#   1. libuv's own CMake package (vcpkg, libuv >= 1.45 installs): libuv::uv,
#      libuv::uv_a, or the older vcpkg name unofficial::libuv::libuv;
#   2. pkg-config `libuv` (Debian libuv1-dev, Homebrew, most Unix installs);
#   3. a plain header + library search (uv.h, libuv / uv / uv_a).
#
# Sets LibUV_FOUND, LibUV_VERSION (when known), LibUV_FROM_PKGCONFIG.
# This file is also installed with keel's CMake package: keel::keel_static
# needs libuv at link time.

if(TARGET keel_dep::uv)
    set(LibUV_FOUND TRUE)
    return()
endif()

set(_keel_uv_target "")
set(_keel_uv_found_as "")
set(LibUV_FROM_PKGCONFIG FALSE)

# 1. CMake package.
find_package(libuv CONFIG QUIET)
if(libuv_FOUND)
    foreach(_t libuv::uv libuv::uv_a uv uv_a)
        if(TARGET ${_t})
            set(_keel_uv_target ${_t})
            break()
        endif()
    endforeach()
    if(libuv_VERSION)
        set(LibUV_VERSION "${libuv_VERSION}")
    endif()
endif()
if(NOT _keel_uv_target)
    find_package(unofficial-libuv CONFIG QUIET)
    if(TARGET unofficial::libuv::libuv)
        set(_keel_uv_target unofficial::libuv::libuv)
    endif()
endif()

# 2. pkg-config.
if(NOT _keel_uv_target)
    find_package(PkgConfig QUIET)
    if(PKG_CONFIG_FOUND)
        pkg_check_modules(KEEL_PC_LIBUV QUIET IMPORTED_TARGET libuv)
        if(KEEL_PC_LIBUV_FOUND)
            set(_keel_uv_target PkgConfig::KEEL_PC_LIBUV)
            list(GET KEEL_PC_LIBUV_LINK_LIBRARIES 0 _keel_uv_found_as)
            set(LibUV_VERSION "${KEEL_PC_LIBUV_VERSION}")
            set(LibUV_FROM_PKGCONFIG TRUE)
        endif()
    endif()
endif()

# 3. Plain search.
if(NOT _keel_uv_target)
    find_path(LibUV_INCLUDE_DIR NAMES uv.h)
    find_library(LibUV_LIBRARY NAMES uv libuv uv_a)
    if(LibUV_INCLUDE_DIR AND LibUV_LIBRARY)
        set(_keel_uv_target "${LibUV_LIBRARY}")
        if(EXISTS "${LibUV_INCLUDE_DIR}/uv/version.h")
            file(STRINGS "${LibUV_INCLUDE_DIR}/uv/version.h" _v REGEX "^#define UV_VERSION_(MAJOR|MINOR|PATCH) ")
            string(REGEX REPLACE ".*MAJOR +([0-9]+).*" "\\1" _maj "${_v}")
            string(REGEX REPLACE ".*MINOR +([0-9]+).*" "\\1" _min "${_v}")
            string(REGEX REPLACE ".*PATCH +([0-9]+).*" "\\1" _pat "${_v}")
            set(LibUV_VERSION "${_maj}.${_min}.${_pat}")
        endif()
    endif()
    mark_as_advanced(LibUV_INCLUDE_DIR LibUV_LIBRARY)
endif()

include(FindPackageHandleStandardArgs)
if(_keel_uv_target AND NOT _keel_uv_found_as)
    set(_keel_uv_found_as "${_keel_uv_target}")
endif()
find_package_handle_standard_args(LibUV
    REQUIRED_VARS _keel_uv_found_as
    VERSION_VAR LibUV_VERSION)

if(LibUV_FOUND AND NOT TARGET keel_dep::uv)
    add_library(keel_dep::uv INTERFACE IMPORTED)
    set_property(TARGET keel_dep::uv PROPERTY INTERFACE_LINK_LIBRARIES "${_keel_uv_target}")
    if(NOT TARGET "${_keel_uv_target}")
        # Found by a plain search: add the include dir and the system libraries
        # libuv itself needs (its CMake package / .pc file would carry them).
        set_property(TARGET keel_dep::uv PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${LibUV_INCLUDE_DIR}")
        if(WIN32)
            set_property(TARGET keel_dep::uv APPEND PROPERTY INTERFACE_LINK_LIBRARIES
                ws2_32 iphlpapi userenv psapi user32 dbghelp ole32 shell32)
        elseif(UNIX)
            find_package(Threads QUIET)
            if(TARGET Threads::Threads)
                set_property(TARGET keel_dep::uv APPEND PROPERTY INTERFACE_LINK_LIBRARIES Threads::Threads)
            endif()
            set_property(TARGET keel_dep::uv APPEND PROPERTY INTERFACE_LINK_LIBRARIES ${CMAKE_DL_LIBS})
        endif()
    endif()
endif()

unset(_keel_uv_target)
unset(_keel_uv_found_as)
