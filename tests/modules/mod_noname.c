/* A descriptor whose name is NULL (written by hand: KEEL_MODULE always
 * names it). The loader must refuse it without printing the NULL. */
#include <keel/keel.h>

KEEL_HIDDEN const struct keel_api *keel__api;

KEEL_MODULE_EXPORT const keel_module_desc keel_module_noname = {
    .size = sizeof(keel_module_desc),
    .abi_major = KEEL_ABI_MAJOR,
    .abi_minor = KEEL_ABI_MINOR,
    .name = NULL,
    .version = "1.0.0",
    .api = &keel__api,
};
