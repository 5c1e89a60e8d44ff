/* keel/keel.h — everything a keel module needs: include this one header.
 *
 * Embedding programs include <keel/embed.h> as well.
 */
#ifndef KEEL_KEEL_H
#define KEEL_KEEL_H

#include "version.h"
#include "export.h"
#include "types.h"
#include "http.h"
#include "metrics.h"
#include "module.h"
#include "api.h"

#endif
