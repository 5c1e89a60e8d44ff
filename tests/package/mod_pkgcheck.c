/* mod_pkgcheck: the smallest module there is, built by tests/package/run.sh
 * against the headers the Debian package installed (pkg-config keel and
 * find_package(keel)), never against the source tree: it proves the
 * packaged SDK builds a module that the packaged keel loads. Its load hook
 * logs one line the test looks for. */
#include <keel/keel.h>

static int pkgcheck_load(keel_module *module)
{
    keel_log(module, KEEL_LOG_INFO, "loaded (built against ABI %d.%d)", KEEL_ABI_MAJOR,
             KEEL_ABI_MINOR);
    return KEEL_OK;
}

KEEL_MODULE(pkgcheck, .version = "1.0.0", .load = pkgcheck_load);
