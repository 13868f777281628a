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
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* More lines than any profile exports (one line per size range, collective and communicator shape); a file
 * past it is someone's mistake, and every communicator holds its own copy of the rules. */
#define MAX_RULES 100000

/* Only a regular file of at most this many bytes, with lines of at most MAX_LINE_BYTES, is read: init runs
 * inside every rank's ncclCommInit, and a FIFO would block it (for ever, on every rank), /dev/zero or a file
 * of junk would fill memory. A config of MAX_RULES lines is about 5 MB. */
#define MAX_FILE_BYTES (64L << 20)
#define MAX_LINE_BYTES 4096

/* The largest channel count NCCL can take from a tuner. MAXCHANNELS (src/include/device.h) is 32 up to 2.24
 * and 64 from 2.25: NCCL's per-channel arrays have that many entries. From 2.22 NCCL also stores the count in
 * `int32_t nMaxChannels:8` (struct ncclTaskColl, src/include/comm.h), so 128 and up would wrap to a negative
 * count or 0, and its CollNet path uses the count as it is. v1-v3 (2.19-2.23) and v4 (2.24-2.27, 2.24 with
 * 32) get 32, v5 and v6 (2.28 and later) 64. */
#define MAX_CHANNELS_OLD 32
#define MAX_CHANNELS_NEW 64

typedef struct {
  int coll;
  size_t minBytes, maxBytes;
  int algo, proto, nChannels, nNodes, nRanks, numPipeOps, regBuff;
  int lineNo;
} Rule;

/* Lines of one collective that NCCL takes or refuses together: a line's fate depends on its algorithm,
 * protocol, numPipeOps and regBuff, never on its byte range. Per byte count, only the group's first line
 * (lowest line number) whose range holds it can win: the group's segments say which it is. */
typedef struct {
  int coll, numPipeOps, regBuff, algo, proto;
  int firstSeg, nSegs;
} Group;

/* The rules of one communicator shape, indexed: a call costs a binary search per group that can answer. */
typedef struct {
  Rule* rules; /* those whose nNodes and nRanks fit the shape, sorted by group then min_bytes */
  Group* groups;
  int nGroups;
  int collFirst[5], collEnd[5]; /* each collective's groups, sorted by numPipeOps (-1 first) */
  size_t* segStart;             /* a segment runs from its start to the next one's, or without end */
  int* segRule;                 /* the rule that wins in the segment (index into rules), -1 for none */
} Index;

typedef struct {
  Rule* rules; /* every rule of the file, in line order */
  int nRules;
  size_t nRanks, nNodes;
  int mixedShape; /* v1 only: live communicators of different shapes, so only lines for any shape apply */
  int maxChannels;
  Index index;
  unsigned long long examined; /* candidate lines compared, for tests that the index is used */
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

/* The config file opened for reading, or NULL after one warning: not there, not a regular file (opened without
 * waiting, so a FIFO cannot block NCCL's init), or past MAX_FILE_BYTES. */
static FILE* openConfig(const Context* ctx, const char* path) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    say(ctx, NCCL_LOG_WARN, "cannot read %s (%s); no overrides, NCCL keeps its own choices", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  const char* wrong = NULL;
  if (fstat(fd, &st) != 0)
    wrong = "cannot be examined";
  else if (!S_ISREG(st.st_mode))
    wrong = "is not a regular file (a FIFO, a device, a directory)";
  else if (st.st_size > MAX_FILE_BYTES)
    wrong = "is larger than 64 MiB";
  FILE* f = wrong == NULL ? fdopen(fd, "r") : NULL;
  if (f == NULL) {
    close(fd);
    say(ctx, NCCL_LOG_WARN, "%s %s; no overrides, NCCL keeps its own choices", path, wrong ? wrong : strerror(errno));
  }
  return f;
}

/* All well-formed rules of the file, or none: a file that is partly wrong is not half-applied. A well-formed
 * line whose channel count this NCCL cannot hold is skipped with a warning (NCCL would wrap or overrun it),
 * and the lines past MAX_RULES are ignored with a warning. */
static void loadRules(Context* ctx) {
  const char* path = getenv("NCCL_TUNER_CONFIG_FILE");
  if (path == NULL || *path == '\0') {
    say(ctx, NCCL_LOG_WARN, "NCCL_TUNER_CONFIG_FILE is not set; no overrides, NCCL keeps its own choices");
    return;
  }
  FILE* f = openConfig(ctx, path);
  if (f == NULL) return;
  char line[MAX_LINE_BYTES + 2];
  int lineNo = 0, ok = 1, max = 0, wide = 0, capped = 0, comments = 0;
  const char* why = "";
  int badLine = 0;
  long start = 0; /* where the line read next starts: fgets's count of bytes read, which strlen misses past a NUL */
  while (fgets(line, sizeof line, f) != NULL) {
    lineNo++;
    long end = ftell(f);
    const unsigned char* first = (const unsigned char*)line;
    if (lineNo == 1 && ((first[0] == 0xFF && first[1] == 0xFE) || (first[0] == 0xFE && first[1] == 0xFF))) {
      /* Saved by a Windows tool (PowerShell's >, Notepad's 'Unicode'): every other byte is 0, and the first
       * NUL ended the line, which was then called longer than 4096 bytes. */
      ok = 0;
      why = "UTF-16 text (saved by a Windows tool); the config is ASCII: save it as UTF-8";
      badLine = lineNo;
      break;
    }
    if (end >= 0 && (long)strlen(line) != end - start) {
      ok = 0;
      why = "a NUL byte (not a text file)";
      badLine = lineNo;
      break;
    }
    start = end;
    if (strchr(line, '\n') == NULL && !feof(f)) {
      ok = 0;
      why = "a line longer than 4096 bytes";
      badLine = lineNo;
      break;
    }
    /* UTF-8's byte-order mark (Notepad's 'UTF-8 with BOM') read as part of the first collective's name. */
    char* text = trim(lineNo == 1 && strncmp(line, "\xEF\xBB\xBF", 3) == 0 ? line + 3 : line);
    if (*text == '#') comments++;
    if (*text == '\0' || *text == '#') continue;
    if (ctx->nRules == MAX_RULES) {
      capped = lineNo;
      break;
    }
    if (ctx->nRules == max) {
      max = max ? 2 * max : 16;
      if (max > MAX_RULES) max = MAX_RULES;
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
      /* NCCL_TUNER_CONFIG_FILE given the profile or its rows: name the file that belongs there. */
      if (strncmp(text, "schema_version:", 15) == 0 || text[0] == '{')
        why = "this is a collbench profile or its results, not a tuner config: give the file `collbench export "
              "nccl-tuner` (or nccl-plugin -O) wrote";
      ok = 0;
      badLine = lineNo;
      break;
    }
    if (r->nChannels > ctx->maxChannels) {
      if (wide++ < 3)
        say(ctx, NCCL_LOG_WARN, "%s line %d: channels %d is more than this NCCL holds (%d); line skipped", path,
            lineNo, r->nChannels, ctx->maxChannels);
      continue;
    }
    r->lineNo = lineNo;
    ctx->nRules++;
  }
  fclose(f);
  if (!ok) {
    free(ctx->rules);
    ctx->rules = NULL;
    ctx->nRules = 0;
    say(ctx, NCCL_LOG_WARN, "%s line %d: %s; no overrides, NCCL keeps its own choices", path, badLine, why);
    return;
  }
  if (wide > 3)
    say(ctx, NCCL_LOG_WARN, "%s: %d lines skipped in all for more channels than this NCCL holds (%d)", path, wide,
        ctx->maxChannels);
  if (capped)
    say(ctx, NCCL_LOG_WARN, "%s holds more than %d rules: line %d and after are ignored", path, MAX_RULES, capped);
  if (ctx->nRules == 0 && comments > 0 && !wide) {
    /* What `collbench export` writes where the profile leaves NCCL its choice everywhere: no mistake to warn of
     * on every rank's every communicator. */
    say(ctx, NCCL_LOG_INFO, "%s holds comments and no rules; NCCL keeps its own choices", path);
    return;
  }
  if (ctx->nRules == 0) {
    say(ctx, NCCL_LOG_WARN, "%s holds no rules; no overrides, NCCL keeps its own choices", path);
    return;
  }
  say(ctx, NCCL_LOG_INFO, "%d rule%s from %s for %zu ranks on %zu node%s", ctx->nRules, ctx->nRules == 1 ? "" : "s",
      path, ctx->nRanks, ctx->nNodes, ctx->nNodes == 1 ? "" : "s");
}

/* --- the index ------------------------------------------------------------------------------------------ */

static int fitsShape(const Rule* r, const Context* ctx) {
  if (ctx->mixedShape) return r->nNodes == -1 && r->nRanks == -1;
  return (r->nNodes == -1 || (size_t)r->nNodes == ctx->nNodes) && (r->nRanks == -1 || (size_t)r->nRanks == ctx->nRanks);
}

static int cmpInt(int a, int b) { return (a > b) - (a < b); }

static int sameGroup(const Rule* a, const Rule* b) {
  return a->coll == b->coll && a->numPipeOps == b->numPipeOps && a->regBuff == b->regBuff && a->algo == b->algo &&
         a->proto == b->proto;
}

static int byGroupThenMin(const void* pa, const void* pb) {
  const Rule *a = pa, *b = pb;
  int c = cmpInt(a->coll, b->coll);
  if (!c) c = cmpInt(a->numPipeOps, b->numPipeOps);
  if (!c) c = cmpInt(a->regBuff, b->regBuff);
  if (!c) c = cmpInt(a->algo, b->algo);
  if (!c) c = cmpInt(a->proto, b->proto);
  if (!c) c = (a->minBytes > b->minBytes) - (a->minBytes < b->minBytes);
  if (!c) c = cmpInt(a->lineNo, b->lineNo);
  return c;
}

static int bySize(const void* pa, const void* pb) {
  size_t a = *(const size_t*)pa, b = *(const size_t*)pb;
  return (a > b) - (a < b);
}

static void freeIndex(Index* ix) {
  free(ix->rules);
  free(ix->groups);
  free(ix->segStart);
  free(ix->segRule);
  memset(ix, 0, sizeof(*ix));
}

/* A min-heap of rule indices by line number, for the sweep below. */
static void heapPush(int* heap, int* n, int v, const Rule* rules) {
  int i = (*n)++;
  heap[i] = v;
  while (i > 0 && rules[heap[(i - 1) / 2]].lineNo > rules[heap[i]].lineNo) {
    int p = (i - 1) / 2, t = heap[p];
    heap[p] = heap[i];
    heap[i] = t;
    i = p;
  }
}

static void heapPop(int* heap, int* n, const Rule* rules) {
  heap[0] = heap[--(*n)];
  for (int i = 0;;) {
    int l = 2 * i + 1, m = i;
    if (l < *n && rules[heap[l]].lineNo < rules[heap[m]].lineNo) m = l;
    if (l + 1 < *n && rules[heap[l + 1]].lineNo < rules[heap[m]].lineNo) m = l + 1;
    if (m == i) break;
    int t = heap[m];
    heap[m] = heap[i];
    heap[i] = t;
    i = m;
  }
}

/* One group's segments: sweep its boundaries in order, keeping the open ranges in a heap by line number, so
 * the first line covering each stretch of sizes is known; O(n log n) once, instead of O(n) every call. */
static int buildSegments(Index* ix, int first, int count, int* nSegs, size_t* points, int* heap) {
  const Rule* rules = ix->rules;
  int nPoints = 0;
  for (int i = first; i < first + count; i++) {
    points[nPoints++] = rules[i].minBytes;
    if (rules[i].maxBytes != SIZE_MAX) points[nPoints++] = rules[i].maxBytes + 1;
  }
  qsort(points, (size_t)nPoints, sizeof(size_t), bySize);
  int nHeap = 0, next = first, last = -2, made = 0;
  for (int k = 0; k < nPoints; k++) {
    size_t p = points[k];
    if (k > 0 && p == points[k - 1]) continue;
    while (next < first + count && rules[next].minBytes <= p) heapPush(heap, &nHeap, next++, rules);
    while (nHeap > 0 && rules[heap[0]].maxBytes < p) heapPop(heap, &nHeap, rules);
    int winner = nHeap > 0 ? heap[0] : -1;
    if (winner == last) continue;
    ix->segStart[*nSegs + made] = p;
    ix->segRule[*nSegs + made] = winner;
    made++;
    last = winner;
  }
  *nSegs += made;
  return made;
}

/* 0 when out of memory: the context then answers nothing, which leaves NCCL's own choices. */
static int buildIndex(Context* ctx) {
  Index* ix = &ctx->index;
  freeIndex(ix);
  int n = 0;
  for (int i = 0; i < ctx->nRules; i++) n += fitsShape(&ctx->rules[i], ctx);
  if (n == 0) return 1;
  ix->rules = malloc((size_t)n * sizeof(Rule));
  ix->groups = malloc((size_t)n * sizeof(Group));
  ix->segStart = malloc((size_t)2 * n * sizeof(size_t));
  ix->segRule = malloc((size_t)2 * n * sizeof(int));
  size_t* points = malloc((size_t)2 * n * sizeof(size_t));
  int* heap = malloc((size_t)n * sizeof(int));
  if (!ix->rules || !ix->groups || !ix->segStart || !ix->segRule || !points || !heap) {
    free(points);
    free(heap);
    freeIndex(ix);
    return 0;
  }
  n = 0;
  for (int i = 0; i < ctx->nRules; i++)
    if (fitsShape(&ctx->rules[i], ctx)) ix->rules[n++] = ctx->rules[i];
  qsort(ix->rules, (size_t)n, sizeof(Rule), byGroupThenMin);
  int nSegs = 0;
  for (int c = 0; c < 5; c++) ix->collFirst[c] = ix->collEnd[c] = 0;
  for (int i = 0; i < n;) {
    int j = i + 1;
    while (j < n && sameGroup(&ix->rules[i], &ix->rules[j])) j++;
    Group* g = &ix->groups[ix->nGroups];
    const Rule* r = &ix->rules[i];
    *g = (Group){r->coll, r->numPipeOps, r->regBuff, r->algo, r->proto, nSegs, 0};
    g->nSegs = buildSegments(ix, i, j - i, &nSegs, points, heap);
    if (ix->collEnd[r->coll] == 0) ix->collFirst[r->coll] = ix->nGroups;
    ix->collEnd[r->coll] = ++ix->nGroups;
    i = j;
  }
  free(points);
  free(heap);
  return 1;
}

/* The rule that wins the group at nBytes, -1 for none: the last segment starting at or below nBytes. */
static int groupWinner(const Index* ix, const Group* g, size_t nBytes) {
  const size_t* start = ix->segStart + g->firstSeg;
  int lo = 0, hi = g->nSegs;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (start[mid] <= nBytes) lo = mid + 1;
    else hi = mid;
  }
  return lo == 0 ? -1 : ix->segRule[g->firstSeg + lo - 1];
}

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

/* What NCCL lets a call take: the v3+ cost table's cell not ignored, or for v1/v2 a pair NCCL could run. */
typedef struct {
  const float* table; /* NULL: v1/v2 */
  int numAlgo, numProto, collNetSupport, nvlsSupport;
} Allowed;

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

static int allowed(const Context* ctx, const Allowed* a, const Rule* r) {
  if (a->table == NULL) return runnable(ctx, r->coll, r->algo, r->proto, a->collNetSupport, a->nvlsSupport);
  return r->algo < a->numAlgo && r->proto < a->numProto &&
         a->table[r->algo * a->numProto + r->proto] != NCCL_ALGO_PROTO_IGNORE;
}

/* The first line in file order that matches the call and that NCCL lets it take, or NULL. Only the groups of
 * the collective with numPipeOps -1 or the call's own (a binary search away) are asked, one search each. */
static const Rule* firstRule(Context* ctx, int coll, size_t nBytes, int numPipeOps, int regBuff, const Allowed* a) {
  const Index* ix = &ctx->index;
  if (coll < 0 || coll >= 5 || ix->nGroups == 0) return NULL;
  int begin = ix->collFirst[coll], end = ix->collEnd[coll];
  if (begin == end) return NULL;
  int anyEnd = begin;
  while (anyEnd < end && ix->groups[anyEnd].numPipeOps == -1) anyEnd++;
  int lo = anyEnd, hi = end;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (ix->groups[mid].numPipeOps < numPipeOps) lo = mid + 1;
    else hi = mid;
  }
  const Rule* best = NULL;
  const Rule* refused[2 * NUM_ALGOS * NUM_PROTOS * 3];
  int nRefused = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (int gi = pass == 0 ? begin : lo; gi < (pass == 0 ? anyEnd : end); gi++) {
      const Group* g = &ix->groups[gi];
      if (pass == 1 && g->numPipeOps != numPipeOps) break;
      if (g->regBuff != -1 && regBuff != -1 && g->regBuff != regBuff) continue;
      int w = groupWinner(ix, g, nBytes);
      ctx->examined++;
      if (w < 0) continue;
      const Rule* r = &ix->rules[w];
      if (best != NULL && r->lineNo > best->lineNo) continue;
      if (allowed(ctx, a, r)) best = r;
      else if (nRefused < (int)(sizeof(refused) / sizeof(refused[0]))) refused[nRefused++] = r;
    }
  }
  for (int i = 0; i < nRefused; i++)
    if (a->table != NULL && (best == NULL || refused[i]->lineNo < best->lineNo))
      say(ctx, NCCL_LOG_INFO, "line %d: NCCL cannot run %s/%s for %s of %zu bytes here; passed over",
          refused[i]->lineNo, kAlgos[refused[i]->algo], kProtos[refused[i]->proto], kColls[refused[i]->coll], nBytes);
  return best;
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
