/* JSON output helpers: see json.h. */
#include "json.h"

#include <stdlib.h>
#include <string.h>

char *jr_base64(const char *s, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = (const unsigned char *)s;
    char *out = malloc((n + 2) / 3 * 4 + 1);
    if (!out) return NULL;
    char *o = out;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
        *o++ = tab[v >> 18], *o++ = tab[v >> 12 & 63], *o++ = tab[v >> 6 & 63], *o++ = tab[v & 63];
    }
    if (n - i == 1) {
        unsigned v = (unsigned)p[i] << 16;
        *o++ = tab[v >> 18], *o++ = tab[v >> 12 & 63], *o++ = '=', *o++ = '=';
    } else if (n - i == 2) {
        unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8;
        *o++ = tab[v >> 18], *o++ = tab[v >> 12 & 63], *o++ = tab[v >> 6 & 63], *o++ = '=';
    }
    *o = '\0';
    return out;
}

json_t *jr_json_bytes(const char *s, size_t n) {
    json_t *str = json_stringn(s ? s : "", s ? n : 0); /* NULL: not valid UTF-8 (or no memory) */
    if (str) return str;
    char *b = jr_base64(s, n);
    json_t *obj = b ? json_pack("{s:s}", "base64", b) : NULL;
    free(b);
    return obj;
}

int jr_json_print(FILE *out, json_t *doc) {
    if (!doc) return -1;
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    int rc = text ? jr_json_write(out, text, strlen(text)) : -1;
    free(text);
    if (rc != 0 || fputc('\n', out) == EOF) return -1;
    return 0;
}

int jr_json_write(FILE *out, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned c = u[i] == 0x7f ? 0x7f : u[i] == 0xc2 && i + 1 < n && u[i + 1] >= 0x80 && u[i + 1] < 0xa0 ? u[i + 1] : 0;
        if (!c) continue;
        if (fwrite(s + from, 1, i - from, out) != i - from || fprintf(out, "\\u%04x", c) < 0) return -1;
        i += c != 0x7f;
        from = i + 1;
    }
    return fwrite(s + from, 1, n - from, out) == n - from ? 0 : -1;
}
