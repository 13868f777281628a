/*
 * collbench's NCCL tuner plugin, the config file (NCCL_TUNER_CONFIG_FILE): opened without waiting, read only
 * when a regular file of at most MAX_FILE_BYTES, parsed line by line into rules, all or none, each problem
 * said once through NCCL's logger. The format is NCCL's example plugin's (plugins/tuner/example/).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nccl_tuner.h"

const char* const kColls[5] = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"};
const char* const kAlgos[NUM_ALGOS] = {"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"};
const char* const kProtos[NUM_PROTOS] = {"ll", "ll128", "simple"};

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
__attribute__((format(printf, 3, 4))) void say(const Context* ctx, ncclDebugLogLevel level, const char* fmt,
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

/* "R ranks on N nodes" for a line's shape, "any" where it says -1. */
static void shapeWords(char* out, size_t size, long ranks, long nodes) {
  char r[32] = "any ranks", n[32] = "any nodes";
  if (ranks >= 0) snprintf(r, sizeof r, "%ld rank%s", ranks, ranks == 1 ? "" : "s");
  if (nodes >= 0) snprintf(n, sizeof n, "%ld node%s", nodes, nodes == 1 ? "" : "s");
  snprintf(out, size, "%s on %s", r, n);
}

/* The line on loading says how many of the rules are for this communicator: a profile tuned at 8 ranks, given
 * to a job (or a communicator of it) of 16, reads whole and changes nothing, and "12 rules from FILE for 16
 * ranks" read as if they applied. Where none do, the shapes they are for (the first three) are named. */
static void sayLoaded(const Context* ctx, const char* path) {
  char here[80], shapes[3][80];
  shapeWords(here, sizeof here, (long)ctx->nRanks, (long)ctx->nNodes);
  int fit = 0, nShapes = 0, more = 0;
  for (int i = 0; i < ctx->nRules; i++) {
    const Rule* r = &ctx->rules[i];
    if (fitsShape(r, ctx)) {
      fit++;
      continue;
    }
    char words[80];
    shapeWords(words, sizeof words, r->nRanks, r->nNodes);
    int seen = 0;
    for (int k = 0; k < nShapes; k++) seen |= strcmp(shapes[k], words) == 0;
    if (seen) continue;
    if (nShapes < 3) memcpy(shapes[nShapes++], words, sizeof words);
    else more = 1;
  }
  const char* plural = ctx->nRules == 1 ? "" : "s";
  if (fit == ctx->nRules) {
    say(ctx, NCCL_LOG_INFO, "%d rule%s from %s for %s", ctx->nRules, plural, path, here);
  } else if (fit > 0) {
    say(ctx, NCCL_LOG_INFO, "%d rule%s from %s, %d of them for %s", ctx->nRules, plural, path, fit, here);
  } else {
    say(ctx, NCCL_LOG_INFO, "%d rule%s from %s, none for %s (%s for %s%s%s%s%s%s); NCCL keeps its own choices here",
        ctx->nRules, plural, path, here, ctx->nRules == 1 ? "it is" : "they are", shapes[0], nShapes > 1 ? ", " : "",
        nShapes > 1 ? shapes[1] : "", nShapes > 2 ? ", " : "", nShapes > 2 ? shapes[2] : "", more ? ", ..." : "");
  }
}

/* All well-formed rules of the file, or none: a file that is partly wrong is not half-applied. A well-formed
 * line whose channel count this NCCL cannot hold is skipped with a warning (NCCL would wrap or overrun it),
 * and the lines past MAX_RULES are ignored with a warning. */
void loadRules(Context* ctx) {
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
  sayLoaded(ctx, path);
}
