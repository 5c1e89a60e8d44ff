/* A module built for a newer ABI minor than the host's: it may use table
 * entries this host lacks, so the host must refuse it. Hand-written
 * descriptor for the same reason as mod_badabi.c. */
#include <keel/keel.h>

KEEL_HIDDEN const struct keel_api *keel__api;

static int newminor_load(keel_module *module)
{
    (void)module;
    return KEEL_OK;
}

KEEL_MODULE_EXPORT const keel_module_desc keel_module_newminor = {
    .size = sizeof(keel_module_desc),
    .abi_major = KEEL_ABI_MAJOR,
    .abi_minor = KEEL_ABI_MINOR + 1,
    .name = "newminor",
    .version = "1.0.0",
    .api = &keel__api,
    .load = newminor_load,
};
