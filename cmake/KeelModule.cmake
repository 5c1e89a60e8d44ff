# KeelModule.cmake — keel_add_module(), the one way to build a keel module.
#
# Used by keel's own build (modules/, plugins/, tests/) and installed with the
# SDK, so a third-party module builds exactly the same way:
#
#     cmake_minimum_required(VERSION 3.16)
#     project(keel_echo C)
#     find_package(keel 0.1 REQUIRED)
#     keel_add_module(echo SOURCES echo.c)
#
# keel_add_module(<name>
#                 SOURCES <src>...
#                 [LINK <lib>...]                 private link libraries (zlib, mbedTLS, ...)
#                 [INCLUDE_DIRECTORIES <dir>...]  private include dirs, searched first
#                 [COMPILE_DEFINITIONS <def>...]  private compile definitions
#                 [OUTPUT_DIRECTORY <dir>]        where mod_<name>.<ext> is written
#                 [INSTALL_DESTINATION <dir>]     install the module there
#                 [NO_SDK])                       do not use keel::sdk's headers
#
# Creates the MODULE library target mod_<name>, producing mod_<name>.so on
# Linux and other Unix systems, mod_<name>.dylib on macOS and mod_<name>.dll
# on Windows (no "lib" prefix anywhere, also with MinGW), with hidden
# visibility: the only exported symbol is the descriptor KEEL_MODULE() writes.
# SOURCES may be C or C++ (the project enables the languages it uses).
# Hidden visibility alone does not keep C++ template instances out of the
# dynamic symbol table (libstdc++ declares namespace std with default
# visibility), nor the symbols of static libraries given to LINK, so the
# export list is also enforced at link time: a version script on ELF
# systems, -exported_symbol on macOS (on Windows only dllexport'ed symbols
# leave a DLL anyway).
#
# A module never links against keel (libkeel or the executable): the host
# hands it a function table at load time. keel_add_module() refuses LINK
# items naming keel's libraries, and on Linux links with -Wl,--no-undefined
# so a module that calls a host symbol directly fails to link here, exactly
# as it would on Windows and macOS, instead of failing to load later.
#
# Output directory: OUTPUT_DIRECTORY, else ${KEEL_MODULE_OUTPUT_DIR} if set,
# else ${CMAKE_BINARY_DIR}/modules. Multi-config generators (Visual Studio,
# Xcode, Ninja Multi-Config) write there directly, without a Debug/ or
# Release/ subfolder, so the module path is the same in every configuration.
#
# Install: INSTALL_DESTINATION, else ${KEEL_MODULE_INSTALL_DIR} if set, else
# the module is not installed. keel's installed package sets
# KEEL_MODULE_INSTALL_DIR to <libdir>/keel/modules (relative to the consuming
# project's install prefix) unless the project already set it. The install
# component is ${KEEL_MODULE_INSTALL_COMPONENT} if set, else the default one
# (keel's pubsub_redis sets it: its own Debian package).
#
# NO_SDK is for a module compiled against another copy of keel's headers
# (tests/ keeps a frozen copy of the v1 ABI) given through
# INCLUDE_DIRECTORIES.
#
# Variables read:
#   KEEL_MODULE_OUTPUT_DIR, KEEL_MODULE_INSTALL_DIR,
#   KEEL_MODULE_INSTALL_COMPONENT  (see above)
#   KEEL_MODULE_NO_UNDEFINED  default ON; OFF drops -Wl,--no-undefined
#   KEEL_SANITIZE             when ON (keel's own sanitizer build),
#                             -Wl,--no-undefined is not used (clang's
#                             sanitizer runtimes live in the executable)
# Global property KEEL_MODULE_TARGETS lists every mod_<name> target created.

include_guard(GLOBAL)

# Lets only keel_module_* out of the module's dynamic symbol table. A
# pattern rather than the exact name: a module built without a descriptor
# (a loader test) must still link where the linker refuses version-script
# names that are not defined (lld's --no-undefined-version).
function(_keel_module_export_only_descriptor target)
    if(APPLE)
        target_link_options(${target} PRIVATE "LINKER:-exported_symbol,_keel_module_*")
        return()
    endif()
    if(NOT CMAKE_SYSTEM_NAME MATCHES "^(Linux|FreeBSD|NetBSD|OpenBSD|DragonFly)$")
        return()
    endif()
    set(map "${CMAKE_CURRENT_BINARY_DIR}/${target}.exports.map")
    set(content "{\n  global: keel_module_*;\n  local: *;\n};\n")
    # Rewritten only when it changes, so that a re-configure relinks nothing.
    set(old "")
    if(EXISTS "${map}")
        file(READ "${map}" old)
    endif()
    if(NOT old STREQUAL content)
        file(WRITE "${map}" "${content}")
    endif()
    target_link_options(${target} PRIVATE "LINKER:--version-script=${map}")
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${map}")
endfunction()

function(keel_add_module name)
    cmake_parse_arguments(PARSE_ARGV 1 ARG
        "NO_SDK"
        "OUTPUT_DIRECTORY;INSTALL_DESTINATION"
        "SOURCES;LINK;INCLUDE_DIRECTORIES;COMPILE_DEFINITIONS")
    if(ARG_UNPARSED_ARGUMENTS)
        message(FATAL_ERROR "keel_add_module(${name}): unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
    endif()
    if(NOT name MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
        message(FATAL_ERROR "keel_add_module(${name}): a module name must be a C identifier "
                            "(it names the descriptor keel_module_<name> that KEEL_MODULE() writes)")
    endif()
    if(NOT ARG_SOURCES)
        message(FATAL_ERROR "keel_add_module(${name}): SOURCES is required")
    endif()
    foreach(lib IN LISTS ARG_LINK)
        if(lib MATCHES "^(keel::keel|keel::keel_static|keel_shared|keel_static|keel)$")
            message(FATAL_ERROR "keel_add_module(${name}): LINK ${lib}: a module never links against "
                                "keel; it calls the host through the function table the headers wrap")
        endif()
    endforeach()
    if(NOT ARG_NO_SDK AND NOT TARGET keel::sdk)
        message(FATAL_ERROR "keel_add_module(${name}): target keel::sdk does not exist; "
                            "call find_package(keel) first (or pass NO_SDK and INCLUDE_DIRECTORIES)")
    endif()

    set(target "mod_${name}")

    if(ARG_OUTPUT_DIRECTORY)
        set(outdir "${ARG_OUTPUT_DIRECTORY}")
    elseif(KEEL_MODULE_OUTPUT_DIR)
        set(outdir "${KEEL_MODULE_OUTPUT_DIR}")
    else()
        set(outdir "${CMAKE_BINARY_DIR}/modules")
    endif()
    get_filename_component(outdir "${outdir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")

    if(APPLE)
        set(suffix ".dylib")
    elseif(WIN32 OR CYGWIN)
        set(suffix ".dll")
    else()
        set(suffix ".so")
    endif()

    add_library(${target} MODULE ${ARG_SOURCES})
    set_target_properties(${target} PROPERTIES
        PREFIX ""
        OUTPUT_NAME "${target}"
        SUFFIX "${suffix}"
        C_VISIBILITY_PRESET hidden
        CXX_VISIBILITY_PRESET hidden
        VISIBILITY_INLINES_HIDDEN ON
        # A generator expression keeps multi-config generators from
        # appending a per-configuration subdirectory.
        LIBRARY_OUTPUT_DIRECTORY "$<1:${outdir}>"
        RUNTIME_OUTPUT_DIRECTORY "$<1:${outdir}>")

    if(NOT ARG_NO_SDK)
        target_link_libraries(${target} PRIVATE keel::sdk)
    endif()
    if(ARG_INCLUDE_DIRECTORIES)
        target_include_directories(${target} BEFORE PRIVATE ${ARG_INCLUDE_DIRECTORIES})
    endif()
    if(ARG_COMPILE_DEFINITIONS)
        target_compile_definitions(${target} PRIVATE ${ARG_COMPILE_DEFINITIONS})
    endif()
    if(ARG_LINK)
        target_link_libraries(${target} PRIVATE ${ARG_LINK})
    endif()

    if(NOT DEFINED KEEL_MODULE_NO_UNDEFINED)
        set(KEEL_MODULE_NO_UNDEFINED ON)
    endif()
    set(sanitizing OFF)
    if(KEEL_SANITIZE OR "${CMAKE_C_FLAGS} ${CMAKE_MODULE_LINKER_FLAGS}" MATCHES "-fsanitize")
        set(sanitizing ON)
    endif()
    if(KEEL_MODULE_NO_UNDEFINED AND NOT sanitizing
       AND CMAKE_SYSTEM_NAME MATCHES "^(Linux|FreeBSD|NetBSD|OpenBSD|DragonFly)$"
       AND CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
        target_link_options(${target} PRIVATE "LINKER:--no-undefined")
    endif()

    _keel_module_export_only_descriptor(${target})

    if(ARG_INSTALL_DESTINATION)
        set(dest "${ARG_INSTALL_DESTINATION}")
    elseif(KEEL_MODULE_INSTALL_DIR)
        set(dest "${KEEL_MODULE_INSTALL_DIR}")
    else()
        set(dest "")
    endif()
    if(dest)
        set(component "")
        if(KEEL_MODULE_INSTALL_COMPONENT)
            set(component COMPONENT "${KEEL_MODULE_INSTALL_COMPONENT}")
        endif()
        install(TARGETS ${target}
            LIBRARY DESTINATION "${dest}" ${component}
            RUNTIME DESTINATION "${dest}" ${component})
    endif()

    set_property(GLOBAL APPEND PROPERTY KEEL_MODULE_TARGETS ${target})
endfunction()
