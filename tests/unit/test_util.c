/* Path helpers behind module_path's resolution (core/base/util.c). */
#include <criterion/criterion.h>

#include "base/util.h"

Test(util, dir_len_of_config_paths, .timeout = 10)
{
    cr_expect_eq(kl_path_dir_len("keel.conf"), 0);
    cr_expect_eq(kl_path_dir_len("/keel.conf"), 1);
    cr_expect_eq(kl_path_dir_len("etc/keel.conf"), 3);
    cr_expect_eq(kl_path_dir_len("/etc/keel/keel.conf"), 9);
    cr_expect_eq(kl_path_dir_len("./keel.conf"), 1);
    cr_expect_eq(kl_path_dir_len("dir/"), 3);
#ifdef _WIN32
    cr_expect_eq(kl_path_dir_len("C:\\keel.conf"), 3);
    cr_expect_eq(kl_path_dir_len("C:\\etc\\keel.conf"), 6);
#endif
}

Test(util, absolute_paths, .timeout = 10)
{
    cr_expect(kl_path_is_absolute("/usr/lib"));
    cr_expect(!kl_path_is_absolute("mods"));
    cr_expect(!kl_path_is_absolute("./mods"));
    cr_expect(!kl_path_is_absolute("../mods"));
    cr_expect(!kl_path_is_absolute(""));
#ifdef _WIN32
    cr_expect(kl_path_is_absolute("C:\\mods"));
    cr_expect(kl_path_is_absolute("c:/mods"));
    cr_expect(kl_path_is_absolute("\\\\server\\share"));
    cr_expect(!kl_path_is_absolute("C:mods"));
#endif
}
