/* health.c — active health checks: placeholder until the checker lands
 * (see docs/proxy.md). */
#include "px.h"

void px_checks_start(px_worker *pw);

void px_checks_start(px_worker *pw)
{
    (void)pw;
}
