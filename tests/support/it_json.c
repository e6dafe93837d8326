/* it_json.c: a small strict JSON parser (RFC 8259 values, no extensions),
 * enough for the tests to check that the exit report is valid JSON and has
 * the keys the shim issue lists. Invariant: a node owns its children and
 * strings; it_json_free releases the whole tree. Escapes are validated but
 * \u sequences are kept as written (keys the tests look up are ASCII). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "it_run.h"

struct it_json {
  enum it_json_type type;
  double num;
  char *str;
  size_t n;
  char **keys;
  it_json **kids;
};

typedef struct {
  const char *p;
  int depth;
} cursor;

static it_json *value(cursor *c);

static void ws(cursor *c) {
  while (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r') c->p++;
}

static char *string(cursor *c) {
  if (*c->p != '"') return NULL;
  const char *start = ++c->p;
  while (*c->p != '"') {
    unsigned char ch = (unsigned char)*c->p;
    if (ch < 0x20) return NULL;
    if (ch == '\\') {
      c->p++;
      if (*c->p == 'u') {
        for (int i = 1; i <= 4; i++)
          if (!isxdigit((unsigned char)c->p[i])) return NULL;
        c->p += 4;
      } else if (!*c->p || !strchr("\"\\/bfnrt", *c->p)) {
        return NULL;
      }
    }
    c->p++;
  }
  return strndup(start, (size_t)(c->p++ - start));
}

static int number(cursor *c, double *out) {
  const char *s = c->p;
  if (*s == '-') s++;
  if (*s == '0')
    s++;
  else if (isdigit((unsigned char)*s))
    while (isdigit((unsigned char)*s)) s++;
  else
    return -1;
  if (*s == '.') {
    if (!isdigit((unsigned char)*++s)) return -1;
    while (isdigit((unsigned char)*s)) s++;
  }
  if (*s == 'e' || *s == 'E') {
    s++;
    if (*s == '+' || *s == '-') s++;
    if (!isdigit((unsigned char)*s)) return -1;
    while (isdigit((unsigned char)*s)) s++;
  }
  *out = strtod(c->p, NULL);
  c->p = s;
  return 0;
}

static int add(it_json *j, char *key, it_json *kid) {
  char **keys = realloc(j->keys, (j->n + 1) * sizeof *keys);
  if (keys) j->keys = keys;
  it_json **kids = realloc(j->kids, (j->n + 1) * sizeof *kids);
  if (kids) j->kids = kids;
  if (!keys || !kids) return -1;
  j->keys[j->n] = key;
  j->kids[j->n++] = kid;
  return 0;
}

/* Object or array body after the opening bracket. */
static int members(cursor *c, it_json *j, char close) {
  ws(c);
  if (*c->p == close) {
    c->p++;
    return 0;
  }
  for (;;) {
    char *key = NULL;
    ws(c);
    if (close == '}') {
      if (!(key = string(c))) return -1;
      ws(c);
      if (*c->p++ != ':') {
        free(key);
        return -1;
      }
    }
    it_json *kid = value(c);
    if (!kid || add(j, key, kid) != 0) {
      free(key);
      it_json_free(kid);
      return -1;
    }
    ws(c);
    if (*c->p == ',') {
      c->p++;
      continue;
    }
    if (*c->p++ == close) return 0;
    return -1;
  }
}

static it_json *value(cursor *c) {
  ws(c);
  if (++c->depth > 64) return NULL;
  it_json *j = calloc(1, sizeof *j);
  int ok = 0;
  if (*c->p == '{' || *c->p == '[') {
    char close = *c->p == '{' ? '}' : ']';
    j->type = close == '}' ? IT_JSON_OBJ : IT_JSON_ARR;
    c->p++;
    ok = members(c, j, close) == 0;
  } else if (*c->p == '"') {
    j->type = IT_JSON_STR;
    ok = (j->str = string(c)) != NULL;
  } else if (strncmp(c->p, "true", 4) == 0 || strncmp(c->p, "null", 4) == 0) {
    j->type = c->p[0] == 't' ? IT_JSON_BOOL : IT_JSON_NULL;
    j->num = c->p[0] == 't';
    c->p += 4;
    ok = 1;
  } else if (strncmp(c->p, "false", 5) == 0) {
    j->type = IT_JSON_BOOL;
    c->p += 5;
    ok = 1;
  } else {
    j->type = IT_JSON_NUM;
    ok = number(c, &j->num) == 0;
  }
  c->depth--;
  if (!ok) {
    it_json_free(j);
    return NULL;
  }
  return j;
}

it_json *it_json_parse(const char *text) {
  if (!text) return NULL;
  cursor c = {text, 0};
  it_json *j = value(&c);
  ws(&c);
  if (j && *c.p != '\0') {
    it_json_free(j);
    return NULL;
  }
  return j;
}

void it_json_free(it_json *j) {
  if (!j) return;
  for (size_t i = 0; i < j->n; i++) {
    if (j->keys) free(j->keys[i]);
    it_json_free(j->kids[i]);
  }
  free(j->keys);
  free(j->kids);
  free(j->str);
  free(j);
}

enum it_json_type it_json_type(const it_json *j) { return j ? j->type : IT_JSON_NULL; }

const it_json *it_json_get(const it_json *obj, const char *key) {
  if (!obj || obj->type != IT_JSON_OBJ) return NULL;
  for (size_t i = 0; i < obj->n; i++)
    if (strcmp(obj->keys[i], key) == 0) return obj->kids[i];
  return NULL;
}

size_t it_json_len(const it_json *arr) { return arr && arr->type == IT_JSON_ARR ? arr->n : 0; }

const it_json *it_json_at(const it_json *arr, size_t i) {
  return arr && arr->type == IT_JSON_ARR && i < arr->n ? arr->kids[i] : NULL;
}

double it_json_num(const it_json *j) { return j && j->type == IT_JSON_NUM ? j->num : 0; }
