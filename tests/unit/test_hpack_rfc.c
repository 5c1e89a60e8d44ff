/* The h2 module's HPACK decoder on the examples of RFC 7541 Appendix C:
 * single representations (C.2), three requests on one connection without
 * and with Huffman coding (C.3, C.4), three responses through a 256-byte
 * table (C.5, C.6), the dynamic table checked after each block. The
 * vectors are the RFC's hex dumps, as printed there. */
#include <criterion/criterion.h>

#include "hpack_harness.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- C.2: single representations -------------------------------------------------- */

/* One block on a fresh decoder (limit 4096) emits one field; the table
 * then holds that field (with indexing) or nothing (without indexing,
 * never indexed, indexed). */
static void single_representation(const char *hex, field want, int indexed, size_t table_size)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    cr_assert_eq(decode_hex(&d, &s, hex, &f), 0);
    expect_fields(&f, &want, 1);
    expect_table(&d, &s, indexed ? &want : NULL, indexed ? 1 : 0, table_size);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

Test(hpack_rfc, c2_1_literal_with_indexing, .timeout = 60)
{
    single_representation("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
                          (field){"custom-key", "custom-header"}, 1, 55);
}

Test(hpack_rfc, c2_2_literal_without_indexing, .timeout = 60)
{
    single_representation("040c 2f73 616d 706c 652f 7061 7468", (field){":path", "/sample/path"}, 0,
                          0);
}

Test(hpack_rfc, c2_3_literal_never_indexed, .timeout = 60)
{
    single_representation("1008 7061 7373 776f 7264 0673 6563 7265 74",
                          (field){"password", "secret"}, 0, 0);
}

Test(hpack_rfc, c2_4_indexed, .timeout = 60)
{
    single_representation("82", (field){":method", "GET"}, 0, 0);
}

/* ---- C.3 / C.4: three requests on one connection ------------------------------------ */

static const field req1[] = {
    {":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "www.example.com"}};
static const field req2[] = {{":method", "GET"},
                             {":scheme", "http"},
                             {":path", "/"},
                             {":authority", "www.example.com"},
                             {"cache-control", "no-cache"}};
static const field req3[] = {{":method", "GET"},
                             {":scheme", "https"},
                             {":path", "/index.html"},
                             {":authority", "www.example.com"},
                             {"custom-key", "custom-value"}};
static const field req_table1[] = {{":authority", "www.example.com"}};
static const field req_table2[] = {{"cache-control", "no-cache"},
                                   {":authority", "www.example.com"}};
static const field req_table3[] = {{"custom-key", "custom-value"},
                                   {"cache-control", "no-cache"},
                                   {":authority", "www.example.com"}};

static void three_requests(const char *hex1, const char *hex2, const char *hex3)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    cr_assert_eq(decode_hex(&d, &s, hex1, &f), 0);
    expect_fields(&f, req1, 4);
    expect_table(&d, &s, req_table1, 1, 57);
    cr_assert_eq(decode_hex(&d, &s, hex2, &f), 0);
    expect_fields(&f, req2, 5);
    expect_table(&d, &s, req_table2, 2, 110);
    cr_assert_eq(decode_hex(&d, &s, hex3, &f), 0);
    expect_fields(&f, req3, 5);
    expect_table(&d, &s, req_table3, 3, 164);
    /* Past the newest three entries there is none (2.3.3). */
    cr_assert_eq(decode_hex(&d, &s, "c1", &f), H2_HPACK_ERROR);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

Test(hpack_rfc, c3_requests_without_huffman, .timeout = 60)
{
    three_requests("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                   "8286 84be 5808 6e6f 2d63 6163 6865",
                   "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65");
}

Test(hpack_rfc, c4_requests_with_huffman, .timeout = 60)
{
    three_requests("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff", "8286 84be 5886 a8eb 1064 9cbf",
                   "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf");
}

/* ---- C.5 / C.6: three responses, a 256-byte table ------------------------------------ */

static const field resp1[] = {{":status", "302"},
                              {"cache-control", "private"},
                              {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                              {"location", "https://www.example.com"}};
static const field resp2[] = {{":status", "307"},
                              {"cache-control", "private"},
                              {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                              {"location", "https://www.example.com"}};
static const field resp3[] = {
    {":status", "200"},
    {"cache-control", "private"},
    {"date", "Mon, 21 Oct 2013 20:13:22 GMT"},
    {"location", "https://www.example.com"},
    {"content-encoding", "gzip"},
    {"set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"}};
static const field resp_table1[] = {{"location", "https://www.example.com"},
                                    {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                                    {"cache-control", "private"},
                                    {":status", "302"}};
static const field resp_table2[] = {{":status", "307"},
                                    {"location", "https://www.example.com"},
                                    {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                                    {"cache-control", "private"}};
static const field resp_table3[] = {
    {"set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"},
    {"content-encoding", "gzip"},
    {"date", "Mon, 21 Oct 2013 20:13:22 GMT"}};

/* The decoder is the same for responses. The examples assume
 * SETTINGS_HEADER_TABLE_SIZE = 256; an encoder says so with a size update
 * at the start of its first block (4.2, 6.3: 001 11111, 225), which is
 * prepended here: without it the table would hold 4,096 bytes and nothing
 * would be evicted. */
static void three_responses(const char *hex1, const char *hex2, const char *hex3)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    char first[1024];
    snprintf(first, sizeof first, "3fe101 %s", hex1);
    h2_hpack_init(&d, 256);
    cr_assert_eq(decode_hex(&d, &s, first, &f), 0);
    cr_assert_eq(d.max, 256);
    expect_fields(&f, resp1, 4);
    expect_table(&d, &s, resp_table1, 4, 222);
    /* :status: 302 is evicted to make room for :status: 307. */
    cr_assert_eq(decode_hex(&d, &s, hex2, &f), 0);
    expect_fields(&f, resp2, 4);
    expect_table(&d, &s, resp_table2, 4, 222);
    /* Several entries are evicted while this block is decoded. */
    cr_assert_eq(decode_hex(&d, &s, hex3, &f), 0);
    expect_fields(&f, resp3, 6);
    expect_table(&d, &s, resp_table3, 3, 215);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

Test(hpack_rfc, c5_responses_without_huffman, .timeout = 60)
{
    three_responses("4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 "
                    "3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 "
                    "7861 6d70 6c65 2e63 6f6d",
                    "4803 3330 37c1 c0bf",
                    "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 "
                    "474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 "
                    "454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 "
                    "6572 7369 6f6e 3d31");
}

Test(hpack_rfc, c6_responses_with_huffman, .timeout = 60)
{
    three_responses("4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 "
                    "82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
                    "4883 640e ffc1 c0bf",
                    "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b "
                    "d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 "
                    "0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07");
}
