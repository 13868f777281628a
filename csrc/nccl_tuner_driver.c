/*
 * Drives an NCCL tuner plugin the way NCCL does, without NCCL or a GPU: for tests and `export nccl-plugin --show`.
 *
 * Usage: nccl_tuner_driver PLUGIN.so ABI_VERSION NRANKS NNODES, which creates communicator 0, then one line
 * on stdin per query or command. ABI_VERSION 0 looks the symbols up as NCCL 2.30 does (v6, then v5 .. v2,
 * src/plugin/tuner.cc lines 73-85 at v2.30.7-1) and prints "symbol NAME vN" and, for v6, "chunk none" or
 * "chunk set" (NCCL calls getChunkSize only where it is not NULL, src/enqueue.cc line 2308). Then:
 *   COLL NBYTES NUMPIPEOPS REGBUFF NUMALGO COST[NUMALGO*3]     (costs in us; -1 = NCCL_ALGO_PROTO_IGNORE)
 *   open NRANKS NNODES      another communicator (the next number), which later queries go to
 *   use K / close K         queries go to communicator K / communicator K is destroyed
 *   time N QUERY            the query N times: "time NS_PER_CALL EXAMINED_PER_CALL" (-1 without the counter)
 *   race N                  one thread asks the current communicator while this one creates and destroys
 *                           another N times, as NCCL does for communicators made while others enqueue
 * and on stdout: "log LEVEL MESSAGE" for every logger call, "init RC" per communicator created, per query
 * "pick ALGO PROTO NCHANNELS RC" then "table COST..." (the table after the plugin), "race CALLS CYCLES", and
 * "final RC" per communicator destroyed (those still open at the end are destroyed then, last first).
 *
 * What it mirrors: the plugin is dlopened and its ncclTunerPlugin_vN symbol looked up (src/plugin/tuner.cc);
 * init gets NCCL's variadic logger; per call, ncclGetAlgoInfo (src/enqueue.cc) hands v3+ the cost table
 * [NUMALGO][3] with -1.0 in ignored cells and nMaxChannels = 0, then topoGetAlgoInfo picks the cheapest
 * cell >= 0. v1/v2 get the support flags NCCL's v2 adapter derives from the table (src/plugin/tuner/
 * tuner_v2.cc) and their pair is applied as that adapter does: its cell set to 0 unless ignored.
 */
#include <dlfcn.h>
#include <float.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int ncclResult_t;
typedef void (*logger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);
typedef ncclResult_t (*init12_t)(size_t, size_t, logger_t, void**);
typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t, size_t, logger_t);
  ncclResult_t (*info)(int, size_t, int, int, int, int*, int*, int*);
  ncclResult_t (*destroy)(void);
} v1_t;
typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t, size_t, logger_t, void**);
  ncclResult_t (*info)(void*, int, size_t, int, int, int, int*, int*, int*);
  ncclResult_t (*destroy)(void*);
} v2_t;
typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t, size_t, logger_t, void**);
  ncclResult_t (*info)(void*, int, size_t, int, float**, int, int, int*);
  ncclResult_t (*destroy)(void*);
} v3_t;
typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t, size_t, logger_t, void**);
  ncclResult_t (*info)(void*, int, size_t, int, float**, int, int, int, int*);
  ncclResult_t (*destroy)(void*);
} v4_t;
typedef struct {
  int nNvlDomains, minRanksPerNvlDomain, maxRanksPerNvlDomain;
} nvl_t;
typedef struct {
  const char* name;
  ncclResult_t (*init)(void**, uint64_t, size_t, size_t, logger_t, nvl_t*, void*);
  ncclResult_t (*info)(void*, int, size_t, int, float**, int, int, int, int*);
  ncclResult_t (*finalize)(void*);
} v5_t;
typedef struct {
  const char* name;
  ncclResult_t (*init)(void**, uint64_t, size_t, size_t, logger_t, nvl_t*, void*);
  ncclResult_t (*info)(void*, int, size_t, int, float**, int, int, int, int*);
  ncclResult_t (*finalize)(void*);
  ncclResult_t (*getChunkSize)(void*, int, size_t, int, int, int, size_t*);
} v6_t; /* v5's members, then getChunkSize: called as v5's */

#define NPROTO 3
#define MAXALGO 16
#define MAXCOMMS 64
#define IGNORE -1.0f

static void logger(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  (void)flags;
  (void)file;
  (void)line;
  va_list args;
  va_start(args, fmt);
  flockfile(stdout);
  printf("log %d ", level);
  vprintf(fmt, args);
  printf("\n");
  fflush(stdout);
  funlockfile(stdout);
  va_end(args);
}

static int version;
static void* sym;
static unsigned long long (*examined)(void*);

typedef struct {
  void* ctx;
  int open;
} Comm;

static int create(size_t nRanks, size_t nNodes, void** ctx) {
  nvl_t nvl = {1, (int)nRanks, (int)nRanks};
  double constants[144] = {0}; /* sizeof(ncclTunerConstants_v5_t): 7x3 + 3x7x3 + 5 x 4x3 doubles */
  *ctx = NULL;
  switch (version) {
    case 1: return ((v1_t*)sym)->init(nRanks, nNodes, logger);
    case 2: return ((v2_t*)sym)->init(nRanks, nNodes, logger, ctx);
    case 3: return ((v3_t*)sym)->init(nRanks, nNodes, logger, ctx);
    case 4: return ((v4_t*)sym)->init(nRanks, nNodes, logger, ctx);
    default: return ((v5_t*)sym)->init(ctx, 42, nRanks, nNodes, logger, &nvl, constants);
  }
}

static int destroy(void* ctx) {
  switch (version) {
    case 1: return ((v1_t*)sym)->destroy();
    case 2:
    case 3:
    case 4: return ((v2_t*)sym)->destroy(ctx);
    default: return ((v5_t*)sym)->finalize(ctx);
  }
}

typedef struct {
  int coll, pipeOps, regBuff, numAlgo;
  unsigned long long nBytes;
  float table[MAXALGO][NPROTO];
} Query;

/* One call as ncclGetAlgoInfo makes it; the table is the query's own copy, changed as NCCL's would be. */
static int call(void* ctx, Query* q, int* nChannels) {
  int algo = -1, proto = -1, rc;
  *nChannels = 0;
  if (version <= 2) {
    /* NCCL's v2 adapter: collNet from CollNetChain/Simple, NVLS from NVLS or NVLSTree/Simple. */
    int collNet = q->numAlgo > 3 && q->table[3][2] != IGNORE;
    int nvls = q->numAlgo > 5 && (q->table[4][2] != IGNORE || q->table[5][2] != IGNORE);
    rc = version == 1
           ? ((v1_t*)sym)->info(q->coll, q->nBytes, collNet, nvls, q->pipeOps, &algo, &proto, nChannels)
           : ((v2_t*)sym)->info(ctx, q->coll, q->nBytes, collNet, nvls, q->pipeOps, &algo, &proto, nChannels);
    if (algo >= 0 && algo < q->numAlgo && proto >= 0 && proto < NPROTO && q->table[algo][proto] != IGNORE)
      q->table[algo][proto] = 0.0f;
  } else if (version == 3) {
    rc = ((v3_t*)sym)->info(ctx, q->coll, q->nBytes, q->pipeOps, (float**)q->table, q->numAlgo, NPROTO, nChannels);
  } else if (version == 4) {
    rc = ((v4_t*)sym)->info(ctx, q->coll, q->nBytes, q->pipeOps, (float**)q->table, q->numAlgo, NPROTO, q->regBuff,
                            nChannels);
  } else {
    rc = ((v5_t*)sym)->info(ctx, q->coll, q->nBytes, q->pipeOps, (float**)q->table, q->numAlgo, NPROTO, q->regBuff,
                            nChannels);
  }
  return rc;
}

/* COLL NBYTES NUMPIPEOPS REGBUFF NUMALGO COSTS... from text; 0 when malformed. */
static int parseQuery(char* text, Query* q) {
  int used = 0;
  if (sscanf(text, "%d %llu %d %d %d%n", &q->coll, &q->nBytes, &q->pipeOps, &q->regBuff, &q->numAlgo, &used) != 5)
    return 0;
  if (q->numAlgo < 1 || q->numAlgo > MAXALGO) return 0;
  text += used;
  for (int a = 0; a < q->numAlgo; a++)
    for (int p = 0; p < NPROTO; p++) {
      if (sscanf(text, "%f%n", &q->table[a][p], &used) != 1) return 0;
      text += used;
    }
  return 1;
}

static void answer(void* ctx, Query* q) {
  int nChannels;
  int rc = call(ctx, q, &nChannels);
  float best = FLT_MAX;
  int algo = -1, proto = -1;
  for (int a = 0; a < q->numAlgo; a++)
    for (int p = 0; p < NPROTO; p++)
      if (q->table[a][p] != IGNORE && q->table[a][p] >= 0.0f && q->table[a][p] < best) {
        best = q->table[a][p];
        algo = a;
        proto = p;
      }
  flockfile(stdout);
  printf("pick %d %d %d %d\ntable", algo, proto, nChannels, rc);
  for (int a = 0; a < q->numAlgo; a++)
    for (int p = 0; p < NPROTO; p++) printf(" %g", q->table[a][p]);
  printf("\n");
  fflush(stdout);
  funlockfile(stdout);
}

static double nowNs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

typedef struct {
  void* ctx;
  volatile int started, stop;
  long calls;
} Race;

static void* raceAsker(void* arg) {
  Race* race = arg;
  Query q = {.coll = 4, .pipeOps = 1, .regBuff = -1, .numAlgo = 7};
  __atomic_store_n(&race->started, 1, __ATOMIC_SEQ_CST);
  while (!__atomic_load_n(&race->stop, __ATOMIC_SEQ_CST)) {
    for (int a = 0; a < 7; a++)
      for (int p = 0; p < NPROTO; p++) q.table[a][p] = 100.0f;
    q.nBytes = (unsigned long long)(race->calls * 4099 % (1 << 24));
    int nChannels;
    call(race->ctx, &q, &nChannels);
    race->calls++;
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s PLUGIN.so ABI_VERSION NRANKS NNODES < queries\n", argv[0]);
    return 2;
  }
  version = atoi(argv[2]);
  size_t nRanks = (size_t)strtoull(argv[3], NULL, 10), nNodes = (size_t)strtoull(argv[4], NULL, 10);
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 3;
  }
  char symbol[32];
  for (int v = version == 0 ? 6 : version; v >= (version == 0 ? 2 : version) && sym == NULL; v--) {
    snprintf(symbol, sizeof(symbol), "ncclTunerPlugin_v%d", v);
    sym = dlsym(lib, symbol);
    if (sym != NULL) version = v;
  }
  if (sym == NULL) {
    fprintf(stderr, "no symbol %s\n", symbol);
    return 4;
  }
  /* Every version's struct opens with its name (tuner_v2.h .. tuner_v6.h). */
  printf("symbol %s v%d\n", ((v1_t*)sym)->name, version);
  if (version == 6) printf("chunk %s\n", ((v6_t*)sym)->getChunkSize == NULL ? "none" : "set");
  *(void**)&examined = dlsym(lib, "collbenchTunerExamined");
  static Comm comms[MAXCOMMS];
  int nComms = 1, current = 0;
  comms[0].open = 1;
  printf("init %d\n", create(nRanks, nNodes, &comms[0].ctx));
  fflush(stdout);
  char* line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, stdin) >= 0) {
    char word[16] = "";
    int used = 0;
    sscanf(line, "%15s%n", word, &used);
    char* rest = line + used;
    Query q;
    if (strcmp(word, "open") == 0) {
      unsigned long long r, n;
      if (sscanf(rest, "%llu %llu", &r, &n) != 2 || nComms == MAXCOMMS) return 5;
      current = nComms++;
      comms[current].open = 1;
      printf("init %d\n", create((size_t)r, (size_t)n, &comms[current].ctx));
    } else if (strcmp(word, "use") == 0 || strcmp(word, "close") == 0) {
      int k;
      if (sscanf(rest, "%d", &k) != 1 || k < 0 || k >= nComms || !comms[k].open) return 5;
      if (word[0] == 'u') {
        current = k;
      } else {
        comms[k].open = 0;
        printf("final %d\n", destroy(comms[k].ctx));
      }
    } else if (strcmp(word, "time") == 0) {
      long n;
      int more = 0;
      if (sscanf(rest, "%ld%n", &n, &more) != 1 || n < 1 || !parseQuery(rest + more, &q)) return 5;
      Query fresh = q;
      unsigned long long before = examined ? examined(version == 1 ? NULL : comms[current].ctx) : 0;
      double t0 = nowNs();
      for (long i = 0; i < n; i++) {
        int nChannels;
        q = fresh;
        call(comms[current].ctx, &q, &nChannels);
      }
      double perCall = (nowNs() - t0) / n;
      double seen = examined ? (double)(examined(version == 1 ? NULL : comms[current].ctx) - before) / n : -1.0;
      printf("time %.1f %.2f\n", perCall, seen);
    } else if (strcmp(word, "race") == 0) {
      long n;
      if (sscanf(rest, "%ld", &n) != 1 || n < 1) return 5;
      Race race = {comms[current].ctx, 0, 0, 0};
      pthread_t asker;
      if (pthread_create(&asker, NULL, raceAsker, &race) != 0) return 6;
      while (!__atomic_load_n(&race.started, __ATOMIC_SEQ_CST)) {
      }
      for (long i = 0; i < n; i++) {
        void* other;
        create(nRanks, nNodes, &other);
        destroy(other);
      }
      __atomic_store_n(&race.stop, 1, __ATOMIC_SEQ_CST);
      pthread_join(asker, NULL);
      printf("race %ld %ld\n", race.calls, n);
    } else if (parseQuery(line, &q)) {
      answer(comms[current].ctx, &q);
    } else if (word[0] != '\0') {
      fprintf(stderr, "cannot read: %s", line);
      return 5;
    }
    fflush(stdout);
  }
  free(line);
  for (int k = nComms - 1; k >= 0; k--)
    if (comms[k].open) printf("final %d\n", destroy(comms[k].ctx));
  dlclose(lib);
  return 0;
}
