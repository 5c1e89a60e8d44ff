# toolchain-mingw-w64-x86_64.cmake — cross-compile keel for 64-bit Windows
# with mingw-w64 (Debian: gcc-mingw-w64-x86-64), e.g. from Linux:
#
#   cmake -S . -B build-win -G Ninja \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-mingw-w64-x86_64.cmake \
#         -DCMAKE_PREFIX_PATH=/path/to/windows/deps/prefix
#
# cmake/windows/build-and-test.sh does all of it (packages, dependencies,
# configure, build, tests under Wine); docs/windows.md explains the details.
#
# Variables read (cache or environment):
#   KEEL_MINGW_TRIPLET     default x86_64-w64-mingw32
#   KEEL_MINGW_THREADS     win32 (default) or posix: which Debian compiler
#                          flavour, x86_64-w64-mingw32-gcc-win32 / -posix.
#                          keel uses libuv's threads, never pthreads, so the
#                          win32 flavour needs no libwinpthread-1.dll at all.
#   KEEL_WINDOWS_DEPS_PREFIX  a prefix holding the Windows builds of libuv,
#                          mbedTLS and zlib (cmake/windows/build-deps.sh
#                          prints one); searched before the mingw sysroot
#   KEEL_WINDOWS_EMULATOR  what runs a .exe for ctest and try_run; default
#                          `wine` when it is installed (set it to "" for none)

set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
# Windows 7 is the oldest libuv 1.44 supports; say so to the headers.
set(CMAKE_SYSTEM_VERSION 6.1)

if(NOT KEEL_MINGW_TRIPLET)
    if(DEFINED ENV{KEEL_MINGW_TRIPLET})
        set(KEEL_MINGW_TRIPLET "$ENV{KEEL_MINGW_TRIPLET}")
    else()
        set(KEEL_MINGW_TRIPLET x86_64-w64-mingw32)
    endif()
endif()
if(NOT KEEL_MINGW_THREADS)
    if(DEFINED ENV{KEEL_MINGW_THREADS})
        set(KEEL_MINGW_THREADS "$ENV{KEEL_MINGW_THREADS}")
    else()
        set(KEEL_MINGW_THREADS win32)
    endif()
endif()
# try_compile projects see the toolchain file again but not the caller's
# cache: hand the two choices down.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES KEEL_MINGW_TRIPLET KEEL_MINGW_THREADS)

# Prefer the explicit flavour (Debian's alternatives may point the plain
# name at either), fall back to the plain name (other distributions).
find_program(KEEL_MINGW_CC NAMES ${KEEL_MINGW_TRIPLET}-gcc-${KEEL_MINGW_THREADS} ${KEEL_MINGW_TRIPLET}-gcc)
find_program(KEEL_MINGW_CXX NAMES ${KEEL_MINGW_TRIPLET}-g++-${KEEL_MINGW_THREADS} ${KEEL_MINGW_TRIPLET}-g++)
find_program(KEEL_MINGW_RC NAMES ${KEEL_MINGW_TRIPLET}-windres windres)
if(NOT KEEL_MINGW_CC)
    message(FATAL_ERROR "toolchain-mingw-w64: ${KEEL_MINGW_TRIPLET}-gcc not found. "
                        "Debian/Ubuntu: apt-get install gcc-mingw-w64-x86-64")
endif()
set(CMAKE_C_COMPILER "${KEEL_MINGW_CC}")
if(KEEL_MINGW_CXX)
    set(CMAKE_CXX_COMPILER "${KEEL_MINGW_CXX}")
endif()
if(KEEL_MINGW_RC)
    set(CMAKE_RC_COMPILER "${KEEL_MINGW_RC}")
endif()
# CMake derives binutils' names from the compiler's only when it is called
# <triplet>-gcc[-<version>]; with the -win32 suffix it would pick the host's.
foreach(_tool ar ranlib nm objdump strip dlltool)
    string(TOUPPER "${_tool}" _var)
    find_program(KEEL_MINGW_${_var} NAMES ${KEEL_MINGW_TRIPLET}-${_tool})
    if(KEEL_MINGW_${_var})
        set(CMAKE_${_var} "${KEEL_MINGW_${_var}}" CACHE FILEPATH "" FORCE)
    endif()
endforeach()

# Headers and libraries come from the mingw sysroot and from the prefixes
# given in CMAKE_PREFIX_PATH / CMAKE_FIND_ROOT_PATH (the Windows builds of
# libuv, mbedTLS, zlib); programs (pkg-config, wine) from the build host.
if(NOT KEEL_WINDOWS_DEPS_PREFIX AND DEFINED ENV{KEEL_WINDOWS_DEPS_PREFIX})
    set(KEEL_WINDOWS_DEPS_PREFIX "$ENV{KEEL_WINDOWS_DEPS_PREFIX}")
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES KEEL_WINDOWS_DEPS_PREFIX)
if(KEEL_WINDOWS_DEPS_PREFIX)
    # First, so that its static libz.a wins over the sysroot's import library.
    list(APPEND CMAKE_FIND_ROOT_PATH "${KEEL_WINDOWS_DEPS_PREFIX}")
endif()
list(APPEND CMAKE_FIND_ROOT_PATH "/usr/${KEEL_MINGW_TRIPLET}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config on the build host knows the host's libraries only: never let
# it hand Linux libuv/mbedTLS to a Windows build. A prefix that ships .pc
# files for Windows can put its pkgconfig folder in PKG_CONFIG_LIBDIR.
if(NOT DEFINED ENV{PKG_CONFIG_LIBDIR})
    set(ENV{PKG_CONFIG_LIBDIR} "/usr/${KEEL_MINGW_TRIPLET}/lib/pkgconfig")
endif()
set(ENV{PKG_CONFIG_PATH} "")

# uv.h pulls <windows.h> into every keel source, and the headers are most of
# each compile's time: trim them as libuv itself is built (about a third off
# each file here). Defined empty, exactly as `#define WIN32_LEAN_AND_MEAN`,
# so a source defining it too gets no redefinition warning.
set(CMAKE_C_FLAGS_INIT "-DWIN32_LEAN_AND_MEAN=")

# The mingw runtime linked in statically, so keel.exe, libkeel.dll and every
# mod_*.dll need nothing beside them but Windows' own DLLs (no
# libgcc_s_seh-1.dll, no libwinpthread-1.dll).
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static-libgcc")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-static-libgcc")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "-static-libgcc")
if(KEEL_MINGW_THREADS STREQUAL "posix")
    # That flavour's runtime needs libwinpthread: link it in too.
    foreach(_kind EXE SHARED MODULE)
        string(APPEND CMAKE_${_kind}_LINKER_FLAGS_INIT " -static")
    endforeach()
endif()

# ctest (and try_run) run Windows executables through Wine.
if(NOT DEFINED KEEL_WINDOWS_EMULATOR)
    if(DEFINED ENV{KEEL_WINDOWS_EMULATOR})
        set(KEEL_WINDOWS_EMULATOR "$ENV{KEEL_WINDOWS_EMULATOR}")
    else()
        find_program(KEEL_WINE NAMES wine wine64)
        if(KEEL_WINE)
            set(KEEL_WINDOWS_EMULATOR "${KEEL_WINE}")
        else()
            set(KEEL_WINDOWS_EMULATOR "")
        endif()
    endif()
endif()
if(KEEL_WINDOWS_EMULATOR AND NOT CMAKE_CROSSCOMPILING_EMULATOR)
    set(CMAKE_CROSSCOMPILING_EMULATOR "${KEEL_WINDOWS_EMULATOR}")
endif()
