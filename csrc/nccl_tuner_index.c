/*
 * collbench's NCCL tuner plugin, the index: NCCL asks before every collective it enqueues, so init indexes the
 * lines that fit the communicator's shape (per collective, per what decides whether NCCL can take them, the
 * first line covering each stretch of sizes) and a call is a few binary searches, whatever the file's length.
 */
#include <stdlib.h>
#include <string.h>

#include "nccl_tuner.h"

int fitsShape(const Rule* r, const Context* ctx) {
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

void freeIndex(Index* ix) {
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
int buildIndex(Context* ctx) {
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
const Rule* firstRule(Context* ctx, int coll, size_t nBytes, int numPipeOps, int regBuff, const Allowed* a) {
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
