/* The keel executable: command line, embedded default config, run.
 * It is an ordinary embedding program (see keel/embed.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/embed.h>

#include "server/server.h"

/* What `keel` runs without -c: HTTP on 127.0.0.1:8080 with the welcome
 * page and the docs from keel's shipped docroot (share/keel/www, found
 * beside the executable in a build tree or relative to an install's bin/:
 * keel_server_data_dir), and the stats dashboard at /__stats/. The
 * docroot's path is absolute, so %s is filled in at run time; quoted, so a
 * path with blanks stays one word. */
static const char default_config_format[] = "[keel]\n"
                                            "listen = 127.0.0.1:8080 http1\n"
                                            "workers = auto\n"
                                            "modules = http1 static stats\n"
                                            "\n"
                                            "[static]\n"
                                            "mount = / \"%s/www\"\n"
                                            "mount = /docs \"%s/www/docs\" listing=on\n"
                                            "type = .md text/plain\n";

/* The default config for this executable, or NULL (out of memory). */
static char *default_config(keel_server *server)
{
    const char *data = keel_server_data_dir(server);
    size_t size = sizeof default_config_format + 2 * strlen(data);
    char *text = malloc(size);
    if (text != NULL)
        snprintf(text, size, default_config_format, data, data);
    return text;
}

static void usage(FILE *out)
{
    fputs("usage: keel [-c FILE] [-t | -s reload|reopen|stop] [--set SECTION.KEY=VALUE]...\n"
          "\n"
          "  -c, --config FILE   run with this config (default: the embedded one)\n"
          "  -t, --test          check the config and the modules it loads, then exit\n"
          "  -s reload|reopen|stop\n"
          "                      signal the keel running with this config (found by its\n"
          "                      [keel] pid_file): reload it, reopen its log files (after\n"
          "                      a rotation), or stop it gracefully\n"
          "  --set S.K=V         override a config value (repeatable), e.g.\n"
          "                      --set keel.listen='127.0.0.1:0 echo' --set keel.workers=2\n"
          "  --print-default     print the embedded default config and exit\n"
          "  --help-module NAME  print the config keys module NAME declares and exit\n"
          "                      (with --markdown: its page in docs/reference/)\n"
          "  -v, --version       print the version and exit\n"
          "  -h, --help          print this help and exit\n"
          "\n"
          "Stop with SIGINT or SIGTERM (Ctrl-C): keel stops accepting, lets work in\n"
          "flight finish up to [keel] shutdown_timeout, and exits 0. Reload with\n"
          "SIGHUP (not on Windows): a new keel with the same arguments takes over the\n"
          "listening sockets, then this one drains and exits; if the new one fails,\n"
          "this one serves on. SIGUSR1 (not on Windows) reopens the log files.\n",
          out);
}

int main(int argc, char **argv)
{
    const char *config_path = NULL;
    const char *control = NULL;
    int test_only = 0;
    const char *help_module = NULL;
    int markdown = 0;
    keel_server *server = keel_server_new();
    if (server == NULL) {
        fputs("keel: out of memory\n", stderr);
        return 1;
    }
    int rc = KEEL_OK;
    for (int i = 1; i < argc && rc == KEEL_OK; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(stdout);
            keel_server_free(server);
            return 0;
        } else if (strcmp(arg, "-v") == 0 || strcmp(arg, "--version") == 0) {
            printf("keel %s (ABI %d.%d)\n", keel_version(), KEEL_ABI_MAJOR, KEEL_ABI_MINOR);
            keel_server_free(server);
            return 0;
        } else if (strcmp(arg, "--print-default") == 0) {
            char *text = default_config(server);
            if (text != NULL)
                fputs(text, stdout);
            free(text);
            keel_server_free(server);
            return text != NULL ? 0 : 1;
        } else if (strcmp(arg, "-t") == 0 || strcmp(arg, "--test") == 0) {
            test_only = 1;
        } else if (strcmp(arg, "--help-module") == 0 && i + 1 < argc) {
            help_module = argv[++i];
        } else if (strcmp(arg, "--markdown") == 0) {
            markdown = 1;
        } else if ((strcmp(arg, "-s") == 0 || strcmp(arg, "--signal") == 0) && i + 1 < argc) {
            control = argv[++i];
        } else if ((strcmp(arg, "-c") == 0 || strcmp(arg, "--config") == 0) && i + 1 < argc) {
            config_path = argv[++i];
        } else if (strcmp(arg, "--set") == 0 && i + 1 < argc) {
            rc = kl_server_set_from(server, argv[++i], "--set");
        } else if (strncmp(arg, "--set=", 6) == 0) {
            rc = kl_server_set_from(server, arg + 6, "--set");
        } else {
            fprintf(stderr, "keel: unknown or incomplete option '%s'\n", arg);
            usage(stderr);
            rc = KEEL_ERR_INVAL;
        }
    }
    if (rc == KEEL_OK && config_path != NULL) {
        rc = keel_server_load_config_file(server, config_path);
    } else if (rc == KEEL_OK) {
        char *text = default_config(server);
        rc = text ? keel_server_load_config_string(server, text, "(default)") : KEEL_ERR_NOMEM;
        free(text);
    }
    if (rc == KEEL_OK && help_module != NULL) {
        rc = keel_server_describe_module(server, help_module, markdown, stdout);
    } else if (rc == KEEL_OK && control != NULL) {
        /* A reload is checked here first, fully, as -t does: the running
         * keel would refuse a bad config only in its own log, and this
         * command would have said nothing. */
        if (strcmp(control, "reload") == 0 && (rc = keel_server_check(server)) != KEEL_OK)
            fprintf(stderr, "keel: reload not sent: %s does not pass the check (above)\n",
                    config_path ? config_path : "the config");
        else
            rc = keel_server_control(server, control);
        if (rc == KEEL_ERR_INVAL)
            fprintf(stderr, "keel: -s takes reload, reopen or stop, not '%s'\n", control);
    } else if (rc == KEEL_OK && test_only) {
        rc = keel_server_check(server);
        if (rc == KEEL_OK)
            keel_log(NULL, KEEL_LOG_INFO, "configuration ok: %s",
                     config_path ? config_path : "(default)");
    } else if (rc == KEEL_OK) {
        /* SIGHUP: a new keel with these same arguments takes over
         * (docs/operations.md); not on Windows, where it does nothing. */
        int reload = keel_server_enable_reload(server, argv);
        if (reload != KEEL_OK && reload != KEEL_ERR_UNSUPPORTED)
            rc = reload;
        else
            rc = keel_server_run(server);
    }
    keel_server_free(server);
    return rc == KEEL_OK ? 0 : 1;
}
