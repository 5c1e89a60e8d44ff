/* A module compiled with -DKEEL_LINKED, as happens when its flags come from
 * `pkg-config --cflags libkeel` (the embedding package) instead of `keel`:
 * its descriptor has no slot for the host's table and its calls name
 * libkeel's symbols, which a host executable does not export. Linked
 * without -Wl,--no-undefined so that it builds at all. The loader must
 * refuse it, saying why, before running load (which would die on an
 * undefined symbol). */
#include <keel/keel.h>

static int linked_load(keel_module *module)
{
    keel_log(module, KEEL_LOG_INFO, "this call cannot be resolved");
    return KEEL_OK;
}

/* linkednow is the same module linked with -Wl,-z,now: dlopen itself
 * refuses it, and the loader must still say why. */
#ifdef LINKED_BOUND_AT_LOAD
KEEL_MODULE(linkednow, .version = "1.0.0", .load = linked_load);
#else
KEEL_MODULE(linked, .version = "1.0.0", .load = linked_load);
#endif
