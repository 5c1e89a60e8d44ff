# embed.cmake — turns a file into a C array at build time, with CMake alone
# (no xxd, no compiler extension such as #embed or .incbin), so that it
# works the same for native builds, the mingw-w64 cross-build and MSVC.
#
#   cmake -DINPUT=dashboard.html -DOUTPUT=dashboard.c -DNAME=stats_dashboard_html -P embed.cmake
#
# Defines `const unsigned char NAME[]` (the bytes plus a terminating NUL,
# so the module may search it as a string) and `const size_t NAME_len`
# (without the NUL). An array initialiser rather than a string literal:
# MSVC refuses string literals over 64 KiB.
foreach(var INPUT OUTPUT NAME)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "embed.cmake: -D${var}=... is required")
    endif()
endforeach()

file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" nhex)
math(EXPR size "${nhex} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# Sixteen bytes a line keeps the generated file readable in a diff tool.
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n    " bytes "${bytes}")
get_filename_component(src "${INPUT}" NAME)

set(text "/* Generated from ${src} by embed.cmake: do not edit. */\n")
string(APPEND text "#include <stddef.h>\n\n")
# extern first: the array has internal linkage otherwise in C++, and its
# visibility stays hidden (the module builds with -fvisibility=hidden).
string(APPEND text "extern const unsigned char ${NAME}[];\n")
string(APPEND text "extern const size_t ${NAME}_len;\n\n")
string(APPEND text "const unsigned char ${NAME}[] = {\n    ${bytes}0x00};\n")
string(APPEND text "const size_t ${NAME}_len = ${size};\n")

# Written only when it changed, so that an unchanged page rebuilds nothing.
if(EXISTS "${OUTPUT}")
    file(READ "${OUTPUT}" old)
    if(old STREQUAL text)
        return()
    endif()
endif()
file(WRITE "${OUTPUT}" "${text}")
