/*
 * The parts of collbench's NCCL tuner plugin (nccl_tuner_plugin.c says what it does) share this: NCCL's ABI
 * basics, the plugin's limits, its rules, index and context, and what each part offers the others.
 *
 *   nccl_tuner_rules.c   the config file: reading it, parsing its lines, saying what is wrong with it
 *   nccl_tuner_index.c   the index of a communicator's rules, and the first rule a call may take
 *   nccl_tuner_plugin.c  what NCCL sees: the versioned entry points ncclTunerPlugin_v1 .. v6
 *
 * Built as one shared object from the three (collbench/exporters/nccl_plugin.py, PLUGIN_SOURCES). What the
 * parts share is hidden from the object's exported symbols (CB_HIDDEN): NCCL dlsyms ncclTunerPlugin_vN
 * alone, and a global named loadRules or say must not meet another library's in the process.
 */
#ifndef COLLBENCH_NCCL_TUNER_H
#define COLLBENCH_NCCL_TUNER_H

#include <stddef.h>
#include <stdint.h>

#define CB_HIDDEN __attribute__((visibility("hidden")))

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

/* The names the config file spells, by NCCL's numbering of collectives, algorithms and protocols. */
extern CB_HIDDEN const char* const kColls[5];
extern CB_HIDDEN const char* const kAlgos[NUM_ALGOS];
extern CB_HIDDEN const char* const kProtos[NUM_PROTOS];

/* nccl_tuner_rules.c */

/* One line through the context's NCCL logger, after PREFIX; nothing without a logger. */
CB_HIDDEN __attribute__((format(printf, 3, 4))) void say(const Context* ctx, ncclDebugLogLevel level,
                                                         const char* fmt, ...);
/* ctx->rules from NCCL_TUNER_CONFIG_FILE: all well-formed rules of the file, or none. */
CB_HIDDEN void loadRules(Context* ctx);

/* nccl_tuner_index.c */

/* Whether a line is for the context's communicator shape (its nNodes and nRanks, or -1 for any). */
CB_HIDDEN int fitsShape(const Rule* r, const Context* ctx);

/* What NCCL lets a call take: the v3+ cost table's cell not ignored, or for v1/v2 a pair NCCL could run. */
typedef struct {
  const float* table; /* NULL: v1/v2 */
  int numAlgo, numProto, collNetSupport, nvlsSupport;
} Allowed;

/* ctx->index for the context's shape; 0 when out of memory (the context then answers nothing). */
CB_HIDDEN int buildIndex(Context* ctx);
CB_HIDDEN void freeIndex(Index* ix);
/* The first line in file order that matches the call and that NCCL lets it take, or NULL. */
CB_HIDDEN const Rule* firstRule(Context* ctx, int coll, size_t nBytes, int numPipeOps, int regBuff, const Allowed* a);

#endif
