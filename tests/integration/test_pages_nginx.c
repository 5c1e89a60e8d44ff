/* keel's error pages (errors) and try lists (static's `try`) against
 * nginx's error_page and try_files on the same tree and the same rules:
 * every request gets the same status and the same body from both.
 * nginx runs with a generated config on a free port (nginx.h); skipped
 * where nginx is not installed. */
#define _GNU_SOURCE
#include "test_static.h"
#include "nginx.h"

/* nginx on 127.0.0.1:port serving st_root with `server_rules`. */
static kh_proc *start_nginx(unsigned port, const char *server_rules)
{
    char path[600], conf[4096];
    snprintf(path, sizeof path, "%s/logs", st_base);
    mkdir(path, 0755);
    snprintf(conf, sizeof conf,
             "worker_processes 1;\ndaemon off;\npid %s/nginx.pid;\nerror_log %s/logs/error.log "
             "warn;\nevents { worker_connections 64; }\nhttp {\n"
             "  access_log off;\n  client_body_temp_path %s/body;\n"
             "  types { text/html html; text/javascript js; }\n"
             "  server { listen 127.0.0.1:%u; root %s;\n%s  }\n}\n",
             st_base, st_base, st_base, port, st_root, server_rules);
    return kn_nginx_start(st_base, conf, port);
}

/* GET target from port: the status and the body, or for a redirect the
 * Location's path (nginx writes it absolute, keel as a path). Bodies of
 * statuses no page was configured for are each server's own text. */
static int fetch(unsigned port, const char *target, char *body, size_t cap)
{
    ht_conn *c = ht_connect(port);
    ht_send_str(c, ht_fmt("GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", target));
    ht_resp r;
    memset(&r, 0, sizeof r);
    int rc = ht_read_response(c, &r, 0, 5000);
    ht_close(c);
    cr_assert(rc == 0, "GET %s on %u: %s", target, port, r.err);
    const char *loc = ht_header(&r, "Location");
    if (r.status == 301 && loc != NULL) {
        const char *path = strstr(loc, "://") ? strchr(strstr(loc, "://") + 3, '/') : loc;
        snprintf(body, cap, "Location %s", path ? path : loc);
    } else if (r.status == 200 || r.status == 404) {
        snprintf(body, cap, "%.*s", (int)r.body_len, r.body ? r.body : "");
    } else {
        body[0] = '\0';
    }
    int status = r.status;
    ht_resp_free(&r);
    return status;
}

Test(web_nginx, error_pages_and_try_files_answer_as_nginx, .timeout = 60, .fini = st_cleanup)
{
    kn_nginx_bin();
    st_make_tree();
    chmod(st_base, 0755); /* nginx's worker runs unprivileged when started as root */
    chmod(st_root, 0755);
    st_write_str("www/index.html", "<!doctype html><title>app</title>\n");
    st_write_str("www/404.html", "<h1>custom not found</h1>\n");
    st_mkdir("www/assets");
    st_write_str("www/assets/x.js", "console.log(1)\n");
    st_mkdir("www/docs");
    st_write_str("www/docs/index.html", "docs\n");
    st_mkdir("www/shop");
    st_write_str("www/shop/item.html", "item\n");
    unsigned port = kh_free_port();
    start_nginx(port, "    error_page 404 /404.html;\n"
                      "    location / { try_files $uri $uri/ /index.html; }\n"
                      "    location /assets/ { try_files $uri =404; }\n"
                      "    location /shop/ { try_files $uri $uri.html =404; }\n");
    char conf[4096];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\n"
             "modules = http1 errors static\n" KH_MODULE_PATH
             "[static]\nmount = / %s\ntry = $uri $uri/ /index.html\n"
             "[errors]\npage = 404 /404.html\n"
             "[/assets/]\nstatic.try = $uri =404\n"
             "[/shop/]\nstatic.try = $uri $uri.html =404\n",
             st_root);
    kh_proc *k = kh_start(conf, NULL, 1, 10000);
    static const char *const targets[] = {
        "/",          "/users/42",       "/a/deep/route?x=1",  "/index.html", "/docs",
        "/docs/",     "/assets/x.js",    "/assets/missing.js", "/assets/",    "/assets/docs/",
        "/shop/item", "/shop/item.html", "/shop/none",         "/404.html",   "/missing.png",
    };
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        char kb[512], nb[512];
        int ks = fetch(kh_port(k, 0), targets[i], kb, sizeof kb);
        int ns = fetch(port, targets[i], nb, sizeof nb);
        kh_assert(k, ks == ns && strcmp(kb, nb) == 0, "%s: keel %d '%s', nginx %d '%s'", targets[i],
                  ks, kb, ns, nb);
    }
    kh_stop(k);
}
