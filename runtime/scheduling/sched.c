#include "scheduler.h"

#include <stdio.h>
#include <string.h>

#include "calibration.h"
#include "device.h"
#include "sched_wake.h"
#include "status.h"

bool locus__device_offers_variant(const locus_device *device,
                                  const locus__op_model *op, int algorithm,
                                  locus_dtype dtype)
{
    const locus__backend_slot *slot = device->backend;
    const locus_backend *table = slot->table;
    if (!op->backend_has(table))
        return false;
    /* A module that does not say (no offers entry) computes in f32, the
     * one dtype every module knows: an f64 or half request reaching its
     * loops would be read as floats, past the end of its operands. */
    if (!table->offers)
        return dtype == LOCUS_DTYPE_F32;
    return table->offers(slot->state, device->index_in_backend,
                         (locus_op_kind)op->kind, algorithm, dtype) == 1;
}

bool locus__device_offers(const locus_device *device, const locus__op_model *op)
{
    return locus__device_offers_variant(device, op, 0, LOCUS_DTYPE_F32);
}

unsigned locus__device_lacks_features(const locus_device *device,
                                      const locus__op_cost *cost)
{
    if (cost->features == 0)
        return 0;
    const locus__op_model *op = cost->op;
    unsigned offered =
        op->backend_features ? op->backend_features(device->backend->table) : 0;
    return cost->features & ~offered;
}

/* The names of conv2d's feature bits, in bit order. */
static const char *const conv_feature_names[] = {
    "groups", "dilation", "asymmetric padding", "bias", "activation", "nhwc",
};

void locus__op_variant_name(const locus__op_cost *cost, char *text,
                            size_t capacity)
{
    locus_dtype dtype = locus__cost_dtype(cost);
    char algorithm[48] = "";
    if (cost->op->kind == LOCUS__OP_CONV2D &&
        cost->algorithm != LOCUS_CONV_AUTO)
        snprintf(
            algorithm, sizeof algorithm, " algorithm %s",
            locus_conv_algorithm_str((locus_conv_algorithm)cost->algorithm));
    /* The features named are the request's (a device without any lacks
     * them all): the messages name what was asked for. */
    char features[128] = "";
    size_t used = 0;
    for (unsigned bit = 0;
         bit < sizeof conv_feature_names / sizeof conv_feature_names[0];
         bit++) {
        if (!(cost->features & (1u << bit)) || used >= sizeof features)
            continue;
        int n = snprintf(features + used, sizeof features - used, "%s%s",
                         used == 0 ? " with " : ", ", conv_feature_names[bit]);
        used += n > 0 ? (size_t)n : 0;
    }
    snprintf(text, capacity, "%s%s%s%s%s", cost->op->name, algorithm, features,
             dtype == LOCUS_DTYPE_F32 ? "" : " in ",
             dtype == LOCUS_DTYPE_F32 ? "" : locus_dtype_str(dtype));
}

static uint64_t copy_bit(const locus_device *device)
{
    return device->backend->table->host_memory
               ? LOCUS__HOST_COPY
               : UINT64_C(1) << (device->ordinal + 1);
}

/* The device whose copy of a buffer is current when the host's is not. */
static locus_device *holder_of(locus_context *context, uint64_t valid)
{
    for (size_t d = 0; d < context->device_count; d++) {
        locus_device *device = &context->devices[d];
        if (!device->backend->table->host_memory && (valid & copy_bit(device)))
            return device;
    }
    return NULL;
}

/* What bringing the stale inputs to the device costs: a copy down from the
 * device that holds one (when the host's copy is stale too), then a copy up
 * unless the device computes on host memory; each copy also pays its
 * device's copy latency (calibrated), which dominates small buffers.
 * Also says whether any input is current there, and how many bytes are
 * not. */
/* A buffer of LOCUS__PIN_MIN_BYTES or more is pinned at its first copy
 * (buffer.c) and then copies at the pinned rate; the one-time cost of
 * pinning is left out, as it is paid once per buffer. */
static double upload_rate(const locus__rates *rates, double bytes)
{
    return bytes >= (double)LOCUS__PIN_MIN_BYTES &&
                   rates->upload_pinned_bytes > 0
               ? rates->upload_pinned_bytes
               : rates->upload_pageable_bytes;
}

static double download_rate(const locus__rates *rates, double bytes)
{
    return bytes >= (double)LOCUS__PIN_MIN_BYTES &&
                   rates->download_pinned_bytes > 0
               ? rates->download_pinned_bytes
               : rates->download_bytes;
}

static double transfer_seconds(locus_context *context, locus_device *device,
                               const locus__op_cost *cost,
                               const locus__rates *rates, bool *any_current,
                               double *stale_bytes)
{
    uint64_t bit = copy_bit(device);
    bool to_device = !device->backend->table->host_memory;
    double seconds = 0;
    *any_current = false;
    *stale_bytes = 0;
    for (size_t i = 0; i < cost->input_count; i++) {
        locus_buffer *buffer = cost->inputs[i];
        pthread_mutex_lock(&buffer->state_lock);
        uint64_t valid = buffer->valid;
        pthread_mutex_unlock(&buffer->state_lock);
        if (valid & bit) {
            *any_current = true;
            continue;
        }
        double bytes = (double)buffer->bytes;
        *stale_bytes += bytes;
        if (!(valid & LOCUS__HOST_COPY)) {
            locus_device *holder = holder_of(context, valid);
            if (holder) {
                locus__rates holder_rates;
                const locus__rates *from =
                    locus__device_rates(context, holder, &holder_rates);
                if (from->download_bytes > 0)
                    seconds += from->transfer_seconds +
                               bytes / download_rate(from, bytes);
            }
        }
        if (to_device && rates->upload_pageable_bytes > 0)
            seconds +=
                rates->transfer_seconds + bytes / upload_rate(rates, bytes);
    }
    return seconds;
}

/* What the memory-bound floor starts from: the launch, a reduce's end to
 * end (its kernel and the read of its result), or for gemm and conv2d
 * their own fitted fixed part where that is less: such a device starts
 * them faster than a reduce, and the floor must not charge an op more
 * than its own sweep measured. PoCL on the 2-core VM: launch 43-84 us,
 * gemm fixed 19-69 us over calibrations, a 16^3 gemm 33-70 us in the
 * benchmark. Where every fixed part is above the launch (every device
 * calibrated on the H200 host), this is the launch, as before. */
static double start_seconds(const locus__rates *rates,
                            const locus__op_cost *cost)
{
    if (cost->op->work_in_bytes)
        return rates->launch_seconds;
    locus__op_cost no_work = *cost;
    no_work.flops = 0;
    double fixed = cost->op->compute_seconds(rates, &no_work);
    /* A fit that found no fixed part (0) says nothing of the start. */
    return fixed > 0 && fixed < rates->launch_seconds ? fixed
                                                      : rates->launch_seconds;
}

/* launch + max(compute, memory) + copies in of stale inputs, + the copy
 * out of the result when every input came from the host: data that starts
 * on the host goes back there, and a device must earn that trip too; +
 * the wake-up of the pool's workers when they are asleep. */
static double estimate(locus_context *context, locus_device *device,
                       const locus__op_cost *cost, locus__sleepers asleep)
{
    locus__rates figures;
    const locus__rates *rates = locus__device_rates(context, device, &figures);
    double memory = cost->bytes / rates->reduce_bytes;
    double compute = cost->op->compute_seconds(rates, cost);
    double floor = start_seconds(rates, cost) + memory;
    double seconds = compute > floor ? compute : floor;
    bool any_current;
    double stale;
    seconds +=
        transfer_seconds(context, device, cost, rates, &any_current, &stale);
    if (!device->backend->table->host_memory && !any_current &&
        rates->download_bytes > 0 && cost->output_bytes > 0)
        seconds +=
            rates->transfer_seconds +
            cost->output_bytes / download_rate(rates, cost->output_bytes);
    return seconds + locus__wake_term(rates, device, asleep);
}

double locus__sched_estimate(locus_context *context, locus_device *device,
                             const locus__op_cost *cost)
{
    locus__sleepers asleep = {0, 0};
    locus__sleepers_add(&asleep, context, device, cost);
    return estimate(context, device, cost, asleep);
}

void locus__sched_gemm_rows(locus_context *context, locus_device *device,
                            const locus_gemm_desc *desc, locus_buffer *b,
                            bool c_read, double *fixed, double *per_row,
                            double *min_rows)
{
    /* The split is worth the CPU's real figures: its blocks are sized by
     * them. */
    if (locus__probe_would_help(context, device))
        locus__probe(context, device);
    locus__rates figures;
    const locus__rates *rates = locus__device_rates(context, device, &figures);
    double n = (double)desc->n, k = (double)desc->k;
    *fixed = rates->gemm_fixed_seconds;
    *per_row = 2.0 * n * k / rates->gemm_flops;
    *min_rows = 0;
    if (device->backend->table->host_memory) {
        /* B read and its packed panels written; rows go to the workers in
         * micro-tiles of up to 16 (avx512's 12, avx2's 6, rounded up), so
         * fewer than 16 per worker leave some idle. */
        *fixed += 2.0 * 4.0 * n * k / rates->reduce_bytes;
        *min_rows =
            16.0 *
            (device->info.compute_units > 0 ? device->info.compute_units : 1);
        return;
    }
    pthread_mutex_lock(&b->state_lock);
    bool b_there = (b->valid & copy_bit(device)) != 0;
    pthread_mutex_unlock(&b->state_lock);
    /* The host buffers are pinned before the blocks start (gemm_split.c),
     * so the rates are those of their size. */
    if (!b_there)
        *fixed += rates->transfer_seconds +
                  (double)b->bytes / upload_rate(rates, (double)b->bytes);
    double row_in = 4.0 * (k + (c_read ? n : 0));
    double row_out = 4.0 * n;
    *fixed += 2 * rates->transfer_seconds;
    *per_row += row_in / upload_rate(rates, row_in * (double)desc->m) +
                row_out / download_rate(rates, row_out * (double)desc->m);
}

static bool same_kind(const locus_device *a, const locus_device *b)
{
    return a->backend == b->backend && a->info.kind == b->info.kind &&
           a->info.compute_units == b->info.compute_units &&
           strcmp(a->info.name, b->info.name) == 0;
}

/* Under an MPI launcher, ranks on one machine would all pick the same
 * cheapest GPU; among devices of the same kind that the model finds as
 * good as the cheapest (within 5%: no data of this op lives on one but not
 * the others), local rank r takes the r-th, modulo their number. */
static size_t spread_over_ranks(const locus_context *context,
                                locus_device *const *order,
                                const double *seconds, size_t count)
{
    /* As read once at context creation (ignore_environment honoured). */
    int rank = context->local_rank.launcher.rank;
    int size = context->local_rank.launcher.size;
    if (rank < 0 || size < 2)
        return 0;
    size_t equals[LOCUS__MAX_DEVICES], n = 0;
    for (size_t i = 0; i < count; i++)
        if (same_kind(order[0], order[i]) && seconds[i] <= 1.05 * seconds[0])
            equals[n++] = i;
    return equals[(size_t)rank % n];
}

/* Every device that offers the op and is not excluded, estimated, cheapest
 * first, with the pools of the devices in `asleep` to wake; the first
 * LOCUS_RECORD_MAX_ESTIMATES kept in the choice. */
static locus_device *rank_devices(locus_context *context,
                                  const locus__op_cost *cost, uint64_t excluded,
                                  locus__sleepers asleep, locus__choice *out)
{
    locus_device *order[LOCUS__MAX_DEVICES];
    double seconds[LOCUS__MAX_DEVICES];
    size_t count = 0;
    for (size_t d = 0; d < context->device_count; d++) {
        locus_device *device = &context->devices[d];
        /* A NUMA node's CPU device with no worker of this process (the
         * pool was narrowed by taskset or an MPI launcher) cannot run. */
        if (!locus__device_offers_cost(device, cost) ||
            device->info.compute_units <= 0 ||
            (excluded & (UINT64_C(1) << device->ordinal)))
            continue;
        double estimated = estimate(context, device, cost, asleep);
        size_t at = count++;
        for (; at > 0 && seconds[at - 1] > estimated; at--) {
            order[at] = order[at - 1];
            seconds[at] = seconds[at - 1];
        }
        order[at] = device;
        seconds[at] = estimated;
    }
    out->asleep = asleep.asleep;
    out->deep = asleep.deep;
    out->estimate_count =
        count < LOCUS_RECORD_MAX_ESTIMATES ? count : LOCUS_RECORD_MAX_ESTIMATES;
    for (size_t i = 0; i < out->estimate_count; i++) {
        out->candidates[i] = order[i];
        out->seconds[i] = seconds[i];
    }
    size_t pick = count ? spread_over_ranks(context, order, seconds, count) : 0;
    out->device = count ? order[pick] : NULL;
    out->estimated_seconds = count ? seconds[pick] : 0;
    return out->device;
}

/* One line at LOCUS_LOG=info that says why: the op, the estimates (with
 * the part that is the wake-up of a sleeping pool), and how much of the
 * input would have to move. */
static void explain(locus_context *context, const locus__op_cost *cost,
                    const locus__choice *choice)
{
    if (context->config.log_level < LOCUS_LOG_INFO)
        return;
    char others[640] = "", note[64];
    size_t used = 0;
    for (size_t i = 1; i < choice->estimate_count && used < sizeof others;
         i++) {
        locus__wake_note(context, choice->candidates[i],
                         locus__choice_sleepers(choice), note, sizeof note);
        int n =
            snprintf(others + used, sizeof others - used, "%s%s %.3g ms%s",
                     i > 1 ? ", " : "; ", choice->candidates[i]->info.selector,
                     choice->seconds[i] * 1e3, note);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    locus__wake_note(context, choice->device, locus__choice_sleepers(choice),
                     note, sizeof note);
    bool any_current;
    double stale;
    locus__rates figures;
    transfer_seconds(context, choice->device, cost,
                     locus__device_rates(context, choice->device, &figures),
                     &any_current, &stale);
    locus__log(
        context, LOCUS_LOG_INFO,
        "%s: %s %.3g GFLOP, %.3g MB -> %s (%s), estimated %.3g ms%s%s; "
        "%.3g MB of inputs to copy there",
        locus__chosen_by_name(choice->chosen_by), cost->op->name,
        cost->flops * 1e-9, cost->bytes * 1e-6, choice->device->info.selector,
        choice->device->backend->table->host_memory
            ? "host memory"
            : (any_current ? "data there" : "data on host"),
        choice->estimated_seconds * 1e3, note, others,
        choice->device->backend->table->host_memory ? 0.0 : stale * 1e-6);
}

void locus__choice_to_record(const locus__choice *choice, locus_record *record)
{
    locus_copy_name(record->chosen_by, sizeof record->chosen_by,
                    locus__chosen_by_name(choice->chosen_by));
    record->estimated_seconds = choice->estimated_seconds;
    record->estimate_count = choice->estimate_count;
    for (size_t i = 0; i < choice->estimate_count; i++) {
        locus_copy_name(record->estimates[i].device,
                        sizeof record->estimates[i].device,
                        choice->candidates[i]->info.selector);
        record->estimates[i].seconds = choice->seconds[i];
    }
}

/* An op this cheap on the cheapest device is placed without measuring
 * anything: a wrong choice loses at most tens of microseconds of it,
 * while a probe costs tens of milliseconds (the first op of a process is
 * often this small: the README's 1000-element sum). */
#define TINY_OP_SECONDS 50e-6

/* Whether two CPU devices are the same cores (the whole CPU and its NUMA
 * nodes' parts): the order between them comes from one measurement, and
 * no probe or calibration of another device changes it. */
static bool same_cpu(const locus_device *a, const locus_device *b)
{
    return locus__runs_on_pool(a) && a->backend == b->backend;
}

/* Whether the i-th candidate is close enough to the cheapest that the
 * figures behind the two could have their order wrong: within the
 * product of their doubts (calibration.h). */
static bool contends(locus_context *context, const locus__choice *choice,
                     size_t i)
{
    locus_device *best = (locus_device *)choice->candidates[0];
    locus_device *other = (locus_device *)choice->candidates[i];
    if (same_cpu(best, other))
        return false;
    double doubt =
        locus__rates_doubt(locus__device_rates_source(context, best)) *
        locus__rates_doubt(locus__device_rates_source(context, other));
    return choice->seconds[i] <= choice->seconds[0] * doubt;
}

/* A contender (or the cheapest, when it has one) whose figures a probe
 * would measure, or NULL: the choice depends on it and the probe is
 * short. Modules' devices are never probed here: their first op may build
 * kernels or start a driver for seconds, which no op that runs elsewhere
 * should pay; `locus calibrate` measures them. */
static locus_device *probe_target(locus_context *context,
                                  const locus__choice *choice)
{
    if (context->config.calibration != LOCUS__CALIBRATION_AUTO ||
        choice->estimate_count < 2 || choice->seconds[0] < TINY_OP_SECONDS)
        return NULL;
    bool contested = false;
    for (size_t i = 1; i < choice->estimate_count; i++) {
        if (!contends(context, choice, i))
            continue;
        contested = true;
        locus_device *other = (locus_device *)choice->candidates[i];
        if (locus__probe_would_help(context, other))
            return other;
    }
    locus_device *best = (locus_device *)choice->candidates[0];
    return contested && locus__probe_would_help(context, best) ? best : NULL;
}

/* Said once per process: a warning at every op would drown the user. */
static int unmeasured_warned;

/* One warning when a choice rests on figures that were not measured in
 * full and a measurement could change it: an application that never ran
 * `locus calibrate` learns that it should, and why. */
static void warn_if_unmeasured(locus_context *context,
                               const locus__op_cost *cost,
                               const locus__choice *choice)
{
    if (context->config.calibration != LOCUS__CALIBRATION_AUTO ||
        choice->estimate_count < 2 || choice->seconds[0] < TINY_OP_SECONDS ||
        __atomic_load_n(&unmeasured_warned, __ATOMIC_RELAXED))
        return;
    locus_device *best = (locus_device *)choice->candidates[0];
    for (size_t i = 1; i < choice->estimate_count; i++) {
        locus_device *other = (locus_device *)choice->candidates[i];
        locus__rates_source best_source =
            locus__device_rates_source(context, best);
        locus__rates_source other_source =
            locus__device_rates_source(context, other);
        if ((best_source >= LOCUS__RATES_CACHED &&
             other_source >= LOCUS__RATES_CACHED) ||
            !contends(context, choice, i))
            continue;
        if (__atomic_exchange_n(&unmeasured_warned, 1, __ATOMIC_RELAXED))
            return;
        locus__log(context, LOCUS_LOG_WARN,
                   "%s placed on %s (estimated %.3g ms) over %s (%.3g ms) by "
                   "figures not measured in full (%s: %s, %s: %s), which a "
                   "measurement could reverse; run `locus calibrate` once to "
                   "measure every device and keep the figures (said once)",
                   cost->op->name, best->info.selector,
                   choice->seconds[0] * 1e3, other->info.selector,
                   choice->seconds[i] * 1e3, best->info.selector,
                   locus__rates_source_str(best_source), other->info.selector,
                   locus__rates_source_str(other_source));
        return;
    }
}

/* The memo's key for a cost: its figures, each input's valid mask and
 * size, and whose pool workers are asleep, which are all the model reads
 * besides the calibrated rates. */
static bool memo_key(locus_context *context, const locus__op_cost *cost,
                     locus__choice_memo *key)
{
    if (cost->input_count > LOCUS__MEMO_INPUTS)
        return false;
    memset(key, 0, sizeof *key);
    key->flops = cost->flops;
    key->bytes = cost->bytes;
    key->output_bytes = cost->output_bytes;
    key->algorithm = cost->algorithm;
    key->dtype = cost->dtype;
    key->features = cost->features;
    key->input_count = cost->input_count;
    for (size_t i = 0; i < cost->input_count; i++) {
        locus_buffer *buffer = cost->inputs[i];
        pthread_mutex_lock(&buffer->state_lock);
        key->masks[i] = buffer->valid;
        pthread_mutex_unlock(&buffer->state_lock);
        key->sizes[i] = buffer->bytes;
    }
    locus__sleepers asleep = locus__sleepers_now(context, cost);
    key->asleep = asleep.asleep;
    key->deep = asleep.deep;
    return true;
}

static bool same_key(const locus__choice_memo *a, const locus__choice_memo *b)
{
    if (a->flops != b->flops || a->bytes != b->bytes ||
        a->output_bytes != b->output_bytes || a->algorithm != b->algorithm ||
        a->dtype != b->dtype || a->features != b->features ||
        a->input_count != b->input_count || a->asleep != b->asleep ||
        a->deep != b->deep)
        return false;
    for (size_t i = 0; i < a->input_count; i++)
        if (a->masks[i] != b->masks[i] || a->sizes[i] != b->sizes[i])
            return false;
    return true;
}

_Static_assert(sizeof(((locus_context *)0)->memo) /
                       sizeof(((locus_context *)0)->memo[0]) ==
                   LOCUS__OP_KINDS,
               "one remembered choice per kind of op");

static bool memo_recall(locus_context *context, locus__op_kind op,
                        const locus__choice_memo *key, locus__choice *out)
{
    pthread_mutex_lock(&context->memo_lock);
    const locus__choice_memo *memo = &context->memo[op];
    bool hit = memo->valid && same_key(memo, key);
    if (hit) {
        out->device = memo->device;
        out->estimated_seconds = memo->estimated_seconds;
        out->estimate_count = memo->count;
        out->asleep = memo->asleep;
        out->deep = memo->deep;
        for (size_t i = 0; i < memo->count; i++) {
            out->candidates[i] = memo->candidates[i];
            out->seconds[i] = memo->seconds[i];
        }
    }
    pthread_mutex_unlock(&context->memo_lock);
    return hit;
}

static void memo_keep(locus_context *context, locus__op_kind op,
                      const locus__choice_memo *key,
                      const locus__choice *choice)
{
    pthread_mutex_lock(&context->memo_lock);
    locus__choice_memo *memo = &context->memo[op];
    *memo = *key;
    memo->device = choice->device;
    memo->estimated_seconds = choice->estimated_seconds;
    memo->count = choice->estimate_count;
    for (size_t i = 0; i < choice->estimate_count; i++) {
        memo->candidates[i] = choice->candidates[i];
        memo->seconds[i] = choice->seconds[i];
    }
    memo->valid = true;
    pthread_mutex_unlock(&context->memo_lock);
}

void locus__sched_forget(locus_context *context)
{
    pthread_mutex_lock(&context->memo_lock);
    for (size_t op = 0; op < sizeof context->memo / sizeof context->memo[0];
         op++)
        context->memo[op].valid = false;
    pthread_mutex_unlock(&context->memo_lock);
}

locus_status locus__sched_choose(locus_context *context,
                                 const locus__op_cost *cost, locus__choice *out)
{
    memset(out, 0, sizeof *out);
    const locus__selector_list *list = &context->config.device;
    bool any_auto = false;
    const locus_device *refusing = NULL; /* matched, but does not offer it */
    for (size_t i = 0; i < list->count; i++) {
        if (list->items[i].is_auto) {
            any_auto = true;
            break;
        }
        locus_device *device = locus__device_match(context, &list->items[i]);
        if (device && locus__device_offers_cost(device, cost)) {
            out->device = device;
            out->chosen_by = LOCUS__CHOSEN_BY_ENVIRONMENT;
            return LOCUS_SUCCESS;
        }
        /* It has the op, but not this algorithm or dtype. */
        if (device && !refusing && locus__device_offers(device, cost->op))
            refusing = device;
    }
    if (!any_auto) {
        const char *raw = context->config.settings[LOCUS__SET_DEVICE].raw;
        char why[160] = "", variant[96];
        locus__op_variant_name(cost, variant, sizeof variant);
        if (refusing)
            snprintf(why, sizeof why, " (%s is not offered on %s)", variant,
                     refusing->info.selector);
        /* The device asked for lacks what the op asks: as if the caller
         * had named it. */
        if (context->config.strict && refusing)
            return locus__fail(LOCUS_ERROR_NOT_SUPPORTED,
                               "%s is not offered on %s (%s), and "
                               "LOCUS_DEVICE='%s' with LOCUS_STRICT=1 keeps "
                               "the op there",
                               variant, refusing->info.selector,
                               refusing->info.name, raw ? raw : "");
        if (context->config.strict)
            return locus__fail(LOCUS_ERROR_DEVICE_UNAVAILABLE,
                               "LOCUS_DEVICE='%s' names no available device "
                               "that offers this op, and LOCUS_STRICT=1",
                               raw ? raw : "");
        /* A device that has the op but not this form of it is what the
         * op asked for, not a mistake in the variable: said at info, as
         * the refusal it replaces was. */
        locus__log(context, refusing ? LOCUS_LOG_INFO : LOCUS_LOG_WARN,
                   "LOCUS_DEVICE='%s' names no available device that offers "
                   "this op%s; choosing automatically",
                   raw ? raw : "", why);
    }
    locus__choice_memo key;
    bool keyed = memo_key(context, cost, &key);
    if (!keyed || !memo_recall(context, cost->op->kind, &key, out)) {
        locus__sleepers asleep = keyed ? (locus__sleepers){key.asleep, key.deep}
                                       : locus__sleepers_now(context, cost);
        if (!rank_devices(context, cost, 0, asleep, out)) {
            char variant[96];
            locus__op_variant_name(cost, variant, sizeof variant);
            return locus__fail(LOCUS_ERROR_NOT_SUPPORTED,
                               "no available device offers %s", variant);
        }
        /* Measured only when the choice hangs on it, and briefly. */
        locus_device *probe = probe_target(context, out);
        if (probe && locus__probe(context, probe))
            rank_devices(context, cost, 0, asleep, out);
        warn_if_unmeasured(context, cost, out);
        if (keyed)
            memo_keep(context, cost->op->kind, &key, out);
    }
    out->chosen_by = LOCUS__CHOSEN_BY_MODEL;
    explain(context, cost, out);
    locus__prewake_if_locked_out(context, out);
    return LOCUS_SUCCESS;
}

bool locus__sched_fallback(locus_context *context, const locus__op_cost *cost,
                           uint64_t failed_mask, locus__choice *out)
{
    memset(out, 0, sizeof *out);
    if (!rank_devices(context, cost, failed_mask,
                      locus__sleepers_now(context, cost), out))
        return false;
    out->chosen_by = LOCUS__CHOSEN_BY_FALLBACK;
    explain(context, cost, out);
    return true;
}

locus_device *locus__sched_default_device(locus_context *context,
                                          const locus__op_cost *cost)
{
    /* By nominal figures: naming the default must not set off a
     * calibration. */
    locus_device *best = NULL;
    double best_seconds = 0;
    for (size_t d = 0; d < context->device_count; d++) {
        locus_device *device = &context->devices[d];
        if (!locus__device_offers_cost(device, cost))
            continue;
        locus__rates rates;
        locus__nominal_rates(device, &rates);
        double seconds = cost->op->compute_seconds(&rates, cost);
        if (!device->backend->table->host_memory)
            seconds += cost->bytes / rates.upload_pageable_bytes;
        if (!best || seconds < best_seconds) {
            best = device;
            best_seconds = seconds;
        }
    }
    if (!best && context->device_count > 0)
        best = &context->devices[0];
    return best;
}
