/*
 * collbench's NCCL tuner plugin: applies the rules of `collbench export nccl-tuner` (NCCL_TUNER_CONFIG_FILE).
 *
 * Requirements: a C compiler and libc; no CUDA, no NCCL headers. Selected by NCCL_TUNER_PLUGIN=<this .so>.
 *
 * ABI. Declared here from NCCL's own plugin headers (NVIDIA/nccl src/include/plugin/tuner/tuner_v2.h ..
 * tuner_v6.h, and src/include/nccl_tuner.h of 2.19 for v1). NCCL dlsyms the newest symbol it knows:
 * 2.19-2.20 ncclTunerPlugin_v1; 2.21 v2; 2.22-2.23 v3; 2.24-2.27 v4; 2.28-2.29 v5; 2.30 v6 (each falling back
 * to older ones, src/plugin/tuner.cc). Every version is exported, so one build serves NCCL 2.19 to 2.30.
 *
 * What it does (ncclGetAlgoInfo, src/enqueue.cc): NCCL fills a cost table [algorithm][protocol] of floats,
 * -1.0 (NCCL_ALGO_PROTO_IGNORE) where it cannot run a pair, asks the plugin, then takes the cheapest cell
 * that is >= 0. For the first config line matching the collective, size (inclusive), nRanks and nNodes
 * (-1: any) whose cell is not ignored, the plugin sets that one cell to 0.0 and nothing else; a line whose
 * cell is ignored is passed over (as NCCL's example plugin does), so NCCL keeps its choice. *nChannels is
 * 0 (NCCL's own count) unless the line names a count: NCCL's example plugin writes 1 there first, which
 * runs every collective it matches on one channel. v1/v2 have no table: the plugin returns the pair only
 * where NCCL could run it (the same table NCCL's tuning.cc applies; CollNet/NVLS by the support flags).
 *
 * Never fails NCCL: a missing, empty or malformed file, or one that is not a regular file of at most 64 MiB
 * with lines of at most 4 KiB (text: a UTF-8 byte-order mark is passed over, UTF-16 and NUL bytes are named),
 * is one warning through NCCL's logger and no overrides; init always succeeds and never waits (a FIFO is
 * opened without blocking and refused). A line whose channel count NCCL cannot hold is skipped with a
 * warning, and past MAX_RULES lines the rest of the file is ignored with one.
 *
 * Cost per call: NCCL asks before every collective it enqueues, so init indexes the lines that fit the
 * communicator's shape (per collective, per what decides whether NCCL can take them, the first line covering
 * each stretch of sizes) and a call is a few binary searches, whatever the file's length.
 *
 * This file is what NCCL sees: the versioned entry points. The config file is read in nccl_tuner_rules.c,
 * indexed and looked up in nccl_tuner_index.c; nccl_tuner.h holds what the three share.
 */
#include <pthread.h>
#include <stdlib.h>

#include "nccl_tuner.h"

/* --- NCCL's versioned ABI, as its headers declare it ------------------------------------------------ */

typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v5_t;

/* v5/v6 pass this for the plugin to edit; collbench leaves NCCL's constants alone. */
typedef struct ncclTunerConstants_v5 ncclTunerConstants_v5_t;

/* The entry points' signatures, each named once for the versions that share it; a struct member of a
 * function-pointer typedef has the same layout as the member written out, so the structs below are NCCL's. */
typedef ncclResult_t (*ncclTunerInitV2_t)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                                          void** context); /* v2..v4 */
typedef ncclResult_t (*ncclTunerInitV5_t)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                                          ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t* nvlDomainInfo,
                                          ncclTunerConstants_v5_t* constants); /* v5, v6 */
typedef ncclResult_t (*ncclTunerCostTableV4_t)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                                               float** collCostTable, int numAlgo, int numProto, int regBuff,
                                               int* nChannels); /* v4..v6 */
typedef ncclResult_t (*ncclTunerFinalize_t)(void* context); /* v2..v6 (v2..v4 call it destroy) */

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction);
  ncclResult_t (*getCollInfo)(ncclFunc_t collType, size_t nBytes, int collNetSupport, int nvlsSupport,
                              int numPipeOps, int* algorithm, int* protocol, int* nChannels);
  ncclResult_t (*destroy)(void);
} ncclTuner_v1_t;

typedef struct {
  const char* name;
  ncclTunerInitV2_t init;
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int collNetSupport,
                              int nvlsSupport, int numPipeOps, int* algorithm, int* protocol, int* nChannels);
  ncclTunerFinalize_t destroy;
} ncclTuner_v2_t;

typedef struct {
  const char* name;
  ncclTunerInitV2_t init;
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int* nChannels);
  ncclTunerFinalize_t destroy;
} ncclTuner_v3_t;

typedef struct {
  const char* name;
  ncclTunerInitV2_t init;
  ncclTunerCostTableV4_t getCollInfo;
  ncclTunerFinalize_t destroy;
} ncclTuner_v4_t;

typedef struct {
  const char* name;
  ncclTunerInitV5_t init;
  ncclTunerCostTableV4_t getCollInfo;
  ncclTunerFinalize_t finalize;
} ncclTuner_v5_t;

/* v6 is v5 with getChunkSize appended (NVIDIA/nccl src/include/plugin/tuner/tuner_v6.h); NULL keeps NCCL's. */
typedef struct {
  const char* name;
  ncclTunerInitV5_t init;
  ncclTunerCostTableV4_t getCollInfo;
  ncclTunerFinalize_t finalize;
  ncclResult_t (*getChunkSize)(void* context, ncclFunc_t collType, size_t nBytes, int algo, int proto,
                               int nChannels, size_t* chunkSize);
} ncclTuner_v6_t;

static Context* newContext(size_t nRanks, size_t nNodes, ncclDebugLogger_t log, int maxChannels) {
  Context* ctx = calloc(1, sizeof(Context));
  if (ctx == NULL) return NULL;
  ctx->nRanks = nRanks;
  ctx->nNodes = nNodes;
  ctx->log = log;
  ctx->maxChannels = maxChannels;
  loadRules(ctx);
  if (!buildIndex(ctx)) say(ctx, NCCL_LOG_WARN, "out of memory indexing the rules; no overrides");
  return ctx;
}

/* v3..v6: lower the first applicable rule's cell to 0.0; NCCL's table is [numAlgo][numProto] floats. */
static ncclResult_t costTableInfo(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                                  float** collCostTable, int numAlgo, int numProto, int regBuff, int* nChannels) {
  Context* ctx = (Context*)context;
  *nChannels = 0;
  if (ctx == NULL || collCostTable == NULL) return ncclSuccess;
  float* table = (float*)collCostTable;
  Allowed a = {table, numAlgo, numProto, 0, 0};
  const Rule* r = firstRule(ctx, (int)collType, nBytes, numPipeOps, regBuff, &a);
  if (r == NULL) return ncclSuccess;
  table[r->algo * numProto + r->proto] = 0.0f;
  if (r->nChannels > 0) *nChannels = r->nChannels;
  return ncclSuccess;
}

static ncclResult_t pairInfo(Context* ctx, ncclFunc_t collType, size_t nBytes, int collNetSupport, int nvlsSupport,
                             int numPipeOps, int* algorithm, int* protocol, int* nChannels) {
  *nChannels = 0;
  if (ctx == NULL) return ncclSuccess;
  Allowed a = {NULL, 0, 0, collNetSupport, nvlsSupport};
  const Rule* r = firstRule(ctx, (int)collType, nBytes, numPipeOps, -1, &a);
  if (r == NULL) return ncclSuccess;
  *algorithm = r->algo;
  *protocol = r->proto;
  if (r->nChannels > 0) *nChannels = r->nChannels;
  return ncclSuccess;
}

/* --- the entry points, one set per ABI version ---------------------------------------------------- */

static ncclResult_t finalize(void* context) {
  Context* ctx = (Context*)context;
  if (ctx != NULL) {
    free(ctx->rules);
    freeIndex(&ctx->index);
  }
  free(ctx);
  return ncclSuccess;
}

/* A context NCCL may hold whatever happens: out of memory leaves a null one, which changes nothing. */
static ncclResult_t initLegacy(size_t nRanks, size_t nNodes, ncclDebugLogger_t log, void** context) {
  *context = newContext(nRanks, nNodes, log, MAX_CHANNELS_OLD);
  return ncclSuccess;
}

static ncclResult_t initV5(void** context, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t log,
                           ncclNvlDomainInfo_v5_t* nvlDomainInfo, ncclTunerConstants_v5_t* constants) {
  (void)commId;
  (void)nvlDomainInfo;
  (void)constants;
  *context = newContext(nRanks, nNodes, log, MAX_CHANNELS_NEW);
  return ncclSuccess;
}

static ncclResult_t infoV2(void* context, ncclFunc_t collType, size_t nBytes, int collNetSupport, int nvlsSupport,
                           int numPipeOps, int* algorithm, int* protocol, int* nChannels) {
  return pairInfo((Context*)context, collType, nBytes, collNetSupport, nvlsSupport, numPipeOps, algorithm, protocol,
                  nChannels);
}

static ncclResult_t infoV3(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** table,
                           int numAlgo, int numProto, int* nChannels) {
  return costTableInfo(context, collType, nBytes, numPipeOps, table, numAlgo, numProto, -1, nChannels);
}

/* v1 (NCCL 2.19-2.20) has no context argument: NCCL calls init and destroy once per communicator, from any
 * thread, and getCollInfo with no way to tell communicators apart. So one context serves them all, made by the
 * first init and freed by the last destroy (a count, not the latest init, owns it: a communicator created or
 * destroyed while another enqueues never frees what that one reads), every call under one lock. A line for one
 * shape must not steer a communicator of another, so once communicators of different shapes are alive only
 * lines for any shape (nNodes and nRanks -1) apply, until the last of them is destroyed. */
static pthread_mutex_t v1Lock = PTHREAD_MUTEX_INITIALIZER;
static Context* v1Context = NULL; /* guarded by v1Lock */
static int v1Users = 0;           /* communicators initialised and not destroyed; guarded by v1Lock */

static ncclResult_t initV1(size_t nRanks, size_t nNodes, ncclDebugLogger_t log) {
  pthread_mutex_lock(&v1Lock);
  if (v1Users++ == 0 || v1Context == NULL) {
    finalize(v1Context);
    v1Context = newContext(nRanks, nNodes, log, MAX_CHANNELS_OLD);
  } else if (!v1Context->mixedShape && (nRanks != v1Context->nRanks || nNodes != v1Context->nNodes)) {
    v1Context->mixedShape = 1;
    say(v1Context, NCCL_LOG_WARN,
        "communicators of %zu ranks on %zu nodes and %zu ranks on %zu nodes share the v1 plugin, which cannot tell "
        "them apart: only lines with nNodes and nRanks -1 apply until they are destroyed",
        v1Context->nRanks, v1Context->nNodes, nRanks, nNodes);
    if (!buildIndex(v1Context)) say(v1Context, NCCL_LOG_WARN, "out of memory indexing the rules; no overrides");
  }
  pthread_mutex_unlock(&v1Lock);
  return ncclSuccess;
}

static ncclResult_t infoV1(ncclFunc_t collType, size_t nBytes, int collNetSupport, int nvlsSupport, int numPipeOps,
                           int* algorithm, int* protocol, int* nChannels) {
  pthread_mutex_lock(&v1Lock);
  ncclResult_t rc = pairInfo(v1Context, collType, nBytes, collNetSupport, nvlsSupport, numPipeOps, algorithm,
                             protocol, nChannels);
  pthread_mutex_unlock(&v1Lock);
  return rc;
}

static ncclResult_t destroyV1(void) {
  pthread_mutex_lock(&v1Lock);
  if (v1Users > 0 && --v1Users == 0) {
    finalize(v1Context);
    v1Context = NULL;
  }
  pthread_mutex_unlock(&v1Lock);
  return ncclSuccess;
}

/* Not NCCL's: how many candidate lines the calls on a context compared (NULL: v1's shared one), so a test can
 * tell a lookup from a scan. */
unsigned long long collbenchTunerExamined(void* context) {
  if (context != NULL) return ((Context*)context)->examined;
  pthread_mutex_lock(&v1Lock);
  unsigned long long n = v1Context == NULL ? 0 : v1Context->examined;
  pthread_mutex_unlock(&v1Lock);
  return n;
}

#define NAME "collbench"
const ncclTuner_v6_t ncclTunerPlugin_v6 = {NAME, initV5, costTableInfo, finalize, NULL};
const ncclTuner_v5_t ncclTunerPlugin_v5 = {NAME, initV5, costTableInfo, finalize};
const ncclTuner_v4_t ncclTunerPlugin_v4 = {NAME, initLegacy, costTableInfo, finalize};
const ncclTuner_v3_t ncclTunerPlugin_v3 = {NAME, initLegacy, infoV3, finalize};
const ncclTuner_v2_t ncclTunerPlugin_v2 = {NAME, initLegacy, infoV2, finalize};
const ncclTuner_v1_t ncclTunerPlugin_v1 = {NAME, initV1, infoV1, destroyV1};
