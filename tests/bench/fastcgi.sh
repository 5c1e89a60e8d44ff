#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# tests/bench/fastcgi.sh — the FastCGI scenario of run.sh: keel's proxy to a
# `fastcgi` group against nginx's fastcgi_pass, both in front of the same
# PHP-FPM pool. Sourced by run.sh; runnable alone (then TESTS defaults to
# its group, "fastcgi"):
#
#   DURATION=5 WARMUP=1 ROUNDS=3 tests/bench/fastcgi.sh
#
# The application: the distribution's php-fpm (pm = static, FCGI_CHILDREN
# children, on CLIENT_CPU with wrk), one pool on 127.0.0.1, serving
# small.php ("hello from php\n", 15 bytes). The proxies in front of it, in
# turn, each with one worker pinned to SERVER_CPU and kept connections to
# the pool:
#   keel   http1 + proxy: upstream = php fastcgi 127.0.0.1:UP,
#          pass = / php root=DIR, keepalive = FCGI_CONNS, keepalive_timeout = 1s
#   nginx  fastcgi_pass php; upstream php { keepalive FCGI_CONNS;
#          keepalive_timeout 1s; },
#          fastcgi_keep_conn on; include fastcgi_params; SCRIPT_FILENAME
#          $document_root$fastcgi_script_name (nginx's fastcgi.conf)
# Tests: fcgismall  wrk -t1 -c FCGI_CONNS GET /small.php (keep-alive); fcgisyscalls,
# fcgiinstr: the proxy's system calls (perf) and user instructions (callgrind) a
# request, counts that PHP-FPM sharing the other core cannot blur.
# A PHP-FPM child serves one connection until it closes, so a kept
# connection holds a child: each proxy keeps at most FCGI_CONNS (half the
# children), and for 1 s only, so that the one whose turn is over does not
# starve the next (the warm-up outlasts it).
# Reported: requests/s, p99 latency and requests per second of the
# proxy's CPU time (utime + stime from /proc/PID/stat over the run): PHP
# costs far more than either proxy and shares the other core with wrk, so
# requests/s says little about the proxy; its CPU-seconds do.
# Settings (defaults in brackets): FCGI_CONNS [4] FCGI_CHILDREN [8].
# Ports BASE_PORT + 500 (php-fpm), + 501..502 (the proxies): 19580..19582.
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FCGI_CONNS=${FCGI_CONNS:-4}
FCGI_CHILDREN=${FCGI_CHILDREN:-8}

bench_scenario fastcgi "fcgismall fcgisyscalls fcgiinstr" "keel nginx" 501

FCGI_DIR=$TMP/fastcgi
FCGI_UP_PORT=$((BASE_PORT + 500))

fastcgi_settings() {
    printf '%s\n' "FCGI_CONNS=$FCGI_CONNS" "FCGI_CHILDREN=$FCGI_CHILDREN"
}

fastcgi_fpm() {
    local f
    f=$(command -v php-fpm 2>/dev/null || true)
    [[ -n $f ]] || f=$(compgen -G "/usr/sbin/php-fpm*" | sort | tail -1 || true)
    echo "$f"
}

fastcgi_needs() {
    [[ -n $(fastcgi_fpm) ]] || NEED_PKGS+=(php-fpm)
    need_servers fastcgi
}

fastcgi_versions() {
    echo "php-fpm $("$(fastcgi_fpm)" -v 2>/dev/null | head -1 | cut -d' ' -f2)"
}

# ---- The application ------------------------------------------------------------

fastcgi_start_fpm() {
    port_busy "$FCGI_UP_PORT" && die "port $FCGI_UP_PORT (for php-fpm) is in use; set BASE_PORT"
    mkdir -p "$FCGI_DIR/www"
    printf '<?php\necho "hello from php\\n";\n' >"$FCGI_DIR/www/small.php"
    local user=""
    [[ $(id -u) -eq 0 ]] && user=$'user = root\ngroup = root'
    cat >"$FCGI_DIR/php-fpm.conf" <<CONF
[global]
pid = $FCGI_DIR/fpm.pid
error_log = $FCGI_DIR/fpm.log
daemonize = no
[bench]
listen = 127.0.0.1:$FCGI_UP_PORT
listen.backlog = 4096
pm = static
pm.max_children = $FCGI_CHILDREN
pm.max_requests = 0
$user
CONF
    local root=()
    [[ $(id -u) -eq 0 ]] && root=(-R)
    # On CLIENT_CPU, with wrk: the server's core is the proxy's alone.
    SERVER_CPU=$CLIENT_CPU spawn fastcgi.fpm "$FCGI_DIR/fpm.out" "$(fastcgi_fpm)" -n -F \
        -y "$FCGI_DIR/php-fpm.conf" "${root[@]}"
    wait_port "$FCGI_UP_PORT" || die "php-fpm does not listen on $FCGI_UP_PORT"
}

# ---- The proxies --------------------------------------------------------------------

fastcgi_start_keel() {
    keel_conf "$FCGI_DIR/keel.conf" "$1" "http1 proxy" "[proxy]
upstream = php fastcgi 127.0.0.1:$FCGI_UP_PORT
pass = / php root=$FCGI_DIR/www
keepalive = $FCGI_CONNS
keepalive_timeout = 1s"
    spawn fastcgi.keel "$FCGI_DIR/keel.log" "$KEEL_BUILD/keel" -c "$FCGI_DIR/keel.conf"
}

fastcgi_start_nginx() {
    # shellcheck disable=SC2016 # $document_root and the others are nginx's
    nginx_conf "$FCGI_DIR/nginx" "$1" "    fastcgi_temp_path $FCGI_DIR/nginx/temp;
    upstream php {
        server 127.0.0.1:$FCGI_UP_PORT;
        keepalive $FCGI_CONNS;
        keepalive_timeout 1s;
    }" "        root $FCGI_DIR/www;
        location ~ \\.php(/|\$) {
            fastcgi_split_path_info ^(.+\\.php)(/.*)\$;
            fastcgi_pass php;
            fastcgi_keep_conn on;
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
            fastcgi_param PATH_INFO \$fastcgi_path_info;
        }"
    spawn_nginx fastcgi.nginx "$FCGI_DIR/nginx"
}

is_php_hello() { [[ $1 == "hello from php" ]]; }

fastcgi_check() {
    check_up "fastcgi.$1" "http://127.0.0.1:$(port_of fastcgi "$1")/small.php" is_php_hello \
        "hello from php" "$FCGI_DIR"
}

# ---- Measurements ----------------------------------------------------------------

fastcgi_wrk() {
    wrk_record fastcgi "$1" "$2" "$3" "$4" "http://127.0.0.1:$(port_of fastcgi "$1")/small.php" \
        "$FCGI_CONNS" plain 0 1 req
}

fastcgi_run() {
    mkdir -p "$FCGI_DIR"
    chmod 755 "$TMP" "$FCGI_DIR" # nginx's workers run as nobody
    if [[ " $(servers_of fastcgi) " == *" keel "* ]]; then ensure_keel http1 proxy; fi
    fastcgi_start_fpm
    start_all fastcgi
    if wants fcgismall; then take_turns fastcgi fcgismall fastcgi_wrk; fi
    # The proxy's own system calls and user instructions a request (perf,
    # callgrind): counts, where PHP-FPM on the other core makes the rates
    # wobble.
    run_counts fastcgi /small.php fcgisyscalls fcgiinstr
    stop_server fastcgi.fpm
}

# ---- Report ------------------------------------------------------------------------

fastcgi_report() {
    echo
    echo "### FastCGI (keel: http1 + proxy; PHP-FPM, $FCGI_CHILDREN children, on the client's CPU, $FCGI_CONNS kept connections)"
    report_tables fastcgi "fcgismall|fcgismall/val|%.0f|req/s|0" \
        "fcgismall|fcgismall/p99|%.2f|p99 ms|0" "fcgismall|fcgismall/cpu|%.0f|req/CPU-s|1" \
        "fcgisyscalls|syscalls/n|%.2f|syscalls/req|1" "fcgiinstr|instr/n|%.0f|user instr/req|1"
    wrk_notes fastcgi fcgismall
    echo
    echo "Ratios on requests per second of the proxy's own CPU time (PHP-FPM and wrk share the other core and bound req/s); above 1.00× keel is ahead."
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    bench_alone fastcgi.sh fastcgi "keel nginx"
fi
