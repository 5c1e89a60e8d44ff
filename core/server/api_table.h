/* core/server/api_table.h — the function table handed to every module. */
#ifndef KEEL_CORE_API_TABLE_H
#define KEEL_CORE_API_TABLE_H

#include <keel/api.h>

extern const struct keel_api kl_host_api;

#endif
