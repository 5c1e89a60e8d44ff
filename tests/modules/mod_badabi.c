/* A module built for the next ABI major: the host must refuse it.
 *
 * The descriptor is written by hand because overriding .abi_major inside
 * KEEL_MODULE(...) would initialise the field twice (-Woverride-init). */
#include <keel/keel.h>

KEEL_HIDDEN const struct keel_api *keel__api;

static int badabi_load(keel_module *module)
{
    (void)module;
    return KEEL_OK;
}

KEEL_MODULE_EXPORT const keel_module_desc keel_module_badabi = {
    .size = sizeof(keel_module_desc),
    .abi_major = KEEL_ABI_MAJOR + 1,
    .abi_minor = 0,
    .name = "badabi",
    .version = "1.0.0",
    .api = &keel__api,
    .load = badabi_load,
};
