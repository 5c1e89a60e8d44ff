# FindCriterion.cmake — find the Criterion unit-test framework and provide
# keel_dep::criterion.
#
# Looked for through pkg-config `criterion` (Debian libcriterion-dev,
# Homebrew), then a plain header + library search.
# Sets Criterion_FOUND, Criterion_VERSION.

if(TARGET keel_dep::criterion)
    set(Criterion_FOUND TRUE)
    return()
endif()

set(_keel_crit_target "")
set(_keel_crit_found_as "")

find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
    pkg_check_modules(KEEL_PC_CRITERION QUIET IMPORTED_TARGET criterion)
    if(KEEL_PC_CRITERION_FOUND)
        set(_keel_crit_target PkgConfig::KEEL_PC_CRITERION)
        set(_keel_crit_found_as "${KEEL_PC_CRITERION_LINK_LIBRARIES}")
        set(Criterion_VERSION "${KEEL_PC_CRITERION_VERSION}")
    endif()
endif()

if(NOT _keel_crit_target)
    find_path(Criterion_INCLUDE_DIR NAMES criterion/criterion.h)
    find_library(Criterion_LIBRARY NAMES criterion libcriterion)
    mark_as_advanced(Criterion_INCLUDE_DIR Criterion_LIBRARY)
    if(Criterion_INCLUDE_DIR AND Criterion_LIBRARY)
        set(_keel_crit_target "${Criterion_LIBRARY}")
        set(_keel_crit_found_as "${Criterion_LIBRARY}")
    endif()
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Criterion
    REQUIRED_VARS _keel_crit_found_as
    VERSION_VAR Criterion_VERSION)

if(Criterion_FOUND AND NOT TARGET keel_dep::criterion)
    add_library(keel_dep::criterion INTERFACE IMPORTED)
    set_property(TARGET keel_dep::criterion PROPERTY INTERFACE_LINK_LIBRARIES "${_keel_crit_target}")
    if(NOT TARGET "${_keel_crit_target}")
        set_property(TARGET keel_dep::criterion PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${Criterion_INCLUDE_DIR}")
    endif()
endif()

unset(_keel_crit_target)
unset(_keel_crit_found_as)
