/* The calibration cache format and the statistics behind the figures: a
 * file round-trips, every kind of damage is refused (never trusted), the
 * robust mean drops outliers, and the fit recovers a known fixed cost and
 * rate. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "calibration.h"
#include "test_util.h"

static const char *const key = "locus=0.1.0 host=h device=cpu name=x";

static locus__rates sample_rates(void)
{
    return (locus__rates){
        .launch_seconds = 4.5e-6,
        .gemm_fixed_seconds = 2e-5,
        .gemm_flops = 1.4e11 * test_rng_uniform(0.5, 2),
        .conv_fixed_seconds = 0,
        .conv_flops = 9.1e10,
        .reduce_bytes = 2.8e10,
        .upload_pageable_bytes = 0,
        .upload_pinned_bytes = 0,
        .download_bytes = 1.2e10,
        .transfer_seconds = 7e-6,
        .download_pinned_bytes = 0,
        .wake_seconds = 1.2e-4 * test_rng_uniform(0.5, 2),
        .conv_filter_bytes = 1.9e9 * test_rng_uniform(0.5, 2),
        .shallow_wake_seconds = 3e-5 * test_rng_uniform(0.5, 2),
    };
}

static size_t format(const locus__rates *rates, char *text, size_t size)
{
    size_t length = locus__calibration_format(rates, key, text, size);
    TEST_EXPECT(length < size, "formatted length %zu", length);
    return length;
}

static void test_round_trip(void)
{
    locus__rates rates = sample_rates(), back;
    memset(&back, 0xff, sizeof back);
    char text[4096];
    size_t length = format(&rates, text, sizeof text);
    TEST_OK(locus__calibration_parse(text, length, key, &back));
    TEST_EXPECT(memcmp(&rates, &back, sizeof rates) == 0,
                "parsed rates differ from those written");
}

static void expect_refused_because(const char *text, size_t length,
                                   const char *what, const char *because)
{
    locus__rates out = sample_rates(), before = out;
    locus_status status = locus__calibration_parse(text, length, key, &out);
    TEST_EXPECT(status == LOCUS_ERROR_INVALID_ARGUMENT, "%s: parse gave %s",
                what, locus_status_name(status));
    TEST_EXPECT(strstr(locus_last_error(), because) != NULL,
                "%s: detail '%s' does not say '%s'", what, locus_last_error(),
                because);
    TEST_EXPECT(memcmp(&out, &before, sizeof out) == 0,
                "%s: a refused file changed the output", what);
}

static void expect_refused(const char *text, size_t length, const char *what)
{
    expect_refused_because(text, length, what, "calibration file");
}

static void test_truncations_and_flips_are_refused(void)
{
    locus__rates rates = sample_rates();
    char text[4096], damaged[4096];
    size_t length = format(&rates, text, sizeof text);
    for (size_t cut = 0; cut < length; cut++)
        expect_refused(text, cut, "truncated");
    /* Any changed byte: the checksum (or the format line, or the key)
     * catches it. */
    for (int trial = 0; trial < 200; trial++) {
        memcpy(damaged, text, length);
        size_t at = test_rng_range(0, length - 1);
        char was = damaged[at];
        damaged[at] = (char)(was ^ (1 + (int)test_rng_range(0, 126)));
        expect_refused(damaged, length, "one byte changed");
    }
    memcpy(damaged, text, length);
    damaged[length] = '\n';
    expect_refused(damaged, length + 1, "trailing byte");
}

/* Text with a correct checksum around a body of our choosing: what a buggy
 * writer (not a damaged disk) could produce. */
static size_t signed_text(const char *body, char *text, size_t size)
{
    uint64_t hash = locus__calibration_hash(body, strlen(body));
    int n = snprintf(text, size, "%schecksum %016llx\n", body,
                     (unsigned long long)hash);
    return (size_t)n;
}

static void test_bad_bodies_are_refused(void)
{
    char good_body[2048];
    char text[4096];
    locus__rates rates = sample_rates();
    size_t length = format(&rates, text, sizeof text);
    /* The body is everything before the checksum line. */
    char *checksum = strstr(text, "checksum ");
    size_t body_length = (size_t)(checksum - text);
    memcpy(good_body, text, body_length);
    good_body[body_length] = '\0';
    (void)length;

    struct {
        const char *from, *to, *what, *because;
    } edits[] = {
        {"gemm_flops ", "gemm_flops -", "negative rate", "out of range"},
        {"launch_seconds ", "launch_seconds 1e3\nx ", "launch out of range",
         "out of range"},
        {"launch_seconds ", "launch_seconds 0\nx ", "zero launch",
         "out of range"},
        {"reduce_bytes ", "reduce_bytes nan\nx ", "not a number",
         "not a number"},
        {"conv_flops ", "conv_flops 1e999\nx ", "infinite", "not a number"},
        {"download_bytes ", "bogus_field 1\ndownload_bytes ", "unknown field",
         "unknown line"},
        {"download_bytes ", "launch_seconds 1e-5\ndownload_bytes ",
         "repeated field", "repeats"},
        {"key locus", "key other", "another key", "another device"},
        {"locus-calibration 7", "locus-calibration 5", "another version",
         "format line"},
        {"shallow_wake_seconds ", "shallow_wake_seconds 3\nx ",
         "shallow wake-up out of range", "out of range"},
        {"wake_seconds ", "wake_seconds 2\nx ", "wake-up out of range",
         "out of range"},
        {"wake_seconds ", "wake_seconds -1e-4\nx ", "negative wake-up",
         "out of range"},
        {"conv_filter_bytes ", "conv_filter_bytes -2e9\nx ",
         "negative filter packing rate", "out of range"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        char body[2048];
        const char *at = strstr(good_body, edits[i].from);
        TEST_EXPECT(at != NULL, "edit '%s' finds nothing", edits[i].what);
        if (!at)
            continue;
        snprintf(body, sizeof body, "%.*s%s%s", (int)(at - good_body),
                 good_body, edits[i].to, at + strlen(edits[i].from));
        size_t n = signed_text(body, text, sizeof text);
        expect_refused_because(text, n, edits[i].what, edits[i].because);
    }
    /* A field missing. */
    char body[2048];
    const char *line = strstr(good_body, "conv_flops ");
    const char *next = strchr(line, '\n') + 1;
    snprintf(body, sizeof body, "%.*s%s", (int)(line - good_body), good_body,
             next);
    expect_refused_because(text, signed_text(body, text, sizeof text),
                           "missing field", "lacks a field: conv_flops");
}

/* What the Locus before wake_seconds wrote: format 3, the same fields but
 * that one, with a good checksum. Never trusted: it would leave the model
 * without the CPU's wake-up. Refused at its format line, and, were the
 * line right, for the missing field. */
static void test_file_without_wake_is_refused(void)
{
    char text[4096], body[2048];
    locus__rates rates = sample_rates();
    format(&rates, text, sizeof text);
    *strstr(text, "checksum ") = '\0';
    const char *line = strstr(text, "wake_seconds ");
    TEST_EXPECT(line != NULL, "no wake_seconds line written");
    if (!line)
        return;
    const char *next = strchr(line, '\n') + 1;
    snprintf(body, sizeof body, "%.*s%s", (int)(line - text), text, next);
    char *version = strstr(body, "locus-calibration 7");
    TEST_EXPECT(version != NULL, "no format 7 line written");
    if (!version)
        return;
    expect_refused_because(text, signed_text(body, text, sizeof text),
                           "format 7 without wake_seconds",
                           "lacks a field: wake_seconds");
    version[strlen("locus-calibration ")] = '3';
    expect_refused_because(text, signed_text(body, text, sizeof text),
                           "format 3 file", "format line");
}

/* What the Locus before shallow_wake_seconds wrote: format 6, every field
 * but that one. Refused at its format line (measured again), and, were the
 * line right, for the missing field: trusted, it would leave the model
 * charging a shallow sleep nothing. */
static void test_file_without_shallow_wake_is_refused(void)
{
    char text[4096], body[2048];
    locus__rates rates = sample_rates();
    format(&rates, text, sizeof text);
    *strstr(text, "checksum ") = '\0';
    const char *line = strstr(text, "shallow_wake_seconds ");
    TEST_EXPECT(line != NULL, "no shallow_wake_seconds line written");
    if (!line)
        return;
    const char *next = strchr(line, '\n') + 1;
    snprintf(body, sizeof body, "%.*s%s", (int)(line - text), text, next);
    char *version = strstr(body, "locus-calibration 7");
    if (!TEST_EXPECT(version != NULL, "no format 7 line written"))
        return;
    expect_refused_because(text, signed_text(body, text, sizeof text),
                           "format 7 without shallow_wake_seconds",
                           "lacks a field: shallow_wake_seconds");
    version[strlen("locus-calibration ")] = '6';
    expect_refused_because(text, signed_text(body, text, sizeof text),
                           "format 6 file", "format line");
}

static void test_robust_mean_drops_outliers(void)
{
    double samples[7] = {1.00, 1.02, 0.99, 1.01, 9.0, 1.00, 0.98};
    double mean = locus__robust_mean(samples, 7);
    TEST_EXPECT(fabs(mean - 1.0) < 0.02, "robust mean %g, want about 1", mean);
    double one = 3.5;
    TEST_EXPECT(locus__robust_mean(&one, 1) == 3.5, "mean of one sample");
}

static void test_fit_recovers_fixed_cost_and_rate(void)
{
    double fixed = test_rng_uniform(1e-6, 1e-4);
    double rate = test_rng_uniform(1e9, 1e13);
    double work[6], seconds[6];
    for (int i = 0; i < 6; i++) {
        work[i] = 1e6 * pow(8, i);
        seconds[i] = fixed + work[i] / rate;
    }
    double got_fixed, got_rate;
    TEST_EXPECT(locus__fit_rate(work, seconds, 6, &got_fixed, &got_rate),
                "fit failed");
    TEST_EXPECT(fabs(got_rate / rate - 1) < 1e-6 &&
                    fabs(got_fixed - fixed) < 1e-6 * fixed + 1e-12,
                "fit %g s + w / %g, want %g s + w / %g", got_fixed, got_rate,
                fixed, rate);
    /* Points a fixed cost cannot explain (slower per flop at the small
     * size): the rate of the largest, no negative fixed cost. */
    double w2[2] = {1e6, 1e9}, t2[2] = {1e-2, 1e-2};
    TEST_EXPECT(locus__fit_rate(w2, t2, 2, &got_fixed, &got_rate) &&
                    got_fixed >= 0 && fabs(got_rate - 1e11) < 1e5,
                "degenerate fit %g s + w / %g", got_fixed, got_rate);
    double bad[1] = {0};
    TEST_EXPECT(!locus__fit_rate(bad, bad, 1, &got_fixed, &got_rate),
                "a zero time gives no rate");
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    test_round_trip();
    test_truncations_and_flips_are_refused();
    test_bad_bodies_are_refused();
    test_file_without_wake_is_refused();
    test_file_without_shallow_wake_is_refused();
    test_robust_mean_drops_outliers();
    test_fit_recovers_fixed_cost_and_rate();
    return test_exit_code();
}
