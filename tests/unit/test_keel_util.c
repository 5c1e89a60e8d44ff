/* keel/util.h: the helpers modules share (case folding, HTTP lists, words,
 * IP addresses and CIDR blocks, memory that grows, reading a file, free
 * lists, the mutex and once), as a module sees
 * them: the public header alone. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/util.h>

#ifndef _WIN32
#include <unistd.h>
#endif

/* ---- ASCII case ---------------------------------------------------------- */

Test(keel_util, ascii_case_folds_letters_only, .timeout = 10)
{
    cr_assert_eq(keel_ascii_lower('A'), 'a');
    cr_assert_eq(keel_ascii_lower('Z'), 'z');
    cr_assert_eq(keel_ascii_lower('@'), '@'); /* 'A' - 1 */
    cr_assert_eq(keel_ascii_lower('['), '['); /* 'Z' + 1 */
    cr_assert_eq(keel_ascii_lower(0xC4), 0xC4, "bytes >= 0x80 are themselves");
    cr_assert_eq(keel_ascii_casecmp("Content-Length", "content-length"), 0);
    cr_assert_lt(keel_ascii_casecmp("abc", "ABD"), 0);
    cr_assert_gt(keel_ascii_casecmp("abcd", "ABC"), 0);
    cr_assert_lt(keel_ascii_casecmp("", "a"), 0);
    cr_assert_gt(keel_ascii_casecmp("\xe9", "e"), 0, "compared as unsigned char");
    cr_assert_eq(keel_ascii_ncasecmp("BYTES=0-1", "bytes=", 6), 0);
    cr_assert_neq(keel_ascii_ncasecmp("bytes", "bytes=", 6), 0, "stops at a NUL");
    cr_assert_eq(keel_ascii_ncasecmp("ab", "AB", 10), 0, "NUL in both: equal");
    cr_assert(keel_ascii_iequal("Host", 4, "hOST", 4));
    cr_assert(!keel_ascii_iequal("Host", 4, "Hos", 3), "lengths differ");
    cr_assert(!keel_ascii_iequal("Hosu", 4, "host", 4));
    cr_assert(keel_ascii_iequal("a\0b", 3, "A\0B", 3), "NUL is a byte like any other");
    cr_assert(keel_ascii_iequal(NULL, 0, "", 0));
    cr_assert(keel_ascii_iequal_lc("Content-Length", 14, "content-length", 14));
    cr_assert(!keel_ascii_iequal_lc("Content-Length", 14, "Content-Length", 14),
              "the literal is taken as lower case already");
    cr_assert(!keel_ascii_iequal_lc("TE", 2, "tex", 3));
    cr_assert(keel_ascii_iequal_z("Upgrade", 7, "upgrade"));
    cr_assert(!keel_ascii_iequal_z("Upgrade", 6, "upgrade"));
    /* '@' and '`' differ by 0x20 as 'A' and 'a' do: not letters. */
    cr_assert(!keel_ascii_iequal("@", 1, "`", 1));
}

Test(keel_util, hex_digits, .timeout = 10)
{
    cr_assert_eq(keel_hex_value('0'), 0);
    cr_assert_eq(keel_hex_value('9'), 9);
    cr_assert_eq(keel_hex_value('a'), 10);
    cr_assert_eq(keel_hex_value('F'), 15);
    cr_assert_eq(keel_hex_value('g'), -1);
    cr_assert_eq(keel_hex_value('G'), -1);
    cr_assert_eq(keel_hex_value('/'), -1);
    cr_assert_eq(keel_hex_value(':'), -1);
}

/* ---- tokens ------------------------------------------------------------------ */

/* Every byte against RFC 9110 5.6.2's tchar written out as the grammar
 * says, so that the bitmap cannot drift from it. */
Test(keel_util, token_chars_are_the_rfcs, .timeout = 10)
{
    static const char specials[] = "!#$%&'*+-.^_`|~";
    for (int c = -1; c < 256; c++) {
        int want = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                   (c > 0 && strchr(specials, c) != NULL);
        cr_assert_eq(keel_token_char(c), want, "byte %d", c);
    }
}

/* ---- field values ---------------------------------------------------------- */

Test(keel_util, field_value_bytes, .timeout = 10)
{
    cr_assert(keel_field_value_char('\t'));
    cr_assert(keel_field_value_char(' '));
    cr_assert(keel_field_value_char('~'));
    cr_assert(keel_field_value_char(0x80)); /* obs-text */
    cr_assert(keel_field_value_char(0xff));
    cr_assert_not(keel_field_value_char(0));
    cr_assert_not(keel_field_value_char('\r'));
    cr_assert_not(keel_field_value_char('\n'));
    cr_assert_not(keel_field_value_char(0x1f));
    cr_assert_not(keel_field_value_char(0x7f));
    cr_assert_eq(keel_field_value_check("keel/1.0 (x)", 12), 12);
    cr_assert_eq(keel_field_value_check("keel\r\nX: y", 11), 4);
    cr_assert_eq(keel_field_value_check("a\0b", 3), 1);
    cr_assert_eq(keel_field_value_check(NULL, 0), 0);
}

/* ---- memory that grows ------------------------------------------------------ */

Test(keel_util, strndup_copies_exactly_n_bytes_and_a_nul, .timeout = 10)
{
    const char word[3] = {'a', 'b', 'c'}; /* no NUL after it */
    char *d = keel_strndup(word, 2);
    cr_assert_not_null(d);
    cr_assert_str_eq(d, "ab");
    free(d);
    d = keel_strndup("a\0b", 3);
    cr_assert_not_null(d);
    cr_assert(memcmp(d, "a\0b\0", 4) == 0, "a NUL inside is copied like any byte");
    free(d);
    d = keel_strndup(NULL, 0);
    cr_assert_not_null(d, "an empty view copies to an empty string");
    cr_assert_str_eq(d, "");
    free(d);
}

Test(keel_util, strndup_lower_folds_ascii_letters_only, .timeout = 10)
{
    char *d = keel_strndup_lower("Text/HTML; I\xc4", 14);
    cr_assert_not_null(d);
    cr_assert_str_eq(d, "text/html; i\xc4", "bytes >= 0x80 and punctuation kept");
    free(d);
}

Test(keel_util, reserve_doubles_from_first_and_keeps_the_elements, .timeout = 10)
{
    int *v = NULL;
    size_t cap = 0;
    cr_assert_eq(keel_reserve(&v, &cap, 3, sizeof *v, 4), 0);
    cr_assert_not_null(v);
    cr_assert_eq(cap, 4, "an empty array starts at first");
    for (int i = 0; i < 4; i++)
        v[i] = i;
    int *before = v;
    cr_assert_eq(keel_reserve(&v, &cap, 4, sizeof *v, 4), 0);
    cr_assert_eq(v, before, "room enough: nothing moves");
    cr_assert_eq(keel_reserve(&v, &cap, 9, sizeof *v, 4), 0);
    cr_assert_eq(cap, 16, "doubles until need fits");
    for (int i = 0; i < 4; i++)
        cr_assert_eq(v[i], i, "the elements are kept");
    size_t big = cap;
    cr_assert_eq(keel_reserve(&v, &big, (size_t)-1 / 2 + 2, sizeof *v, 4), -1, "overflow refused");
    cr_assert_eq(big, cap, "*cap untouched on failure");
    free(v);
    char *none = NULL;
    size_t none_cap = 0;
    cr_assert_eq(keel_reserve(&none, &none_cap, 1, 1, 0), 0);
    cr_assert_eq(none_cap, 1, "first 0 starts at one element");
    free(none);
}

Test(keel_util, array_add_makes_room_for_one_more, .timeout = 10)
{
    const char **names = NULL;
    size_t n = 0;
    static const char *const words[] = {"a", "b", "c"};
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(keel_array_add(&names, n, sizeof *names), 0);
        names[n++] = words[i];
    }
    for (size_t i = 0; i < 3; i++)
        cr_assert_str_eq(names[i], words[i], "the earlier elements are kept");
    cr_assert_eq(keel_array_add(&names, (size_t)-1, sizeof *names), -1, "overflow refused");
    cr_assert_str_eq(names[2], "c", "the array as it was");
    free(names);
}

Test(keel_util, append_grows_a_buffer_and_keeps_a_nul_after_it, .timeout = 10)
{
    char *b = NULL;
    size_t len = 0, cap = 0;
    cr_assert_eq(keel_append(&b, &len, &cap, "x", 0, 8), 0);
    cr_assert_null(b, "nothing appended, nothing allocated");
    cr_assert_eq(keel_append(&b, &len, &cap, "hello", 5, 8), 0);
    cr_assert_eq(len, 5);
    cr_assert_eq(cap, 8);
    cr_assert_str_eq(b, "hello");
    cr_assert_eq(keel_append(&b, &len, &cap, ", world", 7, 8), 0);
    cr_assert_eq(len, 12);
    cr_assert_eq(cap, 16, "room for the NUL too");
    cr_assert_str_eq(b, "hello, world");
    cr_assert_eq(keel_append(&b, &len, &cap, "!", (size_t)-1 - len, 8), -1, "overflow refused");
    cr_assert_eq(len, 12);
    cr_assert_str_eq(b, "hello, world", "the buffer as it was");
    free(b);
    unsigned char *u = NULL; /* any byte type */
    len = cap = 0;
    cr_assert_eq(keel_append(&u, &len, &cap, "\x82\x86", 2, 0), 0);
    cr_assert_eq(cap, 4, "from one byte, doubled to fit 2 and the NUL");
    cr_assert_eq(u[0], 0x82);
    free(u);
}

/* ---- reading a file at an offset ----------------------------------------------- */

#ifndef _WIN32
Test(keel_util, pread_all_reads_exactly_len_at_off_and_leaves_the_position, .timeout = 10)
{
    FILE *f = tmpfile();
    cr_assert_not_null(f);
    cr_assert_eq(fwrite("0123456789", 1, 10, f), 10);
    cr_assert_eq(fflush(f), 0);
    int fd = fileno(f);
    cr_assert_eq(lseek(fd, 2, SEEK_SET), 2);
    char buf[8] = {0};
    cr_assert_eq(keel_pread_all(fd, buf, 4, 5), 0);
    cr_assert(memcmp(buf, "5678", 4) == 0);
    cr_assert_eq(lseek(fd, 0, SEEK_CUR), 2, "the descriptor's position is left alone");
    cr_assert_eq(keel_pread_all(fd, buf, 4, 8), -1, "the file ends before len bytes");
    cr_assert_eq(keel_pread_all(fd, buf, 0, 100), 0, "nothing asked, nothing read");
    cr_assert_eq(keel_pread_all(-1, buf, 1, 0), -1, "a bad descriptor");
    fclose(f);
}
#endif

/* ---- free lists ---------------------------------------------------------------- */

typedef struct block {
    struct block *link;
    int id;
} block;

static int blocks_freed;
static void block_free(void *p)
{
    blocks_freed++;
    free(p);
}

Test(keel_util, freelist_takes_what_was_given_last_first_and_drains, .timeout = 10)
{
    block *list = NULL, *b;
    unsigned count = 0;
    KEEL_FREELIST_TAKE(b, list, count, link);
    cr_assert_null(b, "an empty list gives nothing");
    cr_assert_eq(count, 0);
    for (int i = 0; i < 3; i++) {
        b = malloc(sizeof *b);
        cr_assert_not_null(b);
        b->id = i;
        KEEL_FREELIST_GIVE(b, list, count, link);
    }
    cr_assert_eq(count, 3);
    KEEL_FREELIST_TAKE(b, list, count, link);
    cr_assert_eq(b->id, 2, "the block given last comes first (still warm in cache)");
    cr_assert_eq(count, 2);
    free(b);
    blocks_freed = 0;
    KEEL_FREELIST_DRAIN(list, count, link, block_free);
    cr_assert_eq(blocks_freed, 2);
    cr_assert_null(list);
    cr_assert_eq(count, 0);
}

/* ---- intrusive lists ------------------------------------------------------- */

typedef struct item {
    struct item *next, *prev;
    int v;
} item;

static int list_values(const item *head, int *out)
{
    int n = 0;
    for (const item *it = head; it != NULL; it = it->next) {
        cr_assert(it->next == NULL || it->next->prev == it, "prev links back");
        out[n++] = it->v;
    }
    return n;
}

Test(keel_util, intrusive_list_push_and_remove_anywhere, .timeout = 10)
{
    item a = {.v = 1, .prev = &a}, b = {.v = 2}, c = {.v = 3};
    item *head = NULL;
    int v[3];
    KEEL_LIST_PUSH(head, &a);
    cr_assert_null(a.prev, "a stale prev is cleared");
    KEEL_LIST_PUSH(head, &b);
    KEEL_LIST_PUSH(head, &c);
    cr_assert_eq(list_values(head, v), 3);
    cr_assert(v[0] == 3 && v[1] == 2 && v[2] == 1);
    KEEL_LIST_REMOVE(head, &b); /* the middle */
    cr_assert_eq(list_values(head, v), 2);
    cr_assert(v[0] == 3 && v[1] == 1);
    KEEL_LIST_REMOVE(head, &c); /* the first */
    cr_assert_eq(head, &a);
    cr_assert_null(a.prev);
    KEEL_LIST_REMOVE(head, &a); /* the last one */
    cr_assert_null(head);
}

typedef struct waiter {
    struct waiter *link;
    int v;
} waiter;

Test(keel_util, queue_append_keeps_the_order_of_arrival, .timeout = 10)
{
    waiter a = {.v = 1}, b = {.v = 2, .link = &a}, c = {.v = 3};
    waiter *head = NULL, *tail = NULL;
    KEEL_QUEUE_APPEND(head, tail, &a, link);
    cr_assert(head == &a && tail == &a, "the first is both ends");
    KEEL_QUEUE_APPEND(head, tail, &b, link);
    cr_assert_null(b.link, "a stale link is cleared");
    KEEL_QUEUE_APPEND(head, tail, &c, link);
    int v[3], n = 0;
    for (const waiter *w = head; w != NULL; w = w->link)
        v[n++] = w->v;
    cr_assert_eq(n, 3);
    cr_assert(v[0] == 1 && v[1] == 2 && v[2] == 3);
    cr_assert_eq(tail, &c);
    /* Emptied by the taker (head and tail NULL), it starts again. */
    head = tail = NULL;
    KEEL_QUEUE_APPEND(head, tail, &b, link);
    cr_assert(head == &b && tail == &b && b.link == NULL);
}

/* ---- lists ---------------------------------------------------------------- */

static size_t elements(const char *list, const char **out, size_t *lens, size_t max)
{
    const char *at = list, *e = NULL;
    size_t n = 0, len = 0;
    while (n < max && keel_list_next(&at, list + strlen(list), &e, &len)) {
        out[n] = e;
        lens[n++] = len;
    }
    return n;
}

Test(keel_util, list_elements_skip_empty_ones_and_ows, .timeout = 10)
{
    const char *e[8];
    size_t len[8];
    /* RFC 9110 5.6.1's examples of what a recipient accepts. */
    size_t n = elements(" , foo ,,\tbar,  ,", e, len, 8);
    cr_assert_eq(n, 2);
    cr_assert(len[0] == 3 && memcmp(e[0], "foo", 3) == 0);
    cr_assert(len[1] == 3 && memcmp(e[1], "bar", 3) == 0);
    cr_assert_eq(elements("", e, len, 8), 0);
    cr_assert_eq(elements(" ,\t, ", e, len, 8), 0);
    n = elements("gzip;q=1.0 , br ; q=0.5", e, len, 8);
    cr_assert_eq(n, 2);
    cr_assert(len[1] == 10 && memcmp(e[1], "br ; q=0.5", 10) == 0, "parameters stay");
}

Test(keel_util, list_commas_inside_quotes_do_not_split, .timeout = 10)
{
    const char *e[8];
    size_t len[8];
    size_t n = elements("a;p=\"x,y\", b;p=\"q\\\",z\", c", e, len, 8);
    cr_assert_eq(n, 3, "%zu elements", n);
    cr_assert(len[0] == 9 && memcmp(e[0], "a;p=\"x,y\"", 9) == 0);
    cr_assert(len[1] == 11 && memcmp(e[1], "b;p=\"q\\\",z\"", 11) == 0);
    cr_assert(len[2] == 1 && e[2][0] == 'c');
}

Test(keel_util, list_has_tokens, .timeout = 10)
{
    const char *c = "keep-alive, Upgrade";
    cr_assert(keel_list_has(c, strlen(c), "upgrade"));
    cr_assert(keel_list_has(c, strlen(c), "KEEP-ALIVE"));
    cr_assert(!keel_list_has(c, strlen(c), "close"));
    cr_assert(!keel_list_has(c, strlen(c), "keep"), "a prefix is not the token");
    cr_assert(!keel_list_has(c, strlen(c), "alive"));
    const char *ae = "deflate;q=0.5, gzip ;q=0";
    cr_assert(keel_list_has(ae, strlen(ae), "gzip"), "parameters aside");
    cr_assert(keel_list_has(ae, strlen(ae), "deflate"));
    cr_assert(!keel_list_has(ae, strlen(ae), "q=0"));
    cr_assert(!keel_list_has("", 0, "close"));
    cr_assert(!keel_list_has(NULL, 0, "close"));
    cr_assert(keel_list_has("close", 5, "close"));
    cr_assert(!keel_list_has("closed", 6, "close"));
    /* A view, not a string: what follows len is not read. */
    cr_assert(!keel_list_has("a, close", 4, "close"));
    cr_assert_eq(keel_list_token_length("gzip ; q=1", 10), 4);
}

/* ---- words ---------------------------------------------------------------- */

Test(keel_util, words_split_on_blanks_and_optionally_commas, .timeout = 10)
{
    const char *s = "  http1\tstatic,stats ,, x ";
    const char *at = s, *end = s + strlen(s), *w = NULL;
    size_t len = 0;
    const char *want_commas[] = {"http1", "static", "stats", "x"};
    for (size_t i = 0; i < 4; i++) {
        cr_assert(keel_word_next(&at, end, 1, &w, &len));
        cr_assert(len == strlen(want_commas[i]) && memcmp(w, want_commas[i], len) == 0,
                  "word %zu: %.*s", i, (int)len, w);
    }
    cr_assert(!keel_word_next(&at, end, 1, &w, &len));
    cr_assert(!keel_word_next(&at, end, 1, &w, &len), "stays at the end");

    at = s;
    const char *want_blanks[] = {"http1", "static,stats", ",,", "x"};
    for (size_t i = 0; i < 4; i++) {
        cr_assert(keel_word_next(&at, end, 0, &w, &len));
        cr_assert(len == strlen(want_blanks[i]) && memcmp(w, want_blanks[i], len) == 0,
                  "word %zu: %.*s", i, (int)len, w);
    }
    cr_assert(!keel_word_next(&at, end, 0, &w, &len));
    at = "";
    cr_assert(!keel_word_next(&at, at, 1, &w, &len));
}

Test(keel_util, onoff_takes_the_config_words_as_written, .timeout = 10)
{
    const char *on[] = {"on", "yes", "true", "1"}, *off[] = {"off", "no", "false", "0"};
    for (size_t i = 0; i < 4; i++) {
        int v = -1;
        cr_assert(keel_onoff_parse_z(on[i], &v) == 0 && v == 1, "%s", on[i]);
        cr_assert(keel_onoff_parse_z(off[i], &v) == 0 && v == 0, "%s", off[i]);
    }
    const char *other[] = {"", "ON", "onn", "2", "enabled"};
    for (size_t i = 0; i < 5; i++) {
        int v = 7;
        cr_assert(keel_onoff_parse_z(other[i], &v) == -1 && v == 7, "'%s'", other[i]);
    }
}

Test(keel_util, words_join_with_a_separator_while_they_fit, .timeout = 10)
{
    char buf[16];
    cr_assert_str_eq(keel_words_join(" GET,POST  PUT ", 1, ", ", buf, sizeof buf),
                     "GET, POST, PUT");
    char wide[32];
    cr_assert_str_eq(keel_words_join("max-age=1 preload", 0, "; ", wide, sizeof wide),
                     "max-age=1; preload");
    /* "aaaa, bbbb, cccc" needs 17 bytes: the third word is left out. */
    cr_assert_str_eq(keel_words_join("aaaa bbbb cccc", 1, ", ", buf, sizeof buf), "aaaa, bbbb");
    cr_assert_str_eq(keel_words_join("", 1, ", ", buf, sizeof buf), "");
}

/* ---- IP addresses and CIDR blocks ----------------------------------------- */

static int parses(const char *s, keel_ip *out)
{
    return keel_ip_parse(s, strlen(s), out);
}

Test(keel_util, ip_addresses, .timeout = 10)
{
    static const char *good[] = {"127.0.0.1",
                                 "0.0.0.0",
                                 "255.255.255.255",
                                 "::",
                                 "::1",
                                 "1::",
                                 "fe80::1:2",
                                 "2001:db8:0:0:0:0:0:1",
                                 "2001:DB8::A",
                                 "::ffff:10.1.2.3",
                                 "64:ff9b::192.0.2.33"};
    static const char *bad[] = {"",
                                "1.2.3",
                                "1.2.3.4.5",
                                "256.1.1.1",
                                "01.2.3.4",
                                "0177.0.0.1",
                                "1.2.3.4 ",
                                " 1.2.3.4",
                                "1.2.3.-4",
                                "[::1]",
                                "1.2.3.4:80",
                                ":",
                                ":1",
                                "1:",
                                "1::2::3",
                                "12345::",
                                "g::1",
                                "1:2:3:4:5:6:7:8:9",
                                "1:2:3:4:5:6:7:1.2.3.4",
                                "1:2:3:4:5:6:7::8",
                                "::1.2.3",
                                "::1.2.3.4.5"};
    keel_ip a;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        cr_assert(parses(good[i], &a), "refused %s", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert(!parses(bad[i], &a), "took %s", bad[i]);
    cr_assert(!keel_ip_parse(NULL, 0, &a));

    cr_assert(parses("2001:db8::1", &a));
    static const unsigned char v6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 1};
    cr_assert(memcmp(a.bytes, v6, 16) == 0);
    cr_assert(!keel_ip_is_v4(&a));

    cr_assert(parses("192.0.2.1", &a));
    static const unsigned char v4[16] = {[10] = 0xff, [11] = 0xff, 192, 0, 2, 1};
    cr_assert(memcmp(a.bytes, v4, 16) == 0, "IPv4 is held IPv4-mapped");
    cr_assert(keel_ip_is_v4(&a));
    keel_ip m;
    cr_assert(parses("::ffff:192.0.2.1", &m));
    cr_assert(memcmp(a.bytes, m.bytes, 16) == 0, "the v4-mapped form is the same address");

    cr_assert(parses("1:2:3:4:5:6:7:8", &a));
    cr_assert(a.bytes[0] == 0 && a.bytes[1] == 1 && a.bytes[14] == 0 && a.bytes[15] == 8);
    cr_assert(parses("1::8", &a));
    cr_assert(a.bytes[1] == 1 && a.bytes[15] == 8 && a.bytes[2] == 0 && a.bytes[13] == 0);

    /* A view: only len bytes count. */
    cr_assert(keel_ip_parse("10.0.0.1:8080", 8, &a));
    cr_assert(a.bytes[12] == 10 && a.bytes[15] == 1);
}

static int in_block(const char *block, const char *ip)
{
    keel_cidr c;
    keel_ip a;
    cr_assert(keel_cidr_parse(block, strlen(block), &c), "block %s", block);
    cr_assert(parses(ip, &a), "address %s", ip);
    return keel_cidr_match(&c, &a);
}

Test(keel_util, cidr_blocks, .timeout = 10)
{
    cr_assert(in_block("10.0.0.0/8", "10.200.3.4"));
    cr_assert(!in_block("10.0.0.0/8", "11.0.0.1"));
    cr_assert(in_block("10.0.0.0/8", "::ffff:10.9.9.9"), "v4-mapped matches an IPv4 block");
    cr_assert(in_block("192.168.1.128/25", "192.168.1.200"));
    cr_assert(!in_block("192.168.1.128/25", "192.168.1.127"));
    cr_assert(in_block("192.168.1.77/24", "192.168.1.1"), "host bits are ignored");
    cr_assert(in_block("127.0.0.1", "127.0.0.1"), "an address is a block of one");
    cr_assert(!in_block("127.0.0.1", "127.0.0.2"));
    cr_assert(in_block("0.0.0.0/0", "203.0.113.9"));
    cr_assert(!in_block("0.0.0.0/0", "2001:db8::1"), "an IPv4 block holds no IPv6 address");
    cr_assert(in_block("::/0", "2001:db8::1"));
    cr_assert(in_block("::/0", "10.0.0.1"), "::/0 is every address");
    cr_assert(in_block("2001:db8::/32", "2001:db8:ffff::1"));
    cr_assert(!in_block("2001:db8::/32", "2001:db9::1"));
    cr_assert(in_block("fe80::/10", "febf::1"));
    cr_assert(!in_block("fe80::/10", "fec0::1"));
    cr_assert(in_block("::1/128", "::1"));
    cr_assert(in_block("::ffff:0:0/96", "1.2.3.4"), "the mapped prefix counts IPv6 bits");

    keel_cidr c;
    static const char *bad[] = {
        "10.0.0.0/33", "::/129",        "10.0.0.0/", "10.0.0.0/a", "10.0.0.0/8/",
        "10.0.0.0/-1", "10.0.0.0/0008", "host/8",    "/8",         ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert(!keel_cidr_parse(bad[i], strlen(bad[i]), &c), "took %s", bad[i]);
    cr_assert(keel_cidr_parse("10.0.0.0/8", 10, &c) && c.bits == 104);
    cr_assert(keel_cidr_parse("2001:db8::/32", 13, &c) && c.bits == 32);
}

/* ---- mutex and once --------------------------------------------------------- */

static keel_mutex counter_lock = KEEL_MUTEX_INIT;
static long counter;
static keel_once once = KEEL_ONCE_INIT;
static int once_runs;

static void count_once(void)
{
    once_runs++;
}

static void hammer(void)
{
    for (int i = 0; i < 100000; i++) {
        keel_once_run(&once, count_once);
        keel_mutex_lock(&counter_lock);
        counter++;
        keel_mutex_unlock(&counter_lock);
    }
}

#if defined(_WIN32)
static DWORD WINAPI hammer_thread(LPVOID arg)
{
    (void)arg;
    hammer();
    return 0;
}

static void run_threads(int n)
{
    HANDLE t[8];
    for (int i = 0; i < n; i++)
        cr_assert((t[i] = CreateThread(NULL, 0, hammer_thread, NULL, 0, NULL)) != NULL);
    for (int i = 0; i < n; i++) {
        WaitForSingleObject(t[i], INFINITE);
        CloseHandle(t[i]);
    }
}
#else
#include <pthread.h>

static void *hammer_thread(void *arg)
{
    (void)arg;
    hammer();
    return NULL;
}

static void run_threads(int n)
{
    pthread_t t[8];
    for (int i = 0; i < n; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, hammer_thread, NULL), 0);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}
#endif

Test(keel_util, mutex_and_once_across_threads, .timeout = 30)
{
    run_threads(4);
    cr_assert_eq(counter, 400000, "lost increments: %ld", counter);
    cr_assert_eq(once_runs, 1);
}

/* Free lists hand blocks out again at once; sanitized builds free them
 * instead, so the macro must see the sanitizer of either compiler. */
Test(keel_util, address_sanitized_follows_the_build, .timeout = 10)
{
#if defined(__SANITIZE_ADDRESS__)
    cr_assert_eq(KEEL_ADDRESS_SANITIZED, 1);
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    cr_assert_eq(KEEL_ADDRESS_SANITIZED, 1);
#else
    cr_assert_eq(KEEL_ADDRESS_SANITIZED, 0);
#endif
#else
    cr_assert_eq(KEEL_ADDRESS_SANITIZED, 0);
#endif
}
