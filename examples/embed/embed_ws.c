/* A WebSocket server in one file: libkeel linked in, the http1 and
 * websocket modules compiled into the program (no dlopen), and the
 * endpoints written with keel/websocket.h exactly as a module would: the
 * service table is looked up in load and called through the same wrappers.
 *
 *     embed_ws [ADDRESS:PORT] [WORKERS]      default 127.0.0.1:8080, 2
 *
 *   ws://HOST/echo   every message back, as it came
 *   ws://HOST/room   every message to everyone connected to /room, on every
 *                    worker (pub/sub on the topic "room")
 */
#include <stdio.h>
#include <string.h>

#include <keel/embed.h>
#include <keel/websocket.h>

KEEL_MODULE_DECLARE(http1);
KEEL_MODULE_DECLARE(websocket);

KEEL_WEBSOCKET_DEFINE

static void echo(keel_ws *ws, int kind, const char *data, size_t len, void *ud)
{
    (void)ud;
    keel_ws_send_copy(ws, kind, data, len);
}

static void room_open(keel_ws *ws, void *ud)
{
    (void)ud;
    keel_ws_subscribe(ws, "room");
}

static void room_say(keel_ws *ws, int kind, const char *data, size_t len, void *ud)
{
    (void)ud;
    keel_ws_publish(keel_conn_worker(keel_ws_conn(ws)), "room", kind, data, len);
}

static const keel_ws_endpoint endpoints[] = {
    {.size = sizeof(keel_ws_endpoint), .path = "/echo", .on_message = echo},
    {.size = sizeof(keel_ws_endpoint),
     .path = "/room",
     .on_open = room_open,
     .on_message = room_say},
};

static int app_load(keel_module *module)
{
    int rc = keel_ws_bind(module);
    for (size_t i = 0; rc == KEEL_OK && i < sizeof endpoints / sizeof endpoints[0]; i++)
        rc = keel_ws_endpoint_add(module, &endpoints[i]);
    return rc;
}

static const char *const app_dependencies[] = {"websocket", NULL};

KEEL_MODULE(app, .version = "1.0.0", .dependencies = app_dependencies, .load = app_load);

int main(int argc, char **argv)
{
    char listen[256], workers[64];
    snprintf(listen, sizeof listen, "keel.listen=%s http1", argc > 1 ? argv[1] : "127.0.0.1:8080");
    snprintf(workers, sizeof workers, "keel.workers=%s", argc > 2 ? argv[2] : "2");

    keel_server *server = keel_server_new();
    if (server == NULL)
        return 1;
    int rc = keel_server_add_module(server, &keel_module_http1);
    if (rc == KEEL_OK)
        rc = keel_server_add_module(server, &keel_module_websocket);
    if (rc == KEEL_OK)
        rc = keel_server_add_module(server, &keel_module_app);
    if (rc == KEEL_OK)
        rc = keel_server_set(server, listen);
    if (rc == KEEL_OK)
        rc = keel_server_set(server, workers);
    if (rc == KEEL_OK)
        rc = keel_server_run(server); /* until SIGINT/SIGTERM */
    keel_server_free(server);
    return rc == KEEL_OK ? 0 : 1;
}
