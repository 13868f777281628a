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
 * Never fails NCCL: a missing, empty or malformed file is one warning through NCCL's logger and no
 * overrides; init always succeeds.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* --- NCCL's ABI, as its headers declare it -------------------------------------------------------- */

typedef enum { ncclSuccess = 0, ncclSystemError = 2, ncclInternalError = 3 } ncclResult_t;
typedef enum { NCCL_LOG_NONE = 0, NCCL_LOG_VERSION = 1, NCCL_LOG_WARN = 2, NCCL_LOG_INFO = 3 } ncclDebugLogLevel;
typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                                  const char* fmt, ...);
typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4
} ncclFunc_t;

#define NCCL_TUNING 64
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6
#define NUM_ALGOS 7
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2
#define NUM_PROTOS 3
#define NCCL_ALGO_PROTO_IGNORE -1.0f

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

/* --- the config file -------------------------------------------------------------------------------- */

#define PREFIX "TUNER/collbench: "

typedef struct {
  int coll;
  size_t minBytes, maxBytes;
  int algo, proto, nChannels, nNodes, nRanks, numPipeOps, regBuff;
  int lineNo;
} Rule;

typedef struct {
  Rule* rules;
  int nRules;
  size_t nRanks, nNodes;
  ncclDebugLogger_t log;
} Context;

static const char* const kColls[] = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"};
static const char* const kAlgos[] = {"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"};
static const char* const kProtos[] = {"ll", "ll128", "simple"};

static int lookup(const char* s, const char* const* names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}

static char* trim(char* s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n')) s[--n] = '\0';
  return s;
}

/* A whole decimal integer >= lo (or exactly -1 where anyOk); -1 for max_bytes means unbounded, as the
 * example plugin's strtoull reads it. */
static int parseInt(const char* s, long long lo, int anyOk, long long* out) {
  if (*s == '\0') return 0;
  char* end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0') return 0;
  if (v == -1 && anyOk) {
    *out = -1;
    return 1;
  }
  if (v < lo || v > INT32_MAX) return 0;
  *out = v;
  return 1;
}

static int parseBytes(const char* s, size_t* out) {
  if (strcmp(s, "-1") == 0) {
    *out = SIZE_MAX;
    return 1;
  }
  if (*s < '0' || *s > '9') return 0;
  char* end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0') return 0;
  *out = (size_t)v;
  return 1;
}

/* One rule from one line; 0 with *why set when the line is malformed. */
static int parseRule(char* line, Rule* r, const char** why) {
  char* fields[11];
  int n = 0;
  char* save = NULL;
  for (char* tok = strtok_r(line, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    if (n == 11) break;
    fields[n++] = trim(tok);
  }
  long long v;
  *why = "expected 8 to 10 comma-separated fields";
  if (n < 8 || n > 10) return 0;
  *why = "unknown collective (broadcast, reduce, allgather, reducescatter, allreduce)";
  if ((r->coll = lookup(fields[0], kColls, 5)) < 0) return 0;
  *why = "min_bytes and max_bytes must be byte counts (max_bytes -1: unbounded), min <= max";
  if (!parseBytes(fields[1], &r->minBytes) || !parseBytes(fields[2], &r->maxBytes)) return 0;
  if (r->minBytes == SIZE_MAX || r->minBytes > r->maxBytes) return 0;
  *why = "unknown algorithm (tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat)";
  if ((r->algo = lookup(fields[3], kAlgos, NUM_ALGOS)) < 0) return 0;
  *why = "unknown protocol (ll, ll128, simple)";
  if ((r->proto = lookup(fields[4], kProtos, NUM_PROTOS)) < 0) return 0;
  *why = "channels, nNodes, nRanks, numPipeOps must be -1 or a count >= 1; regBuff -1, 0 or 1";
  if (!parseInt(fields[5], 1, 1, &v)) return 0;
  r->nChannels = (int)v;
  if (!parseInt(fields[6], 1, 1, &v)) return 0;
  r->nNodes = (int)v;
  if (!parseInt(fields[7], 1, 1, &v)) return 0;
  r->nRanks = (int)v;
  r->numPipeOps = -1;
  r->regBuff = -1;
  if (n >= 9) {
    if (!parseInt(fields[8], 1, 1, &v)) return 0;
    r->numPipeOps = (int)v;
  }
  if (n == 10) {
    if (!parseInt(fields[9], 0, 1, &v) || v > 1) return 0;
    r->regBuff = (int)v;
  }
  return 1;
}

/* Formats here, so NCCL's logger gets one finished line whatever its own formatting does. */
__attribute__((format(printf, 3, 4))) static void say(const Context* ctx, ncclDebugLogLevel level, const char* fmt,
                                                      ...) {
  if (ctx == NULL || ctx->log == NULL) return;
  char text[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  ctx->log(level, NCCL_TUNING, __FILE__, __LINE__, "%s%s", PREFIX, text);
}

/* All rules of the file, or none: a file that is partly wrong is not half-applied. */
static void loadRules(Context* ctx) {
  const char* path = getenv("NCCL_TUNER_CONFIG_FILE");
  if (path == NULL || *path == '\0') {
    say(ctx, NCCL_LOG_WARN, "NCCL_TUNER_CONFIG_FILE is not set; no overrides, NCCL keeps its own choices");
    return;
  }
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    say(ctx, NCCL_LOG_WARN, "cannot read %s (%s); no overrides, NCCL keeps its own choices", path, strerror(errno));
    return;
  }
  char* line = NULL;
  size_t cap = 0;
  int lineNo = 0, ok = 1, max = 0;
  const char* why = "";
  int badLine = 0;
  while (getline(&line, &cap, f) >= 0) {
    lineNo++;
    char* text = trim(line);
    if (*text == '\0' || *text == '#') continue;
    if (ctx->nRules == max) {
      max = max ? 2 * max : 16;
      Rule* grown = realloc(ctx->rules, (size_t)max * sizeof(Rule));
      if (grown == NULL) {
        ok = 0;
        why = "out of memory";
        badLine = lineNo;
        break;
      }
      ctx->rules = grown;
    }
    Rule* r = &ctx->rules[ctx->nRules];
    if (!parseRule(text, r, &why)) {
      ok = 0;
      badLine = lineNo;
      break;
    }
    r->lineNo = lineNo;
    ctx->nRules++;
  }
  free(line);
  fclose(f);
  if (!ok) {
    free(ctx->rules);
    ctx->rules = NULL;
    ctx->nRules = 0;
    say(ctx, NCCL_LOG_WARN, "%s line %d: %s; no overrides, NCCL keeps its own choices", path, badLine, why);
    return;
  }
  if (ctx->nRules == 0) {
    say(ctx, NCCL_LOG_WARN, "%s holds no rules; no overrides, NCCL keeps its own choices", path);
    return;
  }
  say(ctx, NCCL_LOG_INFO, "%d rules from %s for %zu ranks on %zu nodes", ctx->nRules, path, ctx->nRanks,
      ctx->nNodes);
}

static Context* newContext(size_t nRanks, size_t nNodes, ncclDebugLogger_t log) {
  Context* ctx = calloc(1, sizeof(Context));
  if (ctx == NULL) return NULL;
  ctx->nRanks = nRanks;
  ctx->nNodes = nNodes;
  ctx->log = log;
  loadRules(ctx);
  return ctx;
}

static int matches(const Rule* r, const Context* ctx, int coll, size_t nBytes, int numPipeOps, int regBuff) {
  return r->coll == coll && nBytes >= r->minBytes && nBytes <= r->maxBytes &&
         (r->nNodes == -1 || (size_t)r->nNodes == ctx->nNodes) &&
         (r->nRanks == -1 || (size_t)r->nRanks == ctx->nRanks) &&
         (r->numPipeOps == -1 || r->numPipeOps == numPipeOps) && (r->regBuff == -1 || regBuff == -1 || r->regBuff == regBuff);
}

/* v3..v6: lower the first applicable rule's cell to 0.0; NCCL's table is [numAlgo][numProto] floats. */
static ncclResult_t costTableInfo(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                                  float** collCostTable, int numAlgo, int numProto, int regBuff, int* nChannels) {
  Context* ctx = (Context*)context;
  *nChannels = 0;
  if (ctx == NULL || collCostTable == NULL) return ncclSuccess;
  float* table = (float*)collCostTable;
  for (int i = 0; i < ctx->nRules; i++) {
    const Rule* r = &ctx->rules[i];
    if (!matches(r, ctx, (int)collType, nBytes, numPipeOps, regBuff)) continue;
    if (r->algo >= numAlgo || r->proto >= numProto || table[r->algo * numProto + r->proto] == NCCL_ALGO_PROTO_IGNORE) {
      say(ctx, NCCL_LOG_INFO, "line %d: NCCL cannot run %s/%s for %s of %zu bytes here; passed over", r->lineNo,
          kAlgos[r->algo], kProtos[r->proto], kColls[r->coll], nBytes);
      continue;
    }
    table[r->algo * numProto + r->proto] = 0.0f;
    if (r->nChannels > 0) *nChannels = r->nChannels;
    return ncclSuccess;
  }
  return ncclSuccess;
}

/* v1/v2: no cost table; answer only pairs NCCL could run (ncclTopoTuneModel, src/graph/tuning.cc). */
static int runnable(const Context* ctx, int coll, int algo, int proto, int collNetSupport, int nvlsSupport) {
  int simpleOnly = algo != NCCL_ALGO_TREE && algo != NCCL_ALGO_RING;
  if (simpleOnly && proto != NCCL_PROTO_SIMPLE) return 0;
  if ((algo == NCCL_ALGO_COLLNET_DIRECT || algo == NCCL_ALGO_COLLNET_CHAIN) && !collNetSupport) return 0;
  if ((algo == NCCL_ALGO_NVLS || algo == NCCL_ALGO_NVLS_TREE) && !nvlsSupport) return 0;
  if (algo == NCCL_ALGO_NVLS_TREE && ctx->nNodes == 1) return 0;
  switch (coll) {
    case ncclFuncBroadcast:
    case ncclFuncReduce: return algo == NCCL_ALGO_RING;
    case ncclFuncAllGather:
    case ncclFuncReduceScatter: return algo == NCCL_ALGO_RING || algo == NCCL_ALGO_NVLS || algo == NCCL_ALGO_COLLNET_DIRECT;
    case ncclFuncAllReduce: return algo != NCCL_ALGO_PAT;
    default: return 0;
  }
}

static ncclResult_t pairInfo(Context* ctx, ncclFunc_t collType, size_t nBytes, int collNetSupport, int nvlsSupport,
                             int numPipeOps, int* algorithm, int* protocol, int* nChannels) {
  *nChannels = 0;
  if (ctx == NULL) return ncclSuccess;
  for (int i = 0; i < ctx->nRules; i++) {
    const Rule* r = &ctx->rules[i];
    if (!matches(r, ctx, (int)collType, nBytes, numPipeOps, -1)) continue;
    if (!runnable(ctx, (int)collType, r->algo, r->proto, collNetSupport, nvlsSupport)) continue;
    *algorithm = r->algo;
    *protocol = r->proto;
    if (r->nChannels > 0) *nChannels = r->nChannels;
    return ncclSuccess;
  }
  return ncclSuccess;
}

/* --- the entry points, one set per ABI version ---------------------------------------------------- */

static ncclResult_t finalize(void* context) {
  Context* ctx = (Context*)context;
  if (ctx != NULL) free(ctx->rules);
  free(ctx);
  return ncclSuccess;
}

/* A context NCCL may hold whatever happens: out of memory leaves a null one, which changes nothing. */
static ncclResult_t initLegacy(size_t nRanks, size_t nNodes, ncclDebugLogger_t log, void** context) {
  *context = newContext(nRanks, nNodes, log);
  return ncclSuccess;
}

static ncclResult_t initV5(void** context, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t log,
                           ncclNvlDomainInfo_v5_t* nvlDomainInfo, ncclTunerConstants_v5_t* constants) {
  (void)commId;
  (void)nvlDomainInfo;
  (void)constants;
  *context = newContext(nRanks, nNodes, log);
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

/* v1 (NCCL 2.19-2.20) has no context argument: NCCL calls init once per communicator and getCollInfo with
 * no way to tell communicators apart, so rules for a shape apply to the communicator created last. */
static Context* v1Context = NULL;

static ncclResult_t initV1(size_t nRanks, size_t nNodes, ncclDebugLogger_t log) {
  finalize(v1Context);
  v1Context = newContext(nRanks, nNodes, log);
  return ncclSuccess;
}

static ncclResult_t infoV1(ncclFunc_t collType, size_t nBytes, int collNetSupport, int nvlsSupport, int numPipeOps,
                           int* algorithm, int* protocol, int* nChannels) {
  return pairInfo(v1Context, collType, nBytes, collNetSupport, nvlsSupport, numPipeOps, algorithm, protocol,
                  nChannels);
}

static ncclResult_t destroyV1(void) {
  finalize(v1Context);
  v1Context = NULL;
  return ncclSuccess;
}

#define NAME "collbench"
const ncclTuner_v6_t ncclTunerPlugin_v6 = {NAME, initV5, costTableInfo, finalize, NULL};
const ncclTuner_v5_t ncclTunerPlugin_v5 = {NAME, initV5, costTableInfo, finalize};
const ncclTuner_v4_t ncclTunerPlugin_v4 = {NAME, initLegacy, costTableInfo, finalize};
const ncclTuner_v3_t ncclTunerPlugin_v3 = {NAME, initLegacy, infoV3, finalize};
const ncclTuner_v2_t ncclTunerPlugin_v2 = {NAME, initLegacy, infoV2, finalize};
const ncclTuner_v1_t ncclTunerPlugin_v1 = {NAME, initV1, infoV1, destroyV1};
