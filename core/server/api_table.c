/* The host's function table, generated from the same list as the module
 * side's wrappers, so the two cannot disagree. */
#include "server/api_table.h"

const struct keel_api kl_host_api = {
    sizeof(struct keel_api),
    KEEL_ABI_MAJOR,
    KEEL_ABI_MINOR,
#define KEEL_FN(ret, name, params, args) keel_##name,
#define KEEL_VFN(name, params, args)     keel_##name,
#include <keel/api_list.h>
#undef KEEL_FN
#undef KEEL_VFN
};
