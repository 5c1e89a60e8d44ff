/* An embedding program: libkeel linked in, the echo module compiled into
 * the program (no dlopen, no module path), configured in code.
 *
 *     embed_echo [ADDRESS:PORT] [WORKERS]      default 127.0.0.1:7000, 2
 *
 * The echo module's source is the very file built as mod_echo.so: compiled
 * with KEEL_LINKED (which the keel::keel and keel::keel_static targets set),
 * its keel_* calls go straight to libkeel instead of through the host table.
 */
#include <stdio.h>

#include <keel/embed.h>

KEEL_MODULE_DECLARE(echo);

int main(int argc, char **argv)
{
    const char *address = argc > 1 ? argv[1] : "127.0.0.1:7000";
    const char *workers = argc > 2 ? argv[2] : "2";
    char listen[256], nworkers[64];
    snprintf(listen, sizeof listen, "keel.listen=%s echo", address);
    snprintf(nworkers, sizeof nworkers, "keel.workers=%s", workers);

    keel_server *server = keel_server_new();
    if (server == NULL)
        return 1;
    int rc = keel_server_add_module(server, &keel_module_echo);
    if (rc == KEEL_OK)
        rc = keel_server_set(server, listen);
    if (rc == KEEL_OK)
        rc = keel_server_set(server, nworkers);
    if (rc == KEEL_OK)
        rc = keel_server_set(server, "echo.greeting=hello from an embedded keel");
    if (rc == KEEL_OK)
        rc = keel_server_run(server); /* until SIGINT/SIGTERM */
    if (rc != KEEL_OK)
        fprintf(stderr, "embed_echo: %s\n", keel_strerror(rc));
    keel_server_free(server);
    return rc == KEEL_OK ? 0 : 1;
}
