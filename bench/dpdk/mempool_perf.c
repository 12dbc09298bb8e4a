/* SPDX-License-Identifier: BSD-3-Clause
 *
 * DPDK's mempool_perf_autotest (app/test/test_mempool_perf.c), its per-lcore loop reproduced
 * exactly, with the cells, the seconds per cell and the repetitions on the command line, so
 * that DPDK's C mempool can be measured side by side with idxpool in minutes rather than the
 * autotest's ~55 (scripts/compare-dpdk.sh drives it).
 *
 * Kept from the autotest, verbatim where the code is the measurement:
 *   - the pools: rte_mempool_create(name, MEMPOOL_SIZE, 2048, cache 0 or
 *     RTE_MEMPOOL_CACHE_MAX_SIZE, 0, NULL, NULL, my_obj_init, NULL, SOCKET_ID_ANY, 0), the
 *     no-cache pool created first, with MEMPOOL_SIZE = lcores * (MAX_KEEP + cache term) - 1;
 *   - test_loop (rte_mempool_generic_get/put with the lcore's default cache, or NULL, or a
 *     user-owned cache), its constant-n dispatch, test_loop_random (26.07);
 *   - the start synchronisation (workers launched with rte_eal_remote_launch spin on
 *     `synchro` until the main lcore stores 1, then the main lcore runs its share);
 *   - the stop condition and the rate formula of the chosen version: 22.11 sums
 *     enq_count / TIME_S over lcores; 26.07 sums enq_count * hz / duration_cycles;
 *   - the output line: "mempool_autotest cache=... cores=... ... rate_persec=N" in the
 *     chosen version's format (26.07 pads the numbers).
 * Different: TIME_S is --seconds (may be fractional; the stop test `time_diff/hz < TIME_S`
 * becomes the equivalent `time_diff < TIME_S * hz`); cells come from --matrix (the version's
 * full loop order), filtered by --cache/--cores/--filter, or from --cell / --stdin; the
 * autotest's third pool (rte_mbuf_best_mempool_ops(), the same ring ops on Debian) is not
 * created. The algorithm measured is the installed librte_mempool's (Debian 12: 22.11), whatever
 * --matrix says: --matrix 2607 runs 26.07's cells and loops on the installed cache code.
 *
 * Build (scripts/compare-dpdk.sh does it; the flags after pkg-config's, whose -march=corei7
 * (Debian's libdpdk.pc) would otherwise override -march=native):
 *   cc -o target/dpdk/mempool_perf bench/dpdk/mempool_perf.c \
 *      $(pkg-config --cflags --libs libdpdk) -O3 -march=native
 * Run (as root; --no-huge: no hugepages needed; --lcores maps both lcores onto both CPUs, so
 * no thread is pinned and a busy CPU does not stall an lcore; -l 0-1 pins like dpdk-test):
 *   target/dpdk/mempool_perf --no-pci --no-huge -m 512 --no-telemetry --lcores '(0,1)@(0,1)' \
 *      -- --cache 512 --cores 1 --seconds 1 --reps 2 --filter "n_keep=512 constant_n=0"
 * Options after `--`:
 *   --matrix 2211|2607  cell list, MAX_KEEP, N and rate formula of that autotest [2211]
 *   --cache LIST        0 (no cache) and/or 512 (per-lcore default cache) [512]
 *   --user-cache        cache=512 cells use a user-owned cache on the no-cache pool
 *   --cores LIST        lcores per cell, each <= the EAL lcore count [1,2 up to the count]
 *   --seconds S         TIME_S of each cell [the version's: 5 for 2211, 1 for 2607]
 *   --reps R            result lines per cell, back to back [1]
 *   --clock wall|cpu    wall: the autotest's rate; cpu (not the autotest's): objects per
 *                       second of each lcore's thread CPU time, summed (robust on a shared
 *                       machine; mempool_perf --clock cpu is the same) [wall]
 *   --filter WORDS      only cells whose key holds every word (e.g. "cores=1 n_keep=512");
 *                       alternatives separated by '|' (any of them)
 *   --cell KEY          run this cell (e.g. "cache=512 cores=1 n_get_bulk=4 n_put_bulk=4
 *                       n_keep=32 constant_n=1", or n_max_bulk=64 for 26.07's random pass);
 *                       repeatable; replaces the matrix
 *   --list              print the cell keys, one a line, and exit (no measurement)
 *   --stdin             read cell keys from stdin, one a line; run each --reps times, print
 *                       and flush each result line (for interleaving with another process)
 *   --objects N         fixed length instead of --seconds: each cell runs twice; each lcore
 *                       runs one warm-up pass of the loop (the autotest's N objects: 65536
 *                       for 2211), then passes until it has moved at least N objects (whole
 *                       passes), 2N the second time; the lines end with objects=<all
 *                       lcores' counted objects>. The difference of the two counts is the
 *                       loop's cost, every fixed cost cancelled. For instruction
 *                       counts under callgrind (scripts/instr-vs-dpdk.sh): run with
 *                       `valgrind --tool=callgrind --collect-atstart=no`; each lcore toggles
 *                       collection on and off around its counted passes (callgrind's
 *                       collection state is per thread), and the main lcore dumps the counts
 *                       after each cell (CALLGRIND_DUMP_STATS_AT, labelled
 *                       "dpdk <key> objects=<n>"). Without valgrind the requests do nothing.
 * Exit status 0, or 1 on a failed run or a bad argument (message on stderr).
 */

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_branch_prediction.h>
#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mempool.h>
#include <rte_pause.h>
#include <rte_version.h>

/* Callgrind's client requests (--objects): from valgrind's header when it is installed, else
 * nothing (the counts then come from no dump, and scripts/instr-vs-dpdk.sh says so). */
#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define HAVE_CALLGRIND 1
#endif
#endif
#ifndef HAVE_CALLGRIND
#define CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_DUMP_STATS_AT(label) ((void)(label))
#endif

/* ---- the autotest's constants (22.11 and 26.07) ------------------------------------------ */

#define MEMPOOL_ELT_SIZE 2048
#define MAX_KEEP_2211 512
#define N_2211 65536
#define MAX_KEEP_2607 32768
#define N_2607 (128 * MAX_KEEP_2607)

/* Number of pointers fitting into one cache line. */
#define CACHE_LINE_BURST (RTE_CACHE_LINE_SIZE / sizeof(uintptr_t))

#define LOG_ERR() printf("test failed at %s():%d\n", __func__, __LINE__)
#define RET_ERR()                                                                            \
	do {                                                                                 \
		LOG_ERR();                                                                   \
		return -1;                                                                   \
	} while (0)
#define GOTO_ERR(var, label)                                                                 \
	do {                                                                                 \
		LOG_ERR();                                                                   \
		var = -1;                                                                    \
		goto label;                                                                  \
	} while (0)

/* Which autotest: 2211 or 2607. */
static int matrix = 2211;
/* TIME_S, in timer cycles (computed from --seconds). */
static uint64_t time_cycles;
static double time_s;
/* --clock cpu: rates against each lcore's thread CPU time instead of TIME_S / cycles. */
static int clock_cpu;
/* --objects N: the cell runs twice, each lcore moving N then 2N objects in its counted
 * passes (0: timed by --seconds); fixed_objects is the current run's. */
static uint64_t objects_opt;
static uint64_t fixed_objects;

static double
thread_cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int use_external_cache;
static unsigned int external_cache_size = RTE_MEMPOOL_CACHE_MAX_SIZE;

static uint32_t synchro;

/* max random number of objects in one bulk operation (26.07; 0 = fixed bulks) */
static unsigned int n_max_bulk;

/* number of objects in one bulk operation (get or put) */
static unsigned int n_get_bulk;
static unsigned int n_put_bulk;

/* number of objects retrieved from mempool before putting them back */
static unsigned int n_keep;

/* true if we want to test with constant n_get_bulk and n_put_bulk */
static int use_constant_values;

/* number of enqueues / dequeues, and time used */
struct mempool_test_stats {
	uint64_t enq_count;
	uint64_t duration_cycles;
	double cpu_s; /* --clock cpu: the lcore's thread CPU time over the cell */
} __rte_cache_aligned;

static struct mempool_test_stats stats[RTE_MAX_LCORE];

/*
 * save the object number in the first 4 bytes of object data. All
 * other bytes are set to 0.
 */
static void
my_obj_init(struct rte_mempool *mp, __rte_unused void *arg, void *obj, unsigned int i)
{
	uint32_t *objnum = obj;
	memset(obj, 0, mp->elt_size);
	*objnum = i;
}

/* ---- the loops (the autotest's test_loop / test_loop_random, per version) ----------------- */

#define DEFINE_LOOPS(SUFFIX, N, MAX_KEEP)                                                    \
	static __rte_always_inline int test_loop_##SUFFIX(                                   \
		struct rte_mempool *mp, struct rte_mempool_cache *cache,                     \
		unsigned int x_keep, unsigned int x_get_bulk, unsigned int x_put_bulk)       \
	{                                                                                    \
		void *obj_table[MAX_KEEP] __rte_cache_aligned;                               \
		unsigned int idx;                                                            \
		unsigned int i;                                                              \
		int ret;                                                                     \
                                                                                             \
		for (i = 0; likely(i < (N / x_keep)); i++) {                                 \
			/* get x_keep objects by bulk of x_get_bulk */                       \
			for (idx = 0; idx < x_keep; idx += x_get_bulk) {                     \
				ret = rte_mempool_generic_get(mp, &obj_table[idx],           \
							      x_get_bulk, cache);            \
				if (unlikely(ret < 0)) {                                     \
					rte_mempool_dump(stdout, mp);                        \
					return ret;                                          \
				}                                                            \
			}                                                                    \
                                                                                             \
			/* put the objects back by bulk of x_put_bulk */                     \
			for (idx = 0; idx < x_keep; idx += x_put_bulk) {                     \
				rte_mempool_generic_put(mp, &obj_table[idx], x_put_bulk,     \
							cache);                              \
			}                                                                    \
		}                                                                            \
                                                                                             \
		return 0;                                                                    \
	}                                                                                    \
                                                                                             \
	static __rte_always_inline int test_loop_random_##SUFFIX(                            \
		struct rte_mempool *mp, struct rte_mempool_cache *cache,                     \
		unsigned int x_keep, unsigned int x_max_bulk)                                \
	{                                                                                    \
		void *obj_table[MAX_KEEP] __rte_cache_aligned;                               \
		unsigned int idx;                                                            \
		unsigned int i;                                                              \
		unsigned int r = 0;                                                          \
		unsigned int x_bulk;                                                         \
		int ret;                                                                     \
                                                                                             \
		for (i = 0; likely(i < (N / x_keep)); i++) {                                 \
			/* get x_keep objects by bulk of random [1 .. x_max_bulk] */         \
			for (idx = 0; idx < x_keep; idx += x_bulk, r++) {                    \
				/* Generate a pseudorandom number [1 .. x_max_bulk]. */      \
				x_bulk = ((r ^ (r >> 2) ^ (r << 3)) & (x_max_bulk - 1)) + 1; \
				if (unlikely(idx + x_bulk > x_keep))                         \
					x_bulk = x_keep - idx;                               \
				ret = rte_mempool_generic_get(mp, &obj_table[idx], x_bulk,   \
							      cache);                        \
				if (unlikely(ret < 0)) {                                     \
					rte_mempool_dump(stdout, mp);                        \
					return ret;                                          \
				}                                                            \
			}                                                                    \
                                                                                             \
			/* put the objects back by bulk of random [1 .. x_max_bulk] */       \
			for (idx = 0; idx < x_keep; idx += x_bulk, r++) {                    \
				/* Generate a pseudorandom number [1 .. x_max_bulk]. */      \
				x_bulk = ((r ^ (r >> 2) ^ (r << 3)) & (x_max_bulk - 1)) + 1; \
				if (unlikely(idx + x_bulk > x_keep))                         \
					x_bulk = x_keep - idx;                               \
				rte_mempool_generic_put(mp, &obj_table[idx], x_bulk, cache); \
			}                                                                    \
		}                                                                            \
                                                                                             \
		return 0;                                                                    \
	}

DEFINE_LOOPS(2211, N_2211, MAX_KEEP_2211)
DEFINE_LOOPS(2607, N_2607, MAX_KEEP_2607)

/* One pass of 22.11's while loop body: the dispatch on constant n. */
static __rte_always_inline int
loop_2211(struct rte_mempool *mp, struct rte_mempool_cache *cache)
{
	if (!use_constant_values)
		return test_loop_2211(mp, cache, n_keep, n_get_bulk, n_put_bulk);
	else if (n_get_bulk == 1)
		return test_loop_2211(mp, cache, n_keep, 1, 1);
	else if (n_get_bulk == 4)
		return test_loop_2211(mp, cache, n_keep, 4, 4);
	else if (n_get_bulk == CACHE_LINE_BURST)
		return test_loop_2211(mp, cache, n_keep, CACHE_LINE_BURST, CACHE_LINE_BURST);
	else if (n_get_bulk == 32)
		return test_loop_2211(mp, cache, n_keep, 32, 32);
	return -1;
}

/* One pass of 26.07's while loop body. */
static __rte_always_inline int
loop_2607(struct rte_mempool *mp, struct rte_mempool_cache *cache)
{
	if (n_max_bulk != 0)
		return test_loop_random_2607(mp, cache, n_keep, n_max_bulk);
	else if (!use_constant_values)
		return test_loop_2607(mp, cache, n_keep, n_get_bulk, n_put_bulk);
	else if (n_get_bulk == 1)
		return test_loop_2607(mp, cache, n_keep, 1, 1);
	else if (n_get_bulk == 4)
		return test_loop_2607(mp, cache, n_keep, 4, 4);
	else if (n_get_bulk == CACHE_LINE_BURST)
		return test_loop_2607(mp, cache, n_keep, CACHE_LINE_BURST, CACHE_LINE_BURST);
	else if (n_get_bulk == 32)
		return test_loop_2607(mp, cache, n_keep, 32, 32);
	else if (n_get_bulk == 64)
		return test_loop_2607(mp, cache, n_keep, 64, 64);
	else if (n_get_bulk == 128)
		return test_loop_2607(mp, cache, n_keep, 128, 128);
	else if (n_get_bulk == 256)
		return test_loop_2607(mp, cache, n_keep, 256, 256);
	else if (n_get_bulk == RTE_MEMPOOL_CACHE_MAX_SIZE)
		return test_loop_2607(mp, cache, n_keep, RTE_MEMPOOL_CACHE_MAX_SIZE,
				      RTE_MEMPOOL_CACHE_MAX_SIZE);
	return -1;
}

static int
per_lcore_mempool_test(void *arg)
{
	struct rte_mempool *mp = arg;
	unsigned int lcore_id = rte_lcore_id();
	int ret = 0;
	uint64_t start_cycles, end_cycles;
	uint64_t time_diff = 0;
	uint64_t n_per_loop = matrix == 2607 ? N_2607 : N_2211;
	double cpu_start;
	struct rte_mempool_cache *cache;

	if (use_external_cache) {
		/* Create a user-owned mempool cache. */
		cache = rte_mempool_cache_create(external_cache_size, SOCKET_ID_ANY);
		if (cache == NULL)
			RET_ERR();
	} else {
		/* May be NULL if cache is disabled. */
		cache = rte_mempool_default_cache(mp, lcore_id);
	}

	/* n_get_bulk and n_put_bulk must be divisors of n_keep */
	if (n_max_bulk == 0 && (((n_keep / n_get_bulk) * n_get_bulk) != n_keep))
		GOTO_ERR(ret, out);
	if (n_max_bulk == 0 && (((n_keep / n_put_bulk) * n_put_bulk) != n_keep))
		GOTO_ERR(ret, out);
	/* for constant n, n_get_bulk and n_put_bulk must be the same */
	if (use_constant_values && n_put_bulk != n_get_bulk)
		GOTO_ERR(ret, out);

	stats[lcore_id].enq_count = 0;
	stats[lcore_id].duration_cycles = 0;

	/* wait synchro for workers */
	if (lcore_id != rte_get_main_lcore())
		rte_wait_until_equal_32(&synchro, 1, __ATOMIC_RELAXED);

	if (fixed_objects != 0) {
		/* --objects: one warm-up pass (the cache's first refill), then the counted passes,
		 * each bracketed by callgrind's per-thread collection toggle. */
		uint64_t done = 0;

		ret = matrix == 2607 ? loop_2607(mp, cache) : loop_2211(mp, cache);
		if (ret < 0)
			GOTO_ERR(ret, out);
		cpu_start = clock_cpu ? thread_cpu_s() : 0;
		start_cycles = rte_get_timer_cycles();
		CALLGRIND_TOGGLE_COLLECT;
		while (done < fixed_objects) {
			if (matrix == 2607)
				ret = loop_2607(mp, cache);
			else
				ret = loop_2211(mp, cache);
			if (unlikely(ret < 0))
				break;
			done += n_per_loop;
		}
		CALLGRIND_TOGGLE_COLLECT;
		if (ret < 0)
			GOTO_ERR(ret, out);
		end_cycles = rte_get_timer_cycles();
		stats[lcore_id].enq_count = done;
		stats[lcore_id].duration_cycles = end_cycles - start_cycles;
		if (clock_cpu)
			stats[lcore_id].cpu_s = thread_cpu_s() - cpu_start;
		goto out;
	}

	cpu_start = clock_cpu ? thread_cpu_s() : 0;
	start_cycles = rte_get_timer_cycles();

	/* `time_diff/hz < TIME_S` for integer TIME_S */
	while (time_diff < time_cycles) {
		if (matrix == 2607)
			ret = loop_2607(mp, cache);
		else
			ret = loop_2211(mp, cache);

		if (ret < 0)
			GOTO_ERR(ret, out);

		end_cycles = rte_get_timer_cycles();
		time_diff = end_cycles - start_cycles;
		stats[lcore_id].enq_count += n_per_loop;
	}

	stats[lcore_id].duration_cycles = time_diff;
	if (clock_cpu)
		stats[lcore_id].cpu_s = thread_cpu_s() - cpu_start;

out:
	if (use_external_cache) {
		rte_mempool_cache_flush(cache, mp);
		rte_mempool_cache_free(cache);
	}

	return ret;
}

/* The cell key, in the chosen version's format ("mempool_autotest " + key + "rate_persec=N"). */
static void
print_key(FILE *f, unsigned int cache_size, unsigned int cores)
{
	if (matrix == 2607) {
		fprintf(f, "cache=%u cores=%u n_keep=%5u ", cache_size, cores, n_keep);
		if (n_max_bulk != 0)
			fprintf(f, "n_max_bulk=%3u ", n_max_bulk);
		else
			fprintf(f, "n_get_bulk=%3u n_put_bulk=%3u constant_n=%u ", n_get_bulk,
				n_put_bulk, use_constant_values);
	} else {
		fprintf(f, "cache=%u cores=%u n_get_bulk=%u n_put_bulk=%u n_keep=%u constant_n=%u ",
			cache_size, cores, n_get_bulk, n_put_bulk, n_keep, use_constant_values);
	}
}

static unsigned int
mempool_size(void)
{
	if (matrix == 2607)
		return rte_lcore_count() * (MAX_KEEP_2607 + RTE_MEMPOOL_CACHE_MAX_SIZE * 2) - 1;
	return rte_lcore_count() * (MAX_KEEP_2211 + RTE_MEMPOOL_CACHE_MAX_SIZE) - 1;
}

/* launch all the per-lcore test, and display the result */
static int
launch_cores(struct rte_mempool *mp, unsigned int cores)
{
	unsigned int lcore_id;
	uint64_t rate;
	int ret;
	unsigned int cores_save = cores;
	double hz = rte_get_timer_hz();

	__atomic_store_n(&synchro, 0, __ATOMIC_RELAXED);

	/* reset stats */
	memset(stats, 0, sizeof(stats));

	printf("mempool_autotest ");
	print_key(stdout,
		  use_external_cache ? external_cache_size : (unsigned int)mp->cache_size, cores);

	if (rte_mempool_avail_count(mp) != mempool_size()) {
		printf("mempool is not full\n");
		return -1;
	}

	RTE_LCORE_FOREACH_WORKER(lcore_id) {
		if (cores == 1)
			break;
		cores--;
		rte_eal_remote_launch(per_lcore_mempool_test, mp, lcore_id);
	}

	/* start synchro and launch test on main */
	__atomic_store_n(&synchro, 1, __ATOMIC_RELAXED);

	ret = per_lcore_mempool_test(mp);

	cores = cores_save;
	RTE_LCORE_FOREACH_WORKER(lcore_id) {
		if (cores == 1)
			break;
		cores--;
		if (rte_eal_wait_lcore(lcore_id) < 0)
			ret = -1;
	}

	if (ret < 0) {
		printf("per-lcore test returned -1\n");
		return -1;
	}

	rate = 0;
	if (fixed_objects != 0) {
		/* --objects: the counts of this cell are dumped now, labelled with its key and the
		 * objects all lcores moved in their counted passes; the rate is per cycle (or per
		 * second of CPU time with --clock cpu), as 26.07's formula */
		char key[256], label[320];
		uint64_t objects = 0;
		FILE *f = fmemopen(key, sizeof(key), "w");

		for (lcore_id = 0; lcore_id < RTE_MAX_LCORE; lcore_id++)
			objects += stats[lcore_id].enq_count;
		key[0] = 0;
		if (f != NULL) {
			print_key(f, use_external_cache ? external_cache_size
							: (unsigned int)mp->cache_size,
				  cores_save);
			fclose(f);
		}
		snprintf(label, sizeof(label), "dpdk %sobjects=%" PRIu64, key, objects);
		CALLGRIND_DUMP_STATS_AT(label);
		for (lcore_id = 0; lcore_id < RTE_MAX_LCORE; lcore_id++) {
			if (clock_cpu && stats[lcore_id].cpu_s > 0)
				rate += (double)stats[lcore_id].enq_count / stats[lcore_id].cpu_s;
			else if (!clock_cpu && stats[lcore_id].duration_cycles != 0)
				rate += (double)stats[lcore_id].enq_count * hz /
					(double)stats[lcore_id].duration_cycles;
		}
		printf("rate_persec=%" PRIu64 " objects=%" PRIu64 "\n", rate, objects);
	} else if (clock_cpu) {
		/* not the autotest's: objects per second of each lcore's own CPU time */
		for (lcore_id = 0; lcore_id < RTE_MAX_LCORE; lcore_id++)
			if (stats[lcore_id].cpu_s > 0)
				rate += (double)stats[lcore_id].enq_count / stats[lcore_id].cpu_s;
		printf(matrix == 2607 ? "rate_persec=%10" PRIu64 "\n" : "rate_persec=%" PRIu64 "\n",
		       rate);
	} else if (matrix == 2607) {
		for (lcore_id = 0; lcore_id < RTE_MAX_LCORE; lcore_id++)
			if (stats[lcore_id].duration_cycles != 0)
				rate += (double)stats[lcore_id].enq_count * hz /
					(double)stats[lcore_id].duration_cycles;
		printf("rate_persec=%10" PRIu64 "\n", rate);
	} else {
		/* 22.11: enq_count / TIME_S (integer TIME_S there; --seconds here) */
		for (lcore_id = 0; lcore_id < RTE_MAX_LCORE; lcore_id++)
			rate += (uint64_t)((double)stats[lcore_id].enq_count / time_s);
		printf("rate_persec=%" PRIu64 "\n", rate);
	}
	fflush(stdout);

	return 0;
}

/* ---- cells and the command line ---------------------------------------------------------- */

struct cell {
	unsigned int cache;
	unsigned int cores;
	unsigned int get, put, keep, constant, max_bulk;
};

static struct rte_mempool *mp_nocache, *mp_cache;

static void
set_cell(const struct cell *c)
{
	use_external_cache = c->cache != 0 && mp_cache == NULL;
	n_max_bulk = c->max_bulk;
	n_get_bulk = c->get;
	n_put_bulk = c->put;
	n_keep = c->keep;
	use_constant_values = c->constant;
}

/* Parses "key=value" words (values may be preceded by spaces, as 26.07 prints them). Accepts
 * the autotest's keys and mempool_perf's short ones (get, put, keep, const, max). Returns 0, or
 * -1 with a message. */
static int
parse_cell(const char *s, struct cell *c)
{
	char key[32];
	int have_cores = 0, have_keep = 0, have_get = 0, have_put = 0;

	memset(c, 0, sizeof(*c));
	c->cache = RTE_MEMPOOL_CACHE_MAX_SIZE;
	if (strncmp(s, "mempool_autotest", 16) == 0)
		s += 16;
	while (*s) {
		size_t k = 0;
		char *end;
		unsigned long v;

		while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
			s++;
		if (!*s)
			break;
		while (*s && *s != '=' && *s != ' ' && k + 1 < sizeof(key))
			key[k++] = *s++;
		key[k] = 0;
		if (*s != '=') {
			fprintf(stderr, "mempool_perf: bad cell word \"%s\" (expected key=value)\n",
				key);
			return -1;
		}
		s++;
		while (*s == ' ')
			s++;
		errno = 0;
		v = strtoul(s, &end, 10);
		if (end == s || errno != 0 || v > 1000000) {
			fprintf(stderr, "mempool_perf: bad value for %s\n", key);
			return -1;
		}
		s = end;
		if (!strcmp(key, "cache"))
			c->cache = v;
		else if (!strcmp(key, "cores"))
			c->cores = v, have_cores = 1;
		else if (!strcmp(key, "n_get_bulk") || !strcmp(key, "get"))
			c->get = v, have_get = 1;
		else if (!strcmp(key, "n_put_bulk") || !strcmp(key, "put"))
			c->put = v, have_put = 1;
		else if (!strcmp(key, "n_keep") || !strcmp(key, "keep"))
			c->keep = v, have_keep = 1;
		else if (!strcmp(key, "constant_n") || !strcmp(key, "const"))
			c->constant = v;
		else if (!strcmp(key, "n_max_bulk") || !strcmp(key, "max"))
			c->max_bulk = v;
		else if (!strcmp(key, "rate_persec"))
			; /* a result line given back as a cell: ignore the rate */
		else {
			fprintf(stderr, "mempool_perf: unknown cell key %s\n", key);
			return -1;
		}
	}
	if (!have_cores || !have_keep) {
		fprintf(stderr, "mempool_perf: a cell needs cores= and n_keep=\n");
		return -1;
	}
	if (c->max_bulk == 0 && !(have_get && have_put)) {
		fprintf(stderr, "mempool_perf: a cell needs n_get_bulk= and n_put_bulk= (or "
				"n_max_bulk=)\n");
		return -1;
	}
	return 0;
}

/* Checks a cell against the loop's limits: the same cells the autotest can run. */
static int
check_cell(const struct cell *c)
{
	unsigned int max_keep = matrix == 2607 ? MAX_KEEP_2607 : MAX_KEEP_2211;

	if (c->cache != 0 && c->cache != RTE_MEMPOOL_CACHE_MAX_SIZE) {
		fprintf(stderr, "mempool_perf: cache must be 0 or %u\n", RTE_MEMPOOL_CACHE_MAX_SIZE);
		return -1;
	}
	if (c->cores < 1 || c->cores > rte_lcore_count()) {
		fprintf(stderr, "mempool_perf: cores=%u, but the EAL has %u lcores\n", c->cores,
			rte_lcore_count());
		return -1;
	}
	if (c->keep < 1 || c->keep > max_keep) {
		fprintf(stderr, "mempool_perf: n_keep must be in 1..%u for --matrix %d\n", max_keep,
			matrix);
		return -1;
	}
	if (c->max_bulk != 0) {
		if (matrix != 2607 || (c->max_bulk & (c->max_bulk - 1)) != 0 ||
		    c->max_bulk > c->keep) {
			fprintf(stderr, "mempool_perf: n_max_bulk needs --matrix 2607, a power of 2, "
					"<= n_keep\n");
			return -1;
		}
		return 0;
	}
	if (c->get == 0 || c->put == 0 || c->keep % c->get != 0 || c->keep % c->put != 0) {
		fprintf(stderr, "mempool_perf: n_get_bulk and n_put_bulk must divide n_keep\n");
		return -1;
	}
	if (c->constant && c->get != c->put) {
		fprintf(stderr, "mempool_perf: constant_n=1 needs n_get_bulk == n_put_bulk\n");
		return -1;
	}
	if (c->constant) {
		unsigned int b = c->get;
		int ok = b == 1 || b == 4 || b == CACHE_LINE_BURST || b == 32;

		if (matrix == 2607)
			ok = ok || b == 64 || b == 128 || b == 256 || b == RTE_MEMPOOL_CACHE_MAX_SIZE;
		if (!ok) {
			fprintf(stderr, "mempool_perf: no constant-n loop for bulk %u in --matrix %d\n",
				b, matrix);
			return -1;
		}
	}
	return 0;
}

#define MAX_CELLS 8192
static struct cell cells[MAX_CELLS];
static unsigned int n_cells;

static int
add_cell(const struct cell *c)
{
	if (n_cells == MAX_CELLS) {
		fprintf(stderr, "mempool_perf: too many cells\n");
		return -1;
	}
	cells[n_cells++] = *c;
	return 0;
}

/* True when every whitespace-separated word of `filter` occurs in `key` as a whole word (after
 * squeezing 26.07's padding: "n_keep=  512" is the word "n_keep=512"); a filter of
 * alternatives separated by '|' matches when one of them does. */
static int
matches(const char *key, const char *filter)
{
	char squeezed[256], padded[260], word[64];
	size_t i = 0, j = 0;
	const char *bar;

	if (filter == NULL)
		return 1;
	bar = strchr(filter, '|');
	if (bar != NULL) {
		char alt[256];
		size_t n = (size_t)(bar - filter);
		int empty = 1;

		if (n >= sizeof(alt))
			n = sizeof(alt) - 1;
		memcpy(alt, filter, n);
		alt[n] = 0;
		for (i = 0; i < n; i++)
			if (alt[i] != ' ')
				empty = 0;
		if (!empty && matches(key, alt))
			return 1;
		/* a blank last alternative matches nothing (a blank filter matches everything) */
		for (i = 1; bar[i] == ' '; i++)
			;
		return bar[i] != 0 && matches(key, bar + 1);
	}
	/* drop spaces after '=' */
	for (; key[i] && j + 1 < sizeof(squeezed); i++) {
		if (key[i] == ' ' && j > 0 && squeezed[j - 1] == '=')
			continue;
		squeezed[j++] = key[i];
	}
	squeezed[j] = 0;
	snprintf(padded, sizeof(padded), " %s ", squeezed);
	while (*filter) {
		size_t k = 0;
		char needle[70];

		while (*filter == ' ')
			filter++;
		if (!*filter)
			break;
		while (*filter && *filter != ' ' && k + 1 < sizeof(word))
			word[k++] = *filter++;
		word[k] = 0;
		snprintf(needle, sizeof(needle), " %s ", word);
		if (strstr(padded, needle) == NULL)
			return 0;
	}
	return 1;
}

static int
cell_matches(const struct cell *c, const char *filter)
{
	char key[256];
	FILE *f = fmemopen(key, sizeof(key), "w");

	if (f == NULL)
		return 0;
	n_keep = c->keep, n_max_bulk = c->max_bulk, n_get_bulk = c->get, n_put_bulk = c->put;
	use_constant_values = c->constant;
	print_key(f, c->cache, c->cores);
	fclose(f);
	return matches(key, filter);
}

/* The autotest's cells for one (cache, cores), in its order. */
static int
add_matrix(unsigned int cache, unsigned int cores, const char *filter)
{
	static const unsigned int get_2211[] = {1, 4, CACHE_LINE_BURST, 32, 0};
	static const unsigned int keep_2211[] = {32, 128, 512, 0};
	static const unsigned int max_2607[] = {CACHE_LINE_BURST, 32, 64, 128, 256,
						RTE_MEMPOOL_CACHE_MAX_SIZE, 0};
	static const unsigned int get_2607[] = {1, 4, CACHE_LINE_BURST, 32, 64, 128, 256,
						RTE_MEMPOOL_CACHE_MAX_SIZE, 0};
	static const unsigned int keep_2607[] = {32, 128, 512, 2048, 8192, 32768, 0};
	const unsigned int *g, *p, *k, *m;
	struct cell c = {.cache = cache, .cores = cores};

#define ADD()                                                                                \
	do {                                                                                 \
		if (cell_matches(&c, filter) && add_cell(&c) < 0)                            \
			return -1;                                                           \
	} while (0)

	if (matrix == 2211) {
		for (g = get_2211; *g; g++)
			for (p = get_2211; *p; p++)
				for (k = keep_2211; *k; k++) {
					c.get = *g, c.put = *p, c.keep = *k, c.constant = 0;
					ADD();
					if (*g == *p) {
						c.constant = 1;
						ADD();
					}
				}
		return 0;
	}
	for (k = keep_2607; *k; k++)
		for (m = max_2607; *m; m++) {
			if (*k < *m)
				continue;
			c.max_bulk = *m, c.keep = *k, c.get = 0, c.put = 0, c.constant = 0;
			ADD();
		}
	c.max_bulk = 0;
	for (k = keep_2607; *k; k++)
		for (g = get_2607; *g; g++)
			for (p = get_2607; *p; p++) {
				if (*k < *g || *k < *p)
					continue;
				c.get = *g, c.put = *p, c.keep = *k, c.constant = 0;
				ADD();
				if (*g == *p) {
					c.constant = 1;
					ADD();
				}
			}
	return 0;
#undef ADD
}

/* Parses "1,2" into vals (max n); returns the count or -1. */
static int
parse_list(const char *s, unsigned int *vals, int n)
{
	int count = 0;

	while (*s) {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(s, &end, 10);
		if (end == s || errno != 0 || v > 1000000 || count == n)
			return -1;
		vals[count++] = v;
		s = end;
		if (*s == ',')
			s++;
		else if (*s)
			return -1;
	}
	return count;
}

static int
run_cell(const struct cell *c, unsigned int reps)
{
	unsigned int r;

	if (check_cell(c) < 0)
		return -1;
	if (c->cache == 0 || mp_cache == NULL) {
		if (mp_nocache == NULL)
			return -1;
	}
	for (r = 0; r < reps; r++) {
		/* --objects: N then 2N objects per lcore (the difference of the two counts is the
		 * loop's cost for N objects, every fixed cost cancelled) */
		uint64_t mult;

		for (mult = 1; mult <= (objects_opt ? 2 : 1); mult++) {
			fixed_objects = mult * objects_opt;
			set_cell(c);
			if (launch_cores(c->cache ? (mp_cache ? mp_cache : mp_nocache)
						  : mp_nocache,
					 c->cores) < 0)
				return -1;
		}
	}
	return 0;
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: mempool_perf [EAL options] -- [--matrix 2211|2607] [--cache LIST] "
		   "[--user-cache] [--cores LIST] [--seconds S | --objects N] [--reps R] "
		   "[--clock wall|cpu] "
		   "[--filter WORDS] "
		   "[--cell KEY]... [--list] [--stdin]\n"
		   "(see the comment at the top of bench/dpdk/mempool_perf.c)\n");
}

int
main(int argc, char **argv)
{
	unsigned int caches[4] = {RTE_MEMPOOL_CACHE_MAX_SIZE}, cores[64];
	int n_caches = 1, n_cores = 0, list = 0, from_stdin = 0, user_cache = 0, i, ret;
	unsigned int reps = 1, j, l;
	const char *filter = NULL;
	const char *cell_args[256];
	int n_cell_args = 0;
	double seconds = 0;

	ret = rte_eal_init(argc, argv);
	if (ret < 0) {
		fprintf(stderr, "mempool_perf: rte_eal_init failed (run as root; try --no-huge)\n");
		return 1;
	}
	argc -= ret;
	argv += ret;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--list")) {
			list = 1;
			continue;
		}
		if (!strcmp(a, "--stdin")) {
			from_stdin = 1;
			continue;
		}
		if (!strcmp(a, "--user-cache")) {
			user_cache = 1;
			continue;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			rte_eal_cleanup();
			return 0;
		}
		if (v == NULL) {
			fprintf(stderr, "mempool_perf: %s needs a value (or is unknown)\n", a);
			usage(stderr);
			return 1;
		}
		i++;
		if (!strcmp(a, "--matrix")) {
			matrix = atoi(v);
			if (matrix != 2211 && matrix != 2607) {
				fprintf(stderr, "mempool_perf: --matrix is 2211 or 2607\n");
				return 1;
			}
		} else if (!strcmp(a, "--cache")) {
			n_caches = parse_list(v, caches, 4);
			for (j = 0; n_caches > 0 && j < (unsigned int)n_caches; j++)
				if (caches[j] != 0 && caches[j] != RTE_MEMPOOL_CACHE_MAX_SIZE)
					n_caches = -1;
			if (n_caches <= 0) {
				fprintf(stderr, "mempool_perf: --cache takes 0 and/or %u\n",
					RTE_MEMPOOL_CACHE_MAX_SIZE);
				return 1;
			}
		} else if (!strcmp(a, "--cores")) {
			n_cores = parse_list(v, cores, 64);
			if (n_cores <= 0) {
				fprintf(stderr, "mempool_perf: bad --cores %s\n", v);
				return 1;
			}
		} else if (!strcmp(a, "--seconds")) {
			seconds = atof(v);
			if (!(seconds > 0 && seconds < 3600)) {
				fprintf(stderr, "mempool_perf: bad --seconds %s\n", v);
				return 1;
			}
		} else if (!strcmp(a, "--reps")) {
			reps = atoi(v);
			if (reps < 1 || reps > 1000) {
				fprintf(stderr, "mempool_perf: bad --reps %s\n", v);
				return 1;
			}
		} else if (!strcmp(a, "--clock")) {
			if (!strcmp(v, "cpu"))
				clock_cpu = 1;
			else if (strcmp(v, "wall") != 0) {
				fprintf(stderr, "mempool_perf: --clock is wall or cpu\n");
				return 1;
			}
		} else if (!strcmp(a, "--objects")) {
			char *end;

			errno = 0;
			objects_opt = strtoull(v, &end, 10);
			if (end == v || *end || errno != 0 || objects_opt == 0 ||
			    objects_opt > (1ULL << 40)) {
				fprintf(stderr, "mempool_perf: bad --objects %s\n", v);
				return 1;
			}
		} else if (!strcmp(a, "--filter")) {
			filter = v;
		} else if (!strcmp(a, "--cell")) {
			if (n_cell_args == 256) {
				fprintf(stderr, "mempool_perf: too many --cell\n");
				return 1;
			}
			cell_args[n_cell_args++] = v;
		} else {
			fprintf(stderr, "mempool_perf: unknown argument %s\n", a);
			usage(stderr);
			return 1;
		}
	}
	if (seconds == 0)
		seconds = matrix == 2607 ? 1 : 5;
	time_s = seconds;
	time_cycles = (uint64_t)(seconds * (double)rte_get_timer_hz());
	if (n_cores == 0) {
		cores[n_cores++] = 1;
		if (rte_lcore_count() >= 2)
			cores[n_cores++] = 2;
	}

	for (i = 0; i < n_cell_args; i++) {
		struct cell c;

		if (parse_cell(cell_args[i], &c) < 0 || add_cell(&c) < 0)
			return 1;
	}
	if (n_cell_args == 0 && !from_stdin)
		for (l = 0; l < (unsigned int)n_caches; l++)
			for (j = 0; j < (unsigned int)n_cores; j++)
				if (add_matrix(caches[l], cores[j], filter) < 0)
					return 1;

	if (list) {
		for (j = 0; j < n_cells; j++) {
			set_cell(&cells[j]);
			print_key(stdout, cells[j].cache, cells[j].cores);
			printf("\n");
		}
		rte_eal_cleanup();
		return 0;
	}

	/* The autotest's pools: no cache first, then the per-lcore cache. */
	mp_nocache = rte_mempool_create("perf_test_nocache", mempool_size(), MEMPOOL_ELT_SIZE, 0,
					0, NULL, NULL, my_obj_init, NULL, SOCKET_ID_ANY, 0);
	if (mp_nocache == NULL) {
		fprintf(stderr, "mempool_perf: cannot allocate mempool (without cache): %s "
				"(give the EAL more memory: -m 512, or -m 1024 for --matrix 2607 "
				"with 2 lcores)\n",
			rte_strerror(rte_errno));
		return 1;
	}
	if (!user_cache) {
		mp_cache = rte_mempool_create("perf_test_cache", mempool_size(), MEMPOOL_ELT_SIZE,
					      RTE_MEMPOOL_CACHE_MAX_SIZE, 0, NULL, NULL,
					      my_obj_init, NULL, SOCKET_ID_ANY, 0);
		if (mp_cache == NULL) {
			fprintf(stderr, "mempool_perf: cannot allocate mempool (with cache): %s\n",
				rte_strerror(rte_errno));
			return 1;
		}
	}
	if (objects_opt != 0) {
		printf("mempool_perf: %s, --matrix %d (%s's loops), %" PRIu64 " then %" PRIu64
		       " objects per lcore per cell (whole passes, after a warm-up pass; callgrind: "
		       "%s), %u rep(s), %u lcores, %s cache, %s clock\n",
		       rte_version(), matrix, matrix == 2607 ? "26.07" : "22.11", objects_opt,
		       2 * objects_opt,
#ifdef HAVE_CALLGRIND
		       "dumps per cell",
#else
		       "no valgrind/callgrind.h at build time, no dumps",
#endif
		       reps, rte_lcore_count(), user_cache ? "user-owned" : "per-lcore default",
		       clock_cpu ? "cpu" : "wall");
	} else {
		printf("mempool_perf: %s, --matrix %d (%s's loops and rate formula), %.3g s per "
		       "cell, %u rep(s), %u lcores, %s cache, %s clock\n",
		       rte_version(), matrix, matrix == 2607 ? "26.07" : "22.11", seconds, reps,
		       rte_lcore_count(), user_cache ? "user-owned" : "per-lcore default",
		       clock_cpu ? "cpu" : "wall");
	}
	fflush(stdout);

	ret = 0;
	for (j = 0; j < n_cells && ret == 0; j++)
		ret = run_cell(&cells[j], reps);
	if (from_stdin && ret == 0) {
		char line[512];

		while (fgets(line, sizeof(line), stdin) != NULL) {
			struct cell c;

			if (line[0] == '\n' || line[0] == '#')
				continue;
			if (parse_cell(line, &c) < 0 || run_cell(&c, reps) < 0) {
				printf("mempool_perf: cell failed: %s", line);
				fflush(stdout);
				ret = -1;
				break;
			}
		}
	}

	rte_mempool_free(mp_cache);
	rte_mempool_free(mp_nocache);
	rte_eal_cleanup();
	return ret == 0 ? 0 : 1;
}
