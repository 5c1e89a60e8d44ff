# Proves KEEL_TARGET_ABI_MINOR at compile time: a call to an ABI 1.3 function
# from code that targets 1.2 must not compile, and the same call targeting
# 1.3 must; likewise for 1.5's request trailers targeting 1.4, 1.8's
# keel_connect_error_detail, 1.12's keel_field_make, 1.13's
# keel_response_fields_addn, and the descriptor fields of 1.7 and 1.8
# (which do not exist at all for an older target). Run by ctest as
#
#   cmake -DCOMPILER=<cc or c++> -DLANG=C|CXX -DINCLUDE_DIR=<include/>
#         -DSOURCE=<target_minor.c> -DWORK_DIR=<scratch dir> -P check-target-minor.cmake
#
# GCC and Clang only (MSVC reports the call as a deprecation warning).

foreach(var COMPILER LANG INCLUDE_DIR SOURCE WORK_DIR)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "check-target-minor: -D${var}=... is required")
    endif()
endforeach()
file(MAKE_DIRECTORY "${WORK_DIR}")

if(LANG STREQUAL "CXX")
    set(lang_flags -x c++ -std=c++20)
else()
    set(lang_flags -x c -std=c11)
endif()

set(failures "")
# PROBE:MINOR, the minor that added the function the probe calls.
foreach(entry STRERROR:3 WORKER_COUNT:3 CONFIG_ERROR:3 TIMER_RESTART:3 REQUEST_TRAILER:5
              HTTP_REQUEST_TRAILERS:5 DESC_CONFIG:7 DESC_STOPPING:8 DESC_REOPEN:8
              CONNECT_ERROR_DETAIL:8 FIELD_MAKE:12 FIELDS_ADDN:13)
    string(REPLACE ":" ";" entry "${entry}")
    list(GET entry 0 probe)
    list(GET entry 1 since)
    math(EXPR before "${since} - 1")
    foreach(minor ${before} ${since})
        execute_process(
            COMMAND "${COMPILER}" ${lang_flags} -Wall -Wextra -Werror
                    -DKEEL_TARGET_ABI_MINOR=${minor} -DPROBE_${probe}
                    -I "${INCLUDE_DIR}" -c "${SOURCE}" -o "${WORK_DIR}/probe.o"
            RESULT_VARIABLE rc
            OUTPUT_VARIABLE out
            ERROR_VARIABLE out)
        if(minor EQUAL since AND NOT rc EQUAL 0)
            string(APPEND failures "${probe} targeting 1.${minor} does not compile:\n${out}\n")
        elseif(minor EQUAL before AND rc EQUAL 0)
            string(APPEND failures "${probe} targeting 1.${minor} compiles: it must not\n")
        elseif(minor EQUAL before AND probe MATCHES "^DESC_"
               AND NOT out MATCHES "(has no member named|no member named)")
            # A descriptor field the target lacks does not exist at all.
            string(APPEND failures "${probe} targeting 1.${minor} fails for another reason:\n${out}\n")
        elseif(minor EQUAL before AND NOT probe MATCHES "^DESC_"
               AND NOT out MATCHES "newer than KEEL_TARGET_ABI_MINOR")
            # It failed, but not because of the target.
            string(APPEND failures "${probe} targeting 1.${minor} fails for another reason:\n${out}\n")
        endif()
    endforeach()
endforeach()

if(failures)
    message(FATAL_ERROR "${failures}")
endif()
message(STATUS "KEEL_TARGET_ABI_MINOR refuses every call newer than the target (${LANG}), "
               "and the target's own minor accepts them")
