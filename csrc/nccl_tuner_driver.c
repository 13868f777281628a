/*
 * Drives an NCCL tuner plugin the way NCCL does, without NCCL or a GPU: for tests and `export nccl-plugin --show`.
 *
 * Usage: nccl_tuner_driver PLUGIN.so ABI_VERSION NRANKS NNODES, then one query a line on stdin:
 *   COLL NBYTES NUMPIPEOPS REGBUFF NUMALGO COST[NUMALGO*3]     (costs in us; -1 = NCCL_ALGO_PROTO_IGNORE)
 * and on stdout: "log LEVEL MESSAGE" for every logger call, "init RC", per query "pick ALGO PROTO NCHANNELS RC"
 * then "table COST..." (the table after the plugin), and "final RC".
 *
 * What it mirrors: the plugin is dlopened and its ncclTunerPlugin_vN symbol looked up (src/plugin/tuner.cc);
 * init gets NCCL's variadic logger; per call, ncclGetAlgoInfo (src/enqueue.cc) hands v3+ the cost table
 * [NUMALGO][3] with -1.0 in ignored cells and nMaxChannels = 0, then topoGetAlgoInfo picks the cheapest
 * cell >= 0. v1/v2 get the support flags NCCL's v2 adapter derives from the table (src/plugin/tuner/
 * tuner_v2.cc) and their pair is applied as that adapter does: its cell set to 0 unless ignored.
 */
#include <dlfcn.h>
#include <float.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
} v5_t; /* v6 starts with the same members */

#define NPROTO 3
#define IGNORE -1.0f

static void logger(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  (void)flags;
  (void)file;
  (void)line;
  va_list args;
  va_start(args, fmt);
  printf("log %d ", level);
  vprintf(fmt, args);
  printf("\n");
  va_end(args);
  fflush(stdout);
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s PLUGIN.so ABI_VERSION NRANKS NNODES < queries\n", argv[0]);
    return 2;
  }
  int version = atoi(argv[2]);
  size_t nRanks = (size_t)strtoull(argv[3], NULL, 10), nNodes = (size_t)strtoull(argv[4], NULL, 10);
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 3;
  }
  char symbol[32];
  snprintf(symbol, sizeof(symbol), "ncclTunerPlugin_v%d", version);
  void* sym = dlsym(lib, symbol);
  if (sym == NULL) {
    fprintf(stderr, "no symbol %s\n", symbol);
    return 4;
  }
  void* ctx = NULL;
  ncclResult_t rc;
  nvl_t nvl = {1, (int)nRanks, (int)nRanks};
  double constants[144] = {0}; /* sizeof(ncclTunerConstants_v5_t): 7x3 + 3x7x3 + 5 x 4x3 doubles */
  switch (version) {
    case 1: rc = ((v1_t*)sym)->init(nRanks, nNodes, logger); break;
    case 2: rc = ((v2_t*)sym)->init(nRanks, nNodes, logger, &ctx); break;
    case 3: rc = ((v3_t*)sym)->init(nRanks, nNodes, logger, &ctx); break;
    case 4: rc = ((v4_t*)sym)->init(nRanks, nNodes, logger, &ctx); break;
    default: rc = ((v5_t*)sym)->init(&ctx, 42, nRanks, nNodes, logger, &nvl, constants); break;
  }
  printf("init %d\n", rc);
  fflush(stdout);
  int coll, pipeOps, regBuff, numAlgo;
  unsigned long long nBytes;
  while (scanf("%d %llu %d %d %d", &coll, &nBytes, &pipeOps, &regBuff, &numAlgo) == 5) {
    if (numAlgo < 1 || numAlgo > 16) return 5;
    float table[16][NPROTO];
    for (int a = 0; a < numAlgo; a++)
      for (int p = 0; p < NPROTO; p++)
        if (scanf("%f", &table[a][p]) != 1) return 5;
    int nChannels = 0, algo = -1, proto = -1;
    if (version <= 2) {
      /* NCCL's v2 adapter: collNet from CollNetChain/Simple, NVLS from NVLS or NVLSTree/Simple. */
      int collNet = numAlgo > 3 && table[3][2] != IGNORE;
      int nvls = numAlgo > 5 && (table[4][2] != IGNORE || table[5][2] != IGNORE);
      rc = version == 1 ? ((v1_t*)sym)->info(coll, nBytes, collNet, nvls, pipeOps, &algo, &proto, &nChannels)
                        : ((v2_t*)sym)->info(ctx, coll, nBytes, collNet, nvls, pipeOps, &algo, &proto, &nChannels);
      if (algo >= 0 && algo < numAlgo && proto >= 0 && proto < NPROTO && table[algo][proto] != IGNORE)
        table[algo][proto] = 0.0f;
    } else if (version == 3) {
      rc = ((v3_t*)sym)->info(ctx, coll, nBytes, pipeOps, (float**)table, numAlgo, NPROTO, &nChannels);
    } else if (version == 4) {
      rc = ((v4_t*)sym)->info(ctx, coll, nBytes, pipeOps, (float**)table, numAlgo, NPROTO, regBuff, &nChannels);
    } else {
      rc = ((v5_t*)sym)->info(ctx, coll, nBytes, pipeOps, (float**)table, numAlgo, NPROTO, regBuff, &nChannels);
    }
    float best = FLT_MAX;
    algo = proto = -1;
    for (int a = 0; a < numAlgo; a++)
      for (int p = 0; p < NPROTO; p++)
        if (table[a][p] != IGNORE && table[a][p] >= 0.0f && table[a][p] < best) {
          best = table[a][p];
          algo = a;
          proto = p;
        }
    printf("pick %d %d %d %d\ntable", algo, proto, nChannels, rc);
    for (int a = 0; a < numAlgo; a++)
      for (int p = 0; p < NPROTO; p++) printf(" %g", table[a][p]);
    printf("\n");
    fflush(stdout);
  }
  switch (version) {
    case 1: rc = ((v1_t*)sym)->destroy(); break;
    case 2:
    case 3:
    case 4: rc = ((v2_t*)sym)->destroy(ctx); break;
    default: rc = ((v5_t*)sym)->finalize(ctx); break;
  }
  printf("final %d\n", rc);
  dlclose(lib);
  return 0;
}
